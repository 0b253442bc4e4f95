"""Benchmark: big and hostile profile files — time and peak memory of one load+analyze, in a fresh process.

Cases (each written into a temporary run folder under /tmp, never into the repository):

* ``hlo_stats``: a valid XProf ``hlo_stats.json`` DataTable of ``--size-mib`` (default 1024 MiB: ~3.5 million
  op rows) plus a small ``overview_page.json``;
* ``trace``: a valid JAX ``*.trace.json.gz`` whose decompressed events total ``--size-mib``;
* ``bomb``: a gzip bomb, ~1 MB of gzip that expands to 1000 MiB of trace events (identical events, ratio
  ~1000:1), which ASAP must refuse (or skip) quickly instead of decompressing and parsing it all.

For each case a child interpreter runs ``load_profile`` + ``analyze_run`` once and reports wall seconds and
the resident-set high-water mark (VmHWM, whole process, imports included). Goal (issue 14): a 1 GiB valid
profile in < 20 s and < 1 GB RSS; the bomb refused in < 20 s and < 1 GB.

    .venv/bin/python benchmarks/profile_size.py [--size-mib 1024] [--cases hlo_stats,trace,bomb] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 20.0
GOAL_RSS_MB = 1000.0
STEPS = 20
STEP_MS = 850.0
CATS = [("convolution fusion", "Compute"), ("loop fusion", "HBM"), ("all-gather", "Unknown"),
        ("all-reduce", "Unknown"), ("reduce-scatter", "Unknown"), ("input fusion", "HBM"), ("data formatting", "HBM")]
COLS = [("rank", "Rank", "number"), ("program_id", "Program id", "string"), ("category", "HLO op category", "string"),
        ("hlo_op_name", "HLO op name", "string"), ("occurrences", "#Occurrences", "number"),
        ("total_time", "Total time (us)", "number"), ("total_self_time", "Total self time (us)", "number"),
        ("normalized_flop_rate", "Normalized GFLOP/s", "number"), ("measured_memory_bw", "Memory BW (GiB/s)", "number"),
        ("hbm_bw", "HBM BW (GiB/s)", "number"),
        ("operational_intensity", "Operational intensity (FLOP/byte)", "number"), ("bound_by", "Bound by", "string")]
RUN_YAML = ("id: {id}\nname: big profile\nchip: tpu-v5p\nnum_chips: 64\n{profile}"
            "model: {{name: llama3-70b, layers: 80, d_model: 8192, d_ff: 28672, heads: 64, kv_heads: 8, vocab: 128256}}\n"
            "training: {{global_batch: 64, seq_len: 8192}}\n")


def _overview(folder: Path) -> None:
    rows = ",".join(f'{{"c":[{{"v":"{s}"}},{{"v":{STEP_MS}}},{{"v":4.0}},{{"v":700.0}},{{"v":120.0}}]}}'
                    for s in range(STEPS))
    cols = ('[{"id":"stepnum","label":"Step","type":"string"},{"id":"stepTimeMs","label":"Step time (ms)","type":"number"},'
            '{"id":"infeedTimeMs","label":"Infeed (ms)","type":"number"},'
            '{"id":"deviceComputeTimeMs","label":"Compute (ms)","type":"number"},'
            '{"id":"deviceCollectivesTimeMs","label":"Collectives (ms)","type":"number"}]')
    (folder / "overview_page.json").write_text(
        '[{"cols":[],"rows":[],"p":{"device_duty_cycle_percent":"96.0%"}},'
        f'{{"cols":{cols},"rows":[{rows}],"p":{{"hardware_type":"TPU"}}}},'
        '{"cols":[],"rows":[],"p":{"device_type":"TPU v5p","device_core_count":"64"}}]', encoding="utf-8")


def write_hlo_stats(folder: Path, size_bytes: int, seed: int = 0) -> int:
    """A valid hlo_stats.json of about ``size_bytes``, written row block by row block (bounded memory)."""
    rng = random.Random(seed)
    cols = ",".join(f'{{"id":"{i}","label":"{lab}","type":"{t}"}}' for i, lab, t in COLS)
    window_us = STEPS * STEP_MS * 1000.0
    est_rows = max(1, size_bytes // 290)
    mean_t = 0.96 * window_us / est_rows
    n = 0
    with (folder / "hlo_stats.json").open("w", encoding="utf-8") as fh:
        fh.write(f'{{"cols":[{cols}],"rows":[')
        written = fh.tell()
        while written < size_bytes - (8 << 20):  # stay under the size: the limit is 1 GiB
            block = []
            for _ in range(20_000):
                cat, bound = CATS[n % len(CATS)]
                t = mean_t * rng.expovariate(1.0)
                block.append(f'{{"c":[{{"v":{n + 1}}},{{"v":"1"}},{{"v":"{cat}"}},{{"v":"{cat.split()[0]}.{n}"}},'
                             f'{{"v":{STEPS}}},{{"v":{t:.3f}}},{{"v":{t:.3f}}},{{"v":{rng.uniform(50, 3e5):.1f}}},'
                             f'{{"v":{rng.uniform(100, 2500):.1f}}},{{"v":{rng.uniform(100, 2500):.1f}}},'
                             f'{{"v":{rng.uniform(0.1, 900):.2f}}},{{"v":"{bound}"}}]}}')
                n += 1
            text = ("," if written > len(cols) + 20 else "") + ",".join(block)
            fh.write(text)
            written += len(text)
        fh.write('],"p":{}}')
    _overview(folder)
    (folder / "run.yaml").write_text(RUN_YAML.format(id=folder.name, profile="profile: [hlo_stats.json, overview_page.json]\n"),
                                     encoding="utf-8")
    return n


def _trace_event(i: int, rng: random.Random) -> str:
    cat = CATS[i % 5][0].split()[0]
    return (f'{{"ph":"X","pid":1,"tid":2,"ts":{i * 3.0:.1f},"dur":{rng.uniform(1, 50):.2f},"name":"{cat}.{i % 5000}",'
            f'"args":{{"hlo_op":"{cat}.{i % 5000}","hlo_module":"jit_train_step","device_ordinal":"0"}}}}')


def write_trace(folder: Path, size_bytes: int, *, bomb: bool = False, seed: int = 0) -> int:
    """A JAX trace.json.gz with ``size_bytes`` of decompressed events; ``bomb``: one event repeated (~1000:1)."""
    rng = random.Random(seed)
    session = folder / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    head = ('{"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":['
            '{"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:TPU:0"}},'
            '{"ph":"M","pid":1,"tid":2,"name":"thread_name","args":{"name":"XLA Ops"}}')
    n = 0
    with gzip.open(session / "host.trace.json.gz", "wt", encoding="utf-8", compresslevel=6 if not bomb else 9) as fh:
        fh.write(head)
        written = len(head)
        same = "," + " " * 2000 + _trace_event(0, rng) if bomb else ""
        while written < size_bytes - (8 << 20):
            text = same * 500 if bomb else "," + ",".join(_trace_event(n + k, rng) for k in range(20_000))
            fh.write(text)
            written += len(text)
            n += 500 if bomb else 20_000
        fh.write("]}")
    (folder / "run.yaml").write_text(RUN_YAML.format(id=folder.name, profile=""), encoding="utf-8")
    return n


def _child(folder: Path) -> None:
    import bot.analysis.analyze  # noqa: F401  (imports are not the work being measured)
    import bot.profiles.loader  # noqa: F401
    from bot.analysis.analyze import analyze_run
    from bot.errors import AsapError
    from bot.profiles.loader import load_profile
    from bot.runs.store import LocalRunStore

    t0 = time.perf_counter()
    outcome: dict[str, object] = {}
    try:
        run = LocalRunStore(folder.parent).get(folder.name)
        profile = load_profile(run)
        report = analyze_run(run, profile)
        outcome = {"result": f"{report.diagnosis.bottleneck}-bound, confidence {report.diagnosis.confidence:.2f}",
                   "ops": len(profile.ops), "warnings": [w[:160] for w in report.warnings[:2]]}
    except AsapError as exc:
        outcome = {"result": "refused", "error": exc.message[:200]}
    seconds = time.perf_counter() - t0
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    outcome["cpu_seconds"] = ru.ru_utime + ru.ru_stime  # wall time on a shared machine includes waiting
    hwm = next(int(ln.split()[1]) / 1024 for ln in Path("/proc/self/status").read_text().splitlines()
               if ln.startswith("VmHWM:"))
    print(json.dumps({"seconds": seconds, "rss_peak_mb": hwm, **outcome}))


def _measure(folder: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, __file__, "--child", str(folder)], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        return {"seconds": float("nan"), "rss_peak_mb": float("nan"), "result": "crashed",
                "error": proc.stderr.strip().splitlines()[-1:] or ["?"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024, help="decompressed size of the big files")
    ap.add_argument("--cases", default="hlo_stats,trace,bomb")
    ap.add_argument("--keep", type=Path, help="write the files here (and keep them) instead of a temp folder")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    root = args.keep or Path(tempfile.mkdtemp(prefix="asap-profile-size-", dir="/tmp"))
    size = args.size_mib << 20
    ok = True
    try:
        for case in args.cases.split(","):
            folder = root / case
            if not (folder / "run.yaml").exists():
                folder.mkdir(parents=True, exist_ok=True)
                t0 = time.perf_counter()
                if case == "hlo_stats":
                    made = f"{write_hlo_stats(folder, size):,} op rows"
                elif case == "trace":
                    made = f"{write_trace(folder, size):,} events"
                else:
                    made = f"{write_trace(folder, 1000 << 20, bomb=True):,} events"
                on_disk = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
                print(f"{case}: wrote {made}, {on_disk / 2**20:.1f} MiB on disk in {time.perf_counter() - t0:.0f} s")
            m = _measure(folder)
            good = float(m["seconds"]) < GOAL_SECONDS and float(m["rss_peak_mb"]) < GOAL_RSS_MB  # type: ignore[arg-type]
            good &= (m["result"] != "crashed") and (case == "bomb" or (m["result"] != "refused" and bool(m.get("ops"))))
            ok &= good
            detail = m.get("error") or f"{m.get('ops')} ops kept"
            print(f"{case}: {m['seconds']:.1f} s wall, {m.get('cpu_seconds', float('nan')):.1f} s CPU, peak RSS {m['rss_peak_mb']:.0f} MB -> {m['result']} ({detail}) "
                  f"[goal < {GOAL_SECONDS:.0f} s and < {GOAL_RSS_MB:.0f} MB: {'PASS' if good else 'FAIL'}]")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
