"""Benchmark: ``propose()`` alone, in-process, per run and per stage (goal: < 100 ms per run).

Run: ``.venv/bin/python benchmarks/propose_stages.py [RUNS_DIR ...] [--json]`` (default: the bundled
``examples/runs`` and the pre-flight runs in ``tests/data/preflight``).

The analysis (``analyze_run``) is done once outside the timing: this measures the proposal engine —
context (calibrate, predict and critique the baseline) -> candidates -> select (predict + critique) ->
explain — the work ``asap propose`` adds on top of ``asap why``. Median of several repetitions, as wall time
and as process CPU time (on a shared machine the wall time also counts waiting for a core).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _time_stages(run, report, reps: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from bot.proposals import candidates, explain, select
    from bot.proposals.context import prepare
    from bot.proposals.engine import rules_for
    from bot.proposals.evidence import Knowledge, playbook_sections
    from bot.proposals.moves import load_playbook

    playbook = load_playbook()
    kn = Knowledge(index=None, sections=playbook_sections())
    rows: dict[str, list[float]] = {"context": [], "candidates": [], "select": [], "explain": [], "total": [],
                                    "cpu": []}
    for _ in range(reps):
        c0 = time.process_time()
        t0 = time.perf_counter()
        ctx = prepare(run, report)
        t1 = time.perf_counter()
        cands = candidates.build(ctx, rules_for(ctx, playbook))
        t2 = time.perf_counter()
        sel = select.select(ctx, cands.pool.ordered(), k=3)
        t3 = time.perf_counter()
        explain.explain(ctx, cands, sel, advice=[], knowledge=kn, k=3, max_critiqued=select.MAX_CRITIQUED, started=t0)
        t4 = time.perf_counter()
        rows["cpu"].append((time.process_time() - c0) * 1000)
        for key, a, b in (("context", t0, t1), ("candidates", t1, t2), ("select", t2, t3), ("explain", t3, t4),
                          ("total", t0, t4)):
            rows[key].append((b - a) * 1000)
    return {k: round(statistics.median(v), 1) for k, v in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path,
                        default=[REPO / "examples" / "runs", REPO / "tests" / "data" / "preflight"])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from bot.analysis.analyze import analyze_run
    from bot.errors import AsapError
    from bot.runs.store import LocalRunStore

    out = []
    for d in args.dirs:
        store = LocalRunStore(d)
        for rid in store.list_ids():
            run = store.get(rid)
            try:
                report = analyze_run(run)
            except AsapError as exc:
                out.append({"run": rid, "error": exc.message})
                continue
            out.append({"run": rid, "basis": report.basis, **_time_stages(run, report, args.reps)})
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for r in out:
        if "error" in r:
            print(f"{r['run']:45s} error: {r['error']}")
            continue
        print(f"{r['run']:45s} {r['basis']:9s} wall {r['total']:7.1f} ms  cpu {r['cpu']:7.1f} ms  (context "
              f"{r['context']:.1f}, candidates {r['candidates']:.1f}, select {r['select']:.1f}, explain {r['explain']:.1f})")
    cpu = [r["cpu"] for r in out if "cpu" in r]
    if cpu:
        worst = max(cpu)
        print(f"goal: propose < 100 ms per run (CPU time: wall time on a shared machine includes waiting for a core); "
              f"median {statistics.median(cpu):.1f} ms, worst {worst:.1f} ms -> " + ("PASS" if worst < 100 else "FAIL"))


if __name__ == "__main__":
    main()
