"""How many real MaxText recipes ASAP answers from the config alone (model, batch and mesh all read from it).

Usage::

    python benchmarks/real_answers.py --maxtext /work/.mirror/AI-Hypercomputer+maxtext/repo \\
        [--megatron /work/.mirror/NVIDIA+Megatron-LM/repo]

Every recipe script under ``src/maxtext/configs/{tpu,gpu}/`` of the checkout (a fetched mirror is enough; its
files are materialized with ``git archive``) becomes a run folder holding a copy of the checkout's configs
and a run.yaml that names only the chip, the device count (from the recipe's comments, as
``benchmarks/real_configs.py`` reads them) and the script. Nothing else: no model, no training section, no
profile. For each run the benchmark calls ``analyze_run`` (``asap why``) and ``propose`` (``asap propose``)
in-process and counts:

* **answered**: a pre-flight diagnosis and three proposals, with the model and the batch read from the config;
* **refused**: a clear ``AsapError`` (listed with its first line: e.g. a recipe whose config file moved, which
  MaxText itself would not start either);
* **crashed**: anything else (a defect; listed with its traceback's last line).

With ``--megatron``, every launch script under the checkout's ``examples/`` that ASAP reads as a Megatron launch
gets the same treatment: a run folder holding only that script, and a run.yaml naming ``chip: h100``, the device
count the script states (``GPUS_PER_NODE`` x ``NUM_NODES``) when it states one, else its model-parallel product x 8
data-parallel ranks, and 8 GPUs per node.

It prints one line per recipe (bottleneck, parameters counted, current mesh, first proposal and its predicted
step change, time taken) and the totals.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.real_configs import chips_of, materialize  # noqa: E402
from bot.errors import AsapError  # noqa: E402

CONFIGS = "src/maxtext/configs"


def chip_of(path: str) -> str:
    """The catalog chip a recipe folder is written for."""
    for tag, chip in (("/v4/", "tpu-v4"), ("/v5e/", "tpu-v5e"), ("/v5p/", "tpu-v5p"), ("/v6e/", "tpu-v6e"),
                      ("/gpu/a3/", "h100")):
        if tag in path:
            return chip
    return "tpu-v5p"


def make_run(root: Path, script: Path, runs: Path) -> str:
    """A run folder for ``script``: the checkout's configs copied in (a launch reads files only inside its run
    folder), and a run.yaml naming only the chip, the device count and the script."""
    rel = script.relative_to(root)
    name = "_".join(rel.parts[3:]).removesuffix(".sh").replace(".", "_")
    folder = runs / name
    shutil.copytree(root / CONFIGS, folder / CONFIGS)
    chips, slices = chips_of(script.read_text(encoding="utf-8"), script.name)
    (folder / "run.yaml").write_text(
        f"id: {name}\nframework: maxtext\nchip: {chip_of(str(rel))}\nnum_chips: {chips}\nnum_slices: {slices}\n"
        f"config: {rel}\n", encoding="utf-8")
    return name


def make_megatron_run(root: Path, script: Path, runs: Path) -> str | None:
    """A run folder for a Megatron example launch (None when ASAP does not read it as one)."""
    from bot.configs.detect import load_config
    from bot.configs.launch import devices_of

    try:
        cfg = load_config(script, root=root)
    except AsapError:
        return None
    if cfg.format != "megatron" or cfg.launch is None:
        return None
    sizes = {k.axis: k.value for k in cfg.keys if k.value and k.value > 0}
    parallel = 1
    for axis in ("tensor", "pipeline", "sequence", "expert"):
        parallel *= sizes.get(axis, 1)
    chips = devices_of(cfg) or parallel * 8
    if chips % parallel:
        chips = parallel * 8
    name = "megatron_" + "_".join(script.relative_to(root).parts[1:]).removesuffix(".sh").replace(".", "_")
    folder = runs / name
    folder.mkdir(parents=True)
    shutil.copy(script, folder / script.name)
    (folder / "run.yaml").write_text(
        f"id: {name}\nframework: megatron\nchip: h100\nnum_chips: {chips}\nnum_slices: {max(1, chips // 8)}\n"
        f"config: {script.name}\n", encoding="utf-8")
    return name


def answer(runs: Path, name: str) -> tuple[str, str, float]:
    """(answered | refused | crashed, one-line summary, seconds) for one run."""
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose
    from bot.runs.store import LocalRunStore

    t0 = time.perf_counter()
    try:
        run = LocalRunStore(runs).get(name)
        report = analyze_run(run)
        ps = propose(run, report=report)
    except AsapError as exc:
        return "refused", exc.message.splitlines()[0][:160], time.perf_counter() - t0
    except Exception:  # noqa: BLE001 - a crash is what this benchmark exists to find
        return "crashed", traceback.format_exc().strip().splitlines()[-1][:160], time.perf_counter() - t0
    took = time.perf_counter() - t0
    if not ps.proposals:
        return "refused", "no proposals", took
    first = ps.proposals[0]
    pct = first.change.step_time_percent
    change = f"{pct:+.1f}%" if pct is not None else "relative"
    params = f"{report.run.params / 1e9:.1f}B" if report.run.params else "?"
    summary = (f"{report.diagnosis.bottleneck}-bound, {params} params, mesh {report.run.mesh_short}; "
               f"{ps.verdict}; 1. {first.mesh_short} ({change})")
    return "answered", summary, took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--maxtext", type=Path, required=True, help="a MaxText checkout or fetched git mirror")
    ap.add_argument("--megatron", type=Path, help="a Megatron-LM checkout or fetched git mirror")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "checkout"
        root.mkdir()
        materialize(args.maxtext, [CONFIGS], root)
        runs = Path(tmp) / "runs"
        runs.mkdir()
        scripts = sorted(p for sub in ("tpu", "gpu") for p in (root / CONFIGS / sub).rglob("*.sh"))
        names = [make_run(root, s, runs) for s in scripts]
        if args.megatron:
            mroot = Path(tmp) / "megatron"
            mroot.mkdir()
            materialize(args.megatron, ["examples"], mroot)
            names += [n for s in sorted((mroot / "examples").rglob("*.sh")) if (n := make_megatron_run(mroot, s, runs))]
        counts: dict[str, int] = {}
        times: list[float] = []
        for name in names:
            kind, summary, took = answer(runs, name)
            counts[kind] = counts.get(kind, 0) + 1
            times.append(took)
            print(f"{kind:8} {name:38} {took:5.2f}s  {summary}")
    total = len(names)
    print(f"\n{total} launches: {counts.get('answered', 0)} answered from the config alone, "
          f"{counts.get('refused', 0)} refused with a reason, {counts.get('crashed', 0)} crashed; "
          f"median {statistics.median(times):.2f} s per recipe (why + propose)" if times else "no recipes found")


if __name__ == "__main__":
    main()
