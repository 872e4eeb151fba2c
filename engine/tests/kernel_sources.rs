//! Source rules every kernel file must keep (no GPU, no NVRTC needed).

use memra_engine::backend::cuda::compile::KERNELS;

/// Every `__global__` entry point's body begins with `pdl_entry()`: with `PDL = 1` kernels are
/// launched with programmatic stream serialization, and an entry that touched memory before
/// `griddepcontrol.wait` could read what the kernel before it has not finished writing
/// (engine/src/backend/cuda/launch.rs).
#[test]
fn every_kernel_entry_waits_for_the_grid_before() {
    let mut entries = 0;
    for k in KERNELS {
        let mut rest = k.src;
        while let Some(i) = rest.find("__global__") {
            let after = &rest[i..];
            let body = after.find('{').expect("a __global__ without a body");
            let head = &after[..body];
            let first = after[body + 1..]
                .trim_start_matches([' ', '\\', '\n', '\t'])
                .split(';')
                .next()
                .unwrap_or("");
            assert_eq!(
                first.trim(),
                "pdl_entry()",
                "{}: the entry `{}` does not begin with pdl_entry()",
                k.name,
                head.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            entries += 1;
            rest = &after[body..];
        }
    }
    assert!(
        entries >= 26,
        "found only {entries} __global__ entries in kernels/*.cu"
    );
}
