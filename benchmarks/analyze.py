"""Benchmark: load and analyze a profile with 100,000 op rows; report time and peak memory.

Writes a synthetic XProf ``hlo_stats`` export (Google DataTable JSON, the shape ``xprof`` serves; see
docs/profile-formats.md) with N op rows plus an ``overview_page`` into a temporary run folder, then

* times ``load_profile(run)`` + ``analyze_run(run, profile)`` — median of ``--repeat`` runs in this process;
* measures peak memory of one load+analyze in a fresh subprocess: the growth of the resident set's high
  water mark (``ru_maxrss``) over the process after imports, and the tracemalloc peak of Python objects.

Goal (issue 2): under 1 s and 200 MB on a 2-core machine.

    .venv/bin/python benchmarks/analyze.py [--rows 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

GOAL_SECONDS = 1.0
GOAL_MB = 200.0
STEPS = 20
STEP_MS = 850.0

CATEGORIES = [
    ("convolution fusion", 0.42),
    ("loop fusion", 0.18),
    ("input fusion", 0.06),
    ("all-reduce", 0.08),
    ("all-gather", 0.07),
    ("reduce-scatter", 0.05),
    ("data formatting", 0.04),
    ("custom-call", 0.03),
    ("dynamic-update-slice", 0.02),
    ("all-to-all", 0.01),
    ("infeed", 0.01),
    ("idle", 0.03),
]
BOUND = {"convolution fusion": "Compute", "loop fusion": "HBM", "input fusion": "HBM", "data formatting": "HBM"}


def write_run(folder: Path, rows: int, seed: int = 0) -> dict[str, int]:
    """A run folder with run.yaml, hlo_stats.json (``rows`` ops) and overview_page.json."""
    rng = random.Random(seed)
    window_us = STEPS * STEP_MS * 1000.0
    weights = [w for _, w in CATEGORIES]
    # Heavy-tailed op times (a few big fusions, a long tail), scaled to fill 96% of the window.
    raw = [rng.paretovariate(1.2) for _ in range(rows)]
    scale = 0.96 * window_us / sum(raw)
    cols = [
        {"id": "rank", "label": "Rank", "type": "number"},
        {"id": "program_id", "label": "Program id", "type": "string"},
        {"id": "category", "label": "HLO op category", "type": "string"},
        {"id": "hlo_op_name", "label": "HLO op name", "type": "string"},
        {"id": "occurrences", "label": "#Occurrences", "type": "number"},
        {"id": "total_time", "label": "Total time (us)", "type": "number"},
        {"id": "total_self_time", "label": "Total self time (us)", "type": "number"},
        {"id": "normalized_flop_rate", "label": "Normalized GFLOP/s", "type": "number"},
        {"id": "measured_memory_bw", "label": "Memory BW (GiB/s)", "type": "number"},
        {"id": "hbm_bw", "label": "HBM BW (GiB/s)", "type": "number"},
        {"id": "operational_intensity", "label": "Operational intensity (FLOP/byte)", "type": "number"},
        {"id": "bound_by", "label": "Bound by", "type": "string"},
    ]
    out_rows = []
    cats = rng.choices([c for c, _ in CATEGORIES], weights=weights, k=rows)
    for i, (cat, r) in enumerate(zip(cats, raw, strict=True)):
        t = r * scale
        coll = cat in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
        if cat == "convolution fusion":
            flop_rate, hbm, oi = rng.uniform(1.5e5, 3.5e5), rng.uniform(200, 800), rng.uniform(200, 900)
        elif cat in ("loop fusion", "input fusion", "data formatting", "dynamic-update-slice"):
            flop_rate, hbm, oi = rng.uniform(50, 2000), rng.uniform(1200, 2500), rng.uniform(0.1, 5)
        else:
            flop_rate, hbm, oi = 0.0, 0.0, 0.0
        name = f"{cat.split()[0]}.{i}" if not coll else f"{cat}.{i}"
        out_rows.append(
            {
                "c": [
                    {"v": i + 1},
                    {"v": "1"},
                    {"v": cat},
                    {"v": name},
                    {"v": STEPS * rng.randint(1, 4)},
                    {"v": t},
                    {"v": t},
                    {"v": flop_rate},
                    {"v": hbm},
                    {"v": hbm},
                    {"v": oi},
                    {"v": BOUND.get(cat, "Unknown")},
                ]
            }
        )
    hlo = orjson.dumps({"cols": cols, "rows": out_rows, "p": {}})
    (folder / "hlo_stats.json").write_bytes(hlo)

    step_rows = [
        {"c": [{"v": str(s)}, {"v": STEP_MS * rng.uniform(0.98, 1.02)}, {"v": 4.0}, {"v": 700.0}, {"v": 120.0}]}
        for s in range(STEPS)
    ]
    overview = [
        {"cols": [], "rows": [], "p": {"device_duty_cycle_percent": "96.0%"}},
        {
            "cols": [
                {"id": "stepnum", "label": "Step", "type": "string"},
                {"id": "stepTimeMs", "label": "Step time (ms)", "type": "number"},
                {"id": "infeedTimeMs", "label": "Infeed (ms)", "type": "number"},
                {"id": "deviceComputeTimeMs", "label": "Compute (ms)", "type": "number"},
                {"id": "deviceCollectivesTimeMs", "label": "Collectives (ms)", "type": "number"},
            ],
            "rows": step_rows,
            "p": {"hardware_type": "TPU"},
        },
        {"cols": [], "rows": [], "p": {"device_type": "TPU v5p", "device_core_count": "64"}},
    ]
    (folder / "overview_page.json").write_bytes(orjson.dumps(overview))
    (folder / "run.yaml").write_text(
        "id: bench\n"
        "name: synthetic 100k-op profile\n"
        "chip: tpu-v5p\n"
        "num_chips: 64\n"
        "num_slices: 2\n"
        "profile: [hlo_stats.json, overview_page.json]\n"
        "model: {name: llama3-70b, layers: 80, d_model: 8192, d_ff: 28672, heads: 64, kv_heads: 8, vocab: 128256}\n"
        "training: {global_batch: 64, seq_len: 8192}\n",
        encoding="utf-8",
    )
    return {"hlo_stats_bytes": len(hlo), "rows": rows}


def _load_profile(run):  # noqa: ANN001, ANN202
    """The project's loader when present; else the XProf export readers merged here (same readers)."""
    try:
        from bot.profiles.loader import load_profile
    except ImportError:
        from bot.profiles.xprof_export import read_xprof_export

        ops = read_xprof_export(run.folder / "hlo_stats.json", source="hlo_stats.json")
        ov = read_xprof_export(run.folder / "overview_page.json", source="overview_page.json")
        for name in ("device_kind", "num_devices", "num_steps", "step_time_us", "step_times_us",
                     "device_duty_cycle_percent", "host_wait_percent", "compute_time_percent",
                     "communication_time_percent"):
            setattr(ops, name, getattr(ov, name))
        ops.sources += ov.sources
        ops.warnings += ov.warnings
        return ops, "xprof_export readers (bot.profiles.loader not present)"
    return load_profile(run), "bot.profiles.loader.load_profile"


