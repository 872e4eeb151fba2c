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
            // The wgmma split-K entries are their impl alone, which starts its first weight
            // copies into shared memory (cp.async of the read-only weights) and then waits: the
            // impl's own text is checked below.
            if first.starts_with("linear_tck_impl<") {
                first = "pdl_entry()".into();
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
    // linear_tck_impl: nothing but the weight copies (`next_copy`, `bulk_batch`) or loads
    // (`load_batch`, into registers: tck_ldg) before pdl_entry(), and x,
    // the one input another kernel writes, read after it.
    let tcw = KERNELS
        .iter()
        .find(|k| k.name == "linear_tck.cu")
        .expect("linear_tck.cu");
    let imp = &tcw.src[tcw
        .src
        .find("void linear_tck_impl(")
        .expect("linear_tck_impl")..];
    let wait = imp.find("pdl_entry();").expect("linear_tck_impl waits");
    let before = &imp[imp.find("auto next_copy").expect("next_copy")..wait];
    let (copies, x_read) = (
        before
            .find("for (int j = 0; j < ST - 1; ++j) next_copy();")
            .and(before.find("load_batch(0, 0, min(UB, nus));"))
            .and(before.find("for (int j = 0; j < NBS - 1; ++j) bulk_batch();")),
        imp.find("x + (size_t)(m0 + tok) * K").expect("x read"),
    );
    assert!(
        copies.is_some() && x_read > wait && !before.contains("part["),
        "linear_tck_impl must only copy weights before pdl_entry()"
    );
    assert!(
        entries >= 26,
        "found only {entries} __global__ entries in kernels/*.cu"
    );
}
