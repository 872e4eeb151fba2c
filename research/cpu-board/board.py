#!/usr/bin/env python3
"""Turns one run of research/cpu-board/run.sh into the board.

Reads RESULTS/{conditions.txt, memra.jsonl, llama-R.jsonl, llama-d128-R.jsonl}; writes
RESULTS/board.md (the table, pasted into research/cpu-board/<date>.md) and appends the memra rows,
each with the llama.cpp figure of the same round filled in as `anchor`, to
research/tune-data/cpu-<cpu slug>.jsonl. Standard library only.
"""
import argparse
import json
import pathlib
import re
import statistics


def stats(v):
    return {"n": len(v), "median": statistics.median(v), "min": min(v), "max": max(v)}


def pooled(rounds):
    """Board cell over rounds: median of the round medians, min of mins, max of maxes."""
    return {
        "n": sum(r["n"] for r in rounds),
        "median": statistics.median(r["median"] for r in rounds),
        "min": min(r["min"] for r in rounds),
        "max": max(r["max"] for r in rounds),
    }


def fmt(s, digits=1):
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--repo", default=".")
    ap.add_argument("--tune-data", help="JSONL to append the memra rows to")
    a = ap.parse_args()
    res = pathlib.Path(a.results)
    cond = dict(
        line.split("=", 1) for line in (res / "conditions.txt").read_text().splitlines() if "=" in line
    )
    rows = [json.loads(l) for l in (res / "memra.jsonl").read_text().splitlines() if l.strip()]
    # run.sh writes per round: decode row, then ttft row.
    dec = [r for r in rows if r["scenario"] == "decode"]
    ttf = [r for r in rows if r["scenario"] == "ttft"]
    nrounds = len(dec)
    assert nrounds == len(ttf) and nrounds > 0, "expected one decode and one ttft row per round"

    def llama(name):
        out = {}
        for line in (res / name).read_text().splitlines():
            if not line.strip().startswith("{"):
                continue
            t = json.loads(line)
            out[(t["n_prompt"], t["n_gen"], t["n_depth"])] = t
        return out

    def lstats(t):
        return stats(t["samples_ts"])

    flags = cond.get("llama_cpp_cmake", "")
    rnd = []
    for i in range(nrounds):
        r = i + 1
        l0 = llama(f"llama-{r}.jsonl")
        ld = llama(f"llama-d128-{r}.jsonl")
        tg0, pp = l0[(0, 128, 0)], l0[(128, 0, 0)]
        tgd = ld[(0, 128, 128)]
        plen = ttf[i]["params"]["prompt_len"]
        m_ttft = {k: ttf[i][k] for k in ("n", "median", "min", "max")}
        # Prefill tok/s from TTFT (prefill + the first token's logits and sampling).
        m_pre = {
            "n": m_ttft["n"],
            "median": plen / (m_ttft["median"] / 1e3),
            "min": plen / (m_ttft["max"] / 1e3),
            "max": plen / (m_ttft["min"] / 1e3),
        }
        pp_ms = [plen / ts * 1e3 for ts in pp["samples_ts"]]
        rnd.append(
            {
                "memra_decode": {k: dec[i][k] for k in ("n", "median", "min", "max")},
                "memra_prefill": m_pre,
                "memra_ttft": m_ttft,
                "llama_tg_d128": lstats(tgd),
                "llama_tg_d0": lstats(tg0),
                "llama_pp": lstats(pp),
                "llama_pp_ms": stats(pp_ms),
                "llama_build": tg0.get("build_commit", "unknown"),
                "llama_cpu": tg0.get("cpu_info", ""),
                "llama_type": tg0.get("model_type", ""),
            }
        )
        # The shape `memra bench decode --vs llama.cpp` writes (harness/src/bench/mod.rs): anchors
        # by name, each with median/min/max in the row's unit and ratio = memra / anchor median.
        def anchor(st, unit, memra_median, test, also):
            return {
                "llama.cpp": {
                    "name": "llama.cpp",
                    "unit": unit,
                    **st,
                    "ratio": memra_median / st["median"],
                    "extra": {
                        "tool": "llama-bench",
                        "test": test,
                        "also": also,
                        "source": cond.get("llama_cpp", ""),
                        "build_flags": flags,
                        "threads": int(cond.get("threads", "0")),
                        "round": r,
                        "interleaved": "memra decode, memra ttft, llama-bench pp128+tg128, llama-bench tg128 -d 128",
                    },
                }
            }

        dec[i]["anchor"] = anchor(
            lstats(tgd), "tok/s", dec[i]["median"],
            f"tg128 @ d128 (-p 0 -n 128 -d 128 -r {len(tgd['samples_ts'])})",
            {"test": "tg128 @ d0 (-p 128 -n 128)", "unit": "tok/s", **lstats(tg0)},
        )
        # TTFT is a time: the anchor is llama.cpp's pp128 as ms (ratio > 1: memra slower).
        ttf[i]["anchor"] = anchor(
            stats(pp_ms), "ms", ttf[i]["median"],
            f"pp{plen} as ms ({plen} / each pp sample)",
            {"test": f"pp{plen}", "unit": "tok/s", **lstats(pp)},
        )

    P = {k: pooled([x[k] for x in rnd]) for k in rnd[0] if isinstance(rnd[0][k], dict)}
    cpu = cond.get("cpu", "cpu")
    slug = re.sub(r"[^a-z0-9]+", "-", cpu.lower()).strip("-")
    tune = pathlib.Path(a.tune_data or pathlib.Path(a.repo) / "research/tune-data" / f"cpu-{slug}.jsonl")
    tune.parent.mkdir(parents=True, exist_ok=True)
    with tune.open("a") as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")

    ratio = lambda a, b: a["median"] / b["median"]
    lines = [
        f"| figure (SmolLM2-135M-Instruct {rnd[0]['llama_type'] or ''}, {cond.get('threads')} threads) "
        "| memra median (min–max) | llama.cpp median (min–max) | memra / llama.cpp |",
        "|---|---|---|---|",
        f"| decode tok/s, 128 new tokens after a 128-token prompt (llama: tg128 -d 128) "
        f"| {fmt(P['memra_decode'])} | {fmt(P['llama_tg_d128'])} | {ratio(P['memra_decode'], P['llama_tg_d128']):.2f} |",
        f"| decode tok/s, llama.cpp tg128 from an empty context (`-p 128 -n 128`) against memra at depth 128 "
        f"| {fmt(P['memra_decode'])} | {fmt(P['llama_tg_d0'])} "
        f"| {ratio(P['memra_decode'], P['llama_tg_d0']):.2f} |",
        f"| prefill tok/s, 128-token prompt (memra: 128 / TTFT; llama: pp128) "
        f"| {fmt(P['memra_prefill'])} | {fmt(P['llama_pp'])} | {ratio(P['memra_prefill'], P['llama_pp']):.2f} |",
        f"| TTFT ms, 128-token prompt (llama: 128 / pp128 tok/s) "
        f"| {fmt(P['memra_ttft'])} | {fmt(P['llama_pp_ms'])} | {P['llama_pp_ms']['median'] / P['memra_ttft']['median']:.2f} (speed) |",
    ]
    per = ["", "Per round (interleaved: memra then llama.cpp each round):", "",
           "| round | memra decode | llama tg128 d128 | llama tg128 d0 | memra prefill | llama pp128 |",
           "|---|---|---|---|---|---|"]
    for i, x in enumerate(rnd):
        per.append(
            f"| {i + 1} | {fmt(x['memra_decode'])} | {fmt(x['llama_tg_d128'])} | {fmt(x['llama_tg_d0'])} "
            f"| {fmt(x['memra_prefill'])} | {fmt(x['llama_pp'])} |"
        )
    conds = ["", "Conditions:", ""] + [f"- {k}: {v}" for k, v in cond.items()] + [
        f"- memra rows: commit {rows[0]['commit']}, device \"{rows[0]['device']}\", dtype {rows[0]['dtype']}, "
        f"copy bandwidth {rows[0]['copy_gbps']:.1f} GB/s, params {dec[0]['params']} / {ttf[0]['params']}",
        f"- llama.cpp build_commit {rnd[0]['llama_build']}, cpu_info {rnd[0]['llama_cpu']}, model_type {rnd[0]['llama_type']}",
    ]
    load = res / "load.txt"
    if load.exists():
        conds += ["", "Contention log (the machine is shared: each measurement waits for an idle machine and is repeated when other processes used more than OTHERS_MAX cores while it ran):", ""]
        conds += [f"    {l}" for l in load.read_text().splitlines()]
    out = "\n".join(lines + per + conds) + "\n"
    (res / "board.md").write_text(out)
    print(out)
    print(f"memra rows (with anchors) appended to {tune}")


if __name__ == "__main__":
    main()