def load_and_analyze(folder: Path) -> tuple[float, str, str]:
    """One load+analyze; returns (seconds, loader used, bottleneck)."""
    from bot.analysis.analyze import analyze_run
    from bot.runs.store import LocalRunStore

    t0 = time.perf_counter()
    run = LocalRunStore(folder.parent).get(folder.name)
    profile, how = _load_profile(run)
    report = analyze_run(run, profile)
    return time.perf_counter() - t0, how, report.diagnosis.bottleneck


def _peak_rss_mb() -> float:
    """This process's resident-set high-water mark. /proc's VmHWM starts afresh at exec; ru_maxrss on Linux
    carries the parent's peak across fork+exec, so it is only the fallback."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(folder: Path) -> None:
    """Runs in a fresh interpreter: memory of one load+analyze, printed as JSON."""
    import tracemalloc

    import bot.analysis.analyze  # noqa: F401  (imports are not the work being measured)
    import bot.profiles.xprof_export  # noqa: F401
    from bot.runs.store import LocalRunStore

    try:
        import bot.profiles.loader  # noqa: F401
    except ImportError:
        pass
    LocalRunStore(folder.parent).get(folder.name)
    base = _peak_rss_mb()
    seconds, how, bottleneck = load_and_analyze(folder)
    peak = _peak_rss_mb()
    tracemalloc.start()
    load_and_analyze(folder)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({
        "rss_base_mb": base, "rss_peak_mb": peak, "rss_delta_mb": peak - base,
        "tracemalloc_peak_mb": traced_peak / 2**20, "seconds": seconds, "loader": how, "bottleneck": bottleneck,
    }))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0

    with tempfile.TemporaryDirectory(prefix="asap-bench-") as tmp:
        folder = Path(tmp) / "bench"
        folder.mkdir()
        info = write_run(folder, args.rows)
        print(f"profile: {info['rows']:,} op rows, hlo_stats.json {info['hlo_stats_bytes'] / 2**20:.1f} MiB")

        # Memory first, in a fresh interpreter that has done nothing else.
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(folder)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        mem = json.loads(proc.stdout.strip().splitlines()[-1])

        times = []
        how = bottleneck = ""
        for _ in range(args.repeat):
            seconds, how, bottleneck = load_and_analyze(folder)
            times.append(seconds)
        median = statistics.median(times)
        print(f"loader: {how}")
        print(f"diagnosis: {bottleneck}")
        print(f"load+analyze: median {median:.3f} s over {args.repeat} runs (min {min(times):.3f}, max {max(times):.3f})")

        print(
            f"peak memory (fresh process): RSS high-water +{mem['rss_delta_mb']:.0f} MB over imports "
            f"({mem['rss_base_mb']:.0f} -> {mem['rss_peak_mb']:.0f} MB); tracemalloc peak {mem['tracemalloc_peak_mb']:.0f} MB; "
            f"cold load+analyze {mem['seconds']:.3f} s"
        )
        ok_time = median < GOAL_SECONDS
        ok_mem = mem["rss_delta_mb"] < GOAL_MB
        print(f"goal: < {GOAL_SECONDS:.0f} s: {'PASS' if ok_time else 'FAIL'}; < {GOAL_MB:.0f} MB: {'PASS' if ok_mem else 'FAIL'}")
        return 0 if ok_time and ok_mem else 1


if __name__ == "__main__":
    sys.exit(main())
