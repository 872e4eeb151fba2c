//! Source rules every kernel file must keep (no GPU, no NVRTC needed).

use memra_engine::backend::cuda::compile::KERNELS;

/// Every `__global__` entry point's body begins with `pdl_entry()`: with `PDL = 1` kernels are
/// launched with programmatic stream serialization, and an entry that touched memory before
/// `griddepcontrol.wait` could read what the kernel before it has not finished writing
/// (engine/src/backend/cuda/launch.rs). The one allowed statement before it is an L2 prefetch of
/// weights by the one-token entries: the lane kernels' `if (PDL_EARLY) qr_m1_prefetch<...>(...)`
/// and the tensor-core kernels' `linear_tc_prefetch<...>(...)` (off unless QTC_M1_PREFETCH > 0).
#[test]
fn every_kernel_entry_waits_for_the_grid_before() {
    let mut entries = 0;
    for k in KERNELS {
        let mut rest = k.src;
        while let Some(i) = rest.find("__global__") {
            let after = &rest[i..];
            let body = after.find('{').expect("a __global__ without a body");
            let head = &after[..body];
            let mut stmts = after[body + 1..].split(';').map(|s| {
                s.trim_matches([' ', '\\', '\n', '\t'])
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            let mut first = stmts.next().unwrap_or_default();
            // The one exception: with PDL_EARLY = 1 an entry may first issue L2 prefetches of its
            // weights (read-only for the whole forward, no value changes), then wait.
            if first.starts_with("if (PDL_EARLY) qr_m1_prefetch<")
                || first.starts_with("linear_tc_prefetch<")
            {
                first = stmts.next().unwrap_or_default();
            }
            assert_eq!(
                first,
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
