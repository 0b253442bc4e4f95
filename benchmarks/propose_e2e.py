"""Benchmark: wall time of a full ``asap propose`` (analysis + calibration + search + Critic + diffs).

Run: ``.venv/bin/python benchmarks/propose_e2e.py`` (``--json`` for machine-readable output).

Cases:
* every bundled sample run under ``examples/runs`` — ``analyze_run`` + ``propose``, the work
  ``asap propose RUN`` does (printing excluded);
* ``v5p-4096``: a Llama-3-70B-like run on 4,096 TPU v5p chips (tensor=8 x fsdp=512, communication-bound,
  report constructed from the stable AnalysisReport contract) — ``propose`` alone, to show the cost of
  enumerating, scoring and critiquing the full 6-axis space at scale;
* ``v5p-4x1024``: the same over 4 slices (ICI x DCN assignments).

Prints the median of several repetitions in milliseconds, and the candidate counts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the report builder shared with the proposal tests


def _median_ms(fn, reps: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), out


def bench_samples(reps: int) -> list[dict[str, object]]:
    from bot.analysis.analyze import analyze_run
    from bot.errors import AsapError
    from bot.proposals.engine import propose
    from bot.runs.store import LocalRunStore

    store = LocalRunStore(REPO / "examples" / "runs")
    rows: list[dict[str, object]] = []
    for rid in store.list_ids():
        run = store.get(rid)
        try:
            ms, ps = _median_ms(lambda run=run: propose(run, analyze_run(run)), reps)
        except (AsapError, ImportError) as exc:
            rows.append({"case": rid, "error": str(exc).splitlines()[0]})
            continue
        rows.append({"case": rid, "ms": round(ms, 1), "proposals": len(ps.proposals), "verdict": ps.verdict,  # type: ignore[attr-defined]
                     **ps.candidates})  # type: ignore[attr-defined]
    return rows


def bench_large(reps: int) -> list[dict[str, object]]:
    from test_proposals_support import LLAMA_70B, make_report, make_run

    from bot.proposals.engine import baseline_mesh, propose

    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, slices, ici, dcn in (
            ("v5p-4096", 1, {"fsdp": 512, "tensor": 8}, None),
            ("v5p-4x1024", 4, {"fsdp": 128, "tensor": 8}, {"fsdp": 4}),
        ):
            run = make_run(Path(tmp), run_id=name, chip="tpu-v5p", num_chips=4096, num_slices=slices, ici=ici, dcn=dcn,
                           model=LLAMA_70B, training={"global_batch": 4096, "seq_len": 8192, "remat": "full"},
                           step_ms=9000)
            base, _ = baseline_mesh(run, None)
            report = make_report(run, base, "communication", step_ms=9000, collective_pct=40)
            ms, ps = _median_ms(lambda run=run, report=report: propose(run, report), reps)
            rows.append({"case": name, "ms": round(ms, 1), "proposals": len(ps.proposals), "verdict": ps.verdict,  # type: ignore[attr-defined]
                         **ps.candidates})  # type: ignore[attr-defined]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = bench_samples(args.reps) + bench_large(args.reps)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        if "error" in r:
            print(f"{r['case']:<28} error: {r['error']}")
        else:
            print(f"{r['case']:<28} {r['ms']:>9.1f} ms  {r['proposals']} proposals ({r['verdict']}); "
                  f"enumerated {r['enumerated']}, critiqued {r['critiqued']}, rejected {r['rejected']}")


if __name__ == "__main__":
    main()
