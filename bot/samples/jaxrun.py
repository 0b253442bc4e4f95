"""Produce a real ASAP run folder from a small JAX training job on CPU virtual devices.

``scripts/jax_sample_run.py`` is the entry point. It trains the transformer in
:mod:`bot.samples.jaxmodel` on ``N`` XLA:CPU devices (``--xla_force_host_platform_device_count``) over a
``data x fsdp x tensor`` mesh and writes, into one run folder:

* ``train_step.hlo.txt``: the compiled, partitioned HLO of the train step (the collectives XLA inserted);
* ``plugins/profile/<session>/<host>.trace.json.gz`` (and the ``.xplane.pb`` when it is small): a JAX
  profile of the steps after warm-up, each wrapped in ``StepTraceAnnotation("train", step_num=i)``;
* ``overview_page.json``, ``op_profile.json``, ``hlo_stats.json``, ``roofline_model.json``: the xplane
  converted by the ``xprof`` package, when it is installed;
* ``mesh.yml`` (plain ``ici_mesh:`` format) and ``run.yaml`` (:class:`bot.runs.record.RunRecord`).

This module does not import JAX at the top: the device count must reach ``XLA_FLAGS`` before JAX is
first imported, so everything up to :func:`configure_xla` runs without it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bot.errors import AsapError, ConfigError
from bot.runs.record import Measured, ModelSpec, RunRecord, TrainingSpec
from bot.runs.store import LocalRunStore

MESH_AXES: tuple[str, ...] = ("data", "fsdp", "tensor")
"""Axes the sample model shards over, in mesh order (outermost first)."""

XPROF_TOOLS: tuple[str, ...] = ("overview_page", "op_profile", "hlo_stats", "roofline_model")
COLLECTIVE_OP = re.compile(r"^(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute|collective-broadcast)")
DEVICE_FLAG = "--xla_force_host_platform_device_count"
HLO_FILE = "train_step.hlo.txt"
MESH_FILE = "mesh.yml"
STEP_NAME = "train"
JIT_MODULE = "jit_train_step"
DEFAULT_MAX_XPLANE_BYTES = 1 << 20


@dataclass(frozen=True)
class SampleRunOptions:
    """What to train and where to write it; checked by :func:`validate_options` before JAX starts."""

    out: Path
    run_id: str
    devices: int
    mesh: dict[str, int]
    layers: int = 2
    d_model: int = 256
    heads: int = 4
    d_ff: int = 1024
    vocab: int = 1024
    seq: int = 128
    batch: int = 16
    steps: int = 6
    profile_steps: int = 3
    seed: int = 0
    max_xplane_bytes: int = DEFAULT_MAX_XPLANE_BYTES
    force: bool = False

    @property
    def warmup_steps(self) -> int:
        return self.steps - self.profile_steps

    def mesh_short(self) -> str:
        return " ".join(f"{a}={v}" for a, v in self.mesh.items())


def parse_mesh(text: str) -> dict[str, int]:
    """``"data=2,fsdp=2,tensor=2"`` -> ``{"data": 2, "fsdp": 2, "tensor": 2}`` in canonical axis order.

    Missing axes are 1. Unknown axes, repeated axes, and sizes that are not positive integers raise
    :class:`ConfigError` naming the item.
    """
    sizes: dict[str, int] = {}
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ConfigError("empty mesh; expected e.g. data=2,fsdp=2,tensor=2", field="--mesh")
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise ConfigError(f"{item!r} is not AXIS=SIZE (e.g. fsdp=2)", field="--mesh")
        if name not in MESH_AXES:
            raise ConfigError(
                f"unknown mesh axis {name!r}; the sample model shards over {', '.join(MESH_AXES)}", field="--mesh"
            )
        if name in sizes:
            raise ConfigError(f"axis {name!r} is given twice", field="--mesh")
        try:
            size = int(value.strip())
        except ValueError:
            raise ConfigError(f"size of {name!r} must be a positive integer, got {value.strip()!r}", field="--mesh") from None
        if size < 1:
            raise ConfigError(f"size of {name!r} must be a positive integer, got {size}", field="--mesh")
        sizes[name] = size
    return {axis: sizes.get(axis, 1) for axis in MESH_AXES}


def validate_options(opts: SampleRunOptions) -> None:
    """Check that the mesh covers the devices and divides every sharded dimension; raise ConfigError if not."""
    product = math.prod(opts.mesh.values())
    if product != opts.devices:
        arithmetic = " x ".join(f"{a}={v}" for a, v in opts.mesh.items())
        raise ConfigError(f"mesh {arithmetic} = {product} devices, but --devices is {opts.devices}", field="--mesh")
    data, fsdp, tensor = (opts.mesh[a] for a in MESH_AXES)
    checks = [
        ("--batch", opts.batch, data * fsdp, "data x fsdp"),
        ("--heads", opts.heads, tensor, "tensor"),
        ("--d-ff", opts.d_ff, tensor, "tensor"),
        ("--vocab", opts.vocab, tensor, "tensor"),
        ("--d-model", opts.d_model, fsdp, "fsdp"),
        ("--d-model", opts.d_model, opts.heads, "--heads"),
    ]
    for flag, value, divisor, name in checks:
        if value % divisor:
            raise ConfigError(f"{value} is not divisible by {name} = {divisor}", field=flag)
    if opts.profile_steps < 1 or opts.warmup_steps < 1:
        raise ConfigError(
            f"need at least one warm-up step (it compiles) and one profiled step: --steps {opts.steps}, "
            f"--profile-steps {opts.profile_steps}",
            field="--steps",
        )
    if opts.run_id != opts.out.name:
        raise ConfigError(
            f"run id {opts.run_id!r} must equal the run folder's name {opts.out.name!r} (the store requires it)",
            field="--id",
        )
    if opts.out.exists() and any(opts.out.iterdir()):
        if not opts.force:
            raise ConfigError(f"{opts.out} exists and is not empty", field="--out", hint="pass --force to replace it")
        if not (opts.out / "run.yaml").is_file():
            raise ConfigError(
                f"{opts.out} is not a run folder (no run.yaml); refusing to replace it", field="--out"
            )


def configure_xla(devices: int) -> None:
    """Ask XLA:CPU for ``devices`` virtual devices. Must run before JAX is imported anywhere."""
    if "jax" in sys.modules:
        raise AsapError(
            "jax was imported before the virtual device count could be set",
            hint="run scripts/jax_sample_run.py as its own process",
        )
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(DEVICE_FLAG)]
    flags.append(f"{DEVICE_FLAG}={devices}")
    os.environ["XLA_FLAGS"] = " ".join(flags)
    os.environ["JAX_PLATFORMS"] = "cpu"


# ----------------------------------------------------------------------------- trace summary


@dataclass(frozen=True)
class TraceSummary:
    """What the captured trace shows, for the run description and the console (not the analysis)."""

    steps: dict[int, float]  # step_num -> duration in ms, from the StepTraceAnnotation events
    devices: int
    op_ms_per_device: float  # busy time (union of op intervals) per device, averaged
    collective_ms_per_device: float  # time inside collective ops per device, averaged
    top_collectives: list[tuple[str, float]] = field(default_factory=list)  # (op, ms per device)

    @property
    def collective_share(self) -> float:
        """Share of device busy time spent inside collectives (0..1)."""
        return self.collective_ms_per_device / self.op_ms_per_device if self.op_ms_per_device else 0.0


def _union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for start, stop in sorted(intervals):
        if start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def summarize_trace(path: Path, module: str = JIT_MODULE) -> TraceSummary:
    """Step durations and per-device op / collective time of ``module`` from a ``*.trace.json.gz``."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh).get("traceEvents", [])
    steps: dict[int, float] = {}
    per_device: dict[str, list[tuple[float, float, str]]] = {}
    for ev in events:
        if ev.get("ph") != "X":
            continue
        args = ev.get("args") or {}
        if ev.get("name") == STEP_NAME and "step_num" in args:
            steps[int(args["step_num"])] = float(ev["dur"]) / 1e3
        elif args.get("hlo_module") == module and "device_ordinal" in args:
            start = float(ev["ts"])
            per_device.setdefault(str(args["device_ordinal"]), []).append(
                (start, start + float(ev["dur"]), str(args.get("hlo_op", ev.get("name", ""))))
            )
    if not per_device:
        return TraceSummary(steps=steps, devices=0, op_ms_per_device=0.0, collective_ms_per_device=0.0)
    busy = coll = 0.0
    by_op: dict[str, float] = {}
    for ops in per_device.values():
        busy += _union_us([(s, e) for s, e, _ in ops])
        coll += _union_us([(s, e) for s, e, name in ops if COLLECTIVE_OP.match(name)])
        for s, e, name in ops:
            if COLLECTIVE_OP.match(name):
                by_op[name] = by_op.get(name, 0.0) + (e - s)
    n = len(per_device)
    top = sorted(((k, v / n / 1e3) for k, v in by_op.items()), key=lambda kv: -kv[1])[:5]
    return TraceSummary(
        steps=dict(sorted(steps.items())),
        devices=n,
        op_ms_per_device=busy / n / 1e3,
        collective_ms_per_device=coll / n / 1e3,
        top_collectives=top,
    )


def count_collectives(hlo_text: str) -> dict[str, int]:
    """Collective instructions in compiled HLO text, by opcode (``all-gather``, ``all-reduce``, ...)."""
    counts: dict[str, int] = {}
    pattern = re.compile(
        r"=\s*[^=]*?\s(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\("
    )
    for line in hlo_text.splitlines():
        match = pattern.search(line)
        if match:
            counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return dict(sorted(counts.items()))


# ----------------------------------------------------------------------------- xprof conversion


def _table_rows(data: object) -> int | None:
    """Rows in an xprof gviz table (or list of tables); None when the JSON is not table-shaped."""
    tables = data if isinstance(data, list) else [data]
    rows = [len(t["rows"]) for t in tables if isinstance(t, dict) and isinstance(t.get("rows"), list)]
    return sum(rows) if rows else None


def convert_xplane(xplane: Path, out_dir: Path) -> dict[str, str]:
    """Write the XProf tool JSON for ``xplane`` into ``out_dir``; returns tool -> one-line status.

    Uses ``xprof.convert.raw_to_tool_data.xspace_to_tool_data(paths, tool, params)`` when ``xprof`` is
    installed. A tool that fails or returns nothing is skipped and its status says why.
    """
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        return {tool: "skipped: xprof is not installed" for tool in XPROF_TOOLS}
    status: dict[str, str] = {}
    for tool in XPROF_TOOLS:
        try:
            data, _content_type = raw_to_tool_data.xspace_to_tool_data([str(xplane)], tool, {})
        except Exception as exc:  # noqa: BLE001 - a converter failure skips that tool, by design
            status[tool] = f"skipped: xprof failed ({type(exc).__name__}: {str(exc)[:120]})"
            continue
        if not data:
            status[tool] = "skipped: xprof returned no data"
            continue
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        try:
            parsed = json.loads(raw)
        except ValueError:
            status[tool] = "skipped: xprof output is not JSON"
            continue
        (out_dir / f"{tool}.json").write_bytes(raw)
        rows = _table_rows(parsed)
        if tool == "op_profile" and isinstance(parsed, dict):
            children = (parsed.get("byProgram") or {}).get("children") or []
            status[tool] = f"written, {len(children)} programs" + (" (empty on CPU)" if not children else "")
        elif rows is not None:
            status[tool] = f"written, {rows} rows" + (" (empty on CPU)" if rows == 0 else "")
        else:
            status[tool] = "written"
    return status


# ----------------------------------------------------------------------------- run folder


def mesh_yaml(opts: SampleRunOptions) -> str:
    """The sharding config in the plain ``ici_mesh:`` format."""
    body = ", ".join(f"{a}: {v}" for a, v in opts.mesh.items())
    return (
        f"# Mesh of the real JAX sample run {opts.run_id} ({opts.devices} XLA:CPU virtual devices).\n"
        "# Written by scripts/jax_sample_run.py; axes in mesh order, outermost first.\n"
        f"ici_mesh: {{{body}}}\n"
    )


def build_record(
    opts: SampleRunOptions,
    *,
    step_ms: float,
    profile_files: list[str],
    description: str,
) -> RunRecord:
    """The run.yaml content for this run, validated by the RunRecord model."""
    dp = opts.mesh["data"] * opts.mesh["fsdp"]
    return RunRecord(
        id=opts.run_id,
        name=f"real JAX run: {opts.layers}-layer d{opts.d_model} transformer on {opts.devices} CPU devices",
        description=description,
        framework="jax",
        chip="cpu",
        num_chips=opts.devices,
        num_slices=1,
        config=MESH_FILE,
        profile=profile_files,
        model=ModelSpec(
            name=f"decoder-{opts.layers}l-d{opts.d_model}",
            layers=opts.layers,
            d_model=opts.d_model,
            d_ff=opts.d_ff,
            heads=opts.heads,
            kv_heads=opts.heads,
            head_dim=opts.d_model // opts.heads,
            vocab=opts.vocab,
            mlp_matrices=3,
        ),
        training=TrainingSpec(
            global_batch=opts.batch,
            seq_len=opts.seq,
            micro_batch=opts.batch // dp,
            dtype="fp32",
            remat="none",
            optimizer="adamw",
        ),
        measured=Measured(step_time_ms=round(step_ms, 3), tokens_per_second=round(opts.batch * opts.seq / (step_ms / 1e3), 1)),
        tags=["real-jax", "cpu-virtual-devices", "sample"],
    )


def _describe(
    opts: SampleRunOptions,
    summary: TraceSummary,
    collectives: dict[str, int],
    tools: dict[str, str],
    wall_ms: list[float],
    warm_ms: list[float],
    xplane_note: str,
    jax_version: str,
) -> str:
    platform_text = f"JAX {jax_version}"
    counts = ", ".join(f"{v} {k}" for k, v in collectives.items()) or "none"
    top = ", ".join(f"{name} {ms:.1f} ms" for name, ms in summary.top_collectives[:3]) or "none"
    tool_text = "; ".join(f"{k}: {v}" for k, v in tools.items())
    return (
        f"Produced by scripts/jax_sample_run.py: {opts.layers}-layer decoder-only transformer (d_model {opts.d_model}, "
        f"{opts.heads} heads, gated MLP d_ff {opts.d_ff}, vocab {opts.vocab}, fp32 params and compute, AdamW) trained "
        f"on {opts.devices} XLA:CPU virtual devices of one host ({os.cpu_count()} CPU cores, {platform_text}), mesh {opts.mesh_short()}: batch over (data, fsdp), "
        f"weights over fsdp and Megatron-style over tensor. {opts.warmup_steps} warm-up steps "
        f"(unprofiled wall-clock after compile: {', '.join(f'{t:.1f}' for t in warm_ms) or 'n/a'} ms), then "
        f"{opts.profile_steps} profiled steps (wall-clock {', '.join(f'{t:.1f}' for t in wall_ms)} ms; "
        f"measured.step_time_ms is their mean, profiler overhead included). "
        f"Compiled HLO collectives: {counts} (XLA:CPU lowers reduce-scatter to all-reduce + dynamic-slice). "
        f"Trace: per device {summary.op_ms_per_device:.1f} ms busy in {JIT_MODULE} over the profiled steps, "
        f"{summary.collective_ms_per_device:.1f} ms ({100 * summary.collective_share:.0f}%) inside collectives; "
        f"largest: {top}. On CPU the virtual devices share the host's cores, so collective time is mostly "
        f"rendezvous waiting for the slowest device, not link bandwidth. XProf tools: {tool_text}. {xplane_note}"
    ).strip()


def _find_profile_files(profile_dir: Path) -> tuple[Path, Path | None]:
    # JAX writes <host>.trace.json.gz; with create_perfetto_trace also perfetto_trace.json.gz (same events).
    traces = sorted(profile_dir.glob("plugins/profile/*/*trace.json.gz"))
    traces = [t for t in traces if t.name.endswith(".trace.json.gz")] or traces
    if not traces:
        raise AsapError("the JAX profiler wrote no *.trace.json.gz", source=str(profile_dir))
    xplanes = sorted(traces[0].parent.glob("*.xplane.pb"))
    return traces[0], (xplanes[0] if xplanes else None)


def run(opts: SampleRunOptions, *, log: Callable[[str], None] = print) -> RunRecord:
    """Train, profile and write the run folder; returns the record as loaded back by the run store."""
    import jax

    from bot.samples import jaxmodel  # imports JAX: configure_xla() must have run

    if jax.device_count() < opts.devices:
        raise AsapError(
            f"JAX sees {jax.device_count()} devices, expected {opts.devices}",
            hint=f"XLA_FLAGS must contain {DEVICE_FLAG}={opts.devices} before jax is imported",
        )
    dims = jaxmodel.ModelDims(
        layers=opts.layers, d_model=opts.d_model, heads=opts.heads, d_ff=opts.d_ff,
        vocab=opts.vocab, seq=opts.seq, batch=opts.batch,
    )
    trainer = jaxmodel.build_trainer(opts.mesh, dims, seed=opts.seed)
    t0 = time.perf_counter()
    hlo = trainer.compiled_hlo(trainer.batch(0))
    log(f"compiled train step in {time.perf_counter() - t0:.1f} s ({len(hlo) / 1e3:.0f} kB of HLO)")

    warm_ms: list[float] = []
    for step in range(opts.warmup_steps):
        t = time.perf_counter()
        loss = trainer.run_step(trainer.batch(step))
        loss.block_until_ready()
        if step:  # step 0 includes compilation
            warm_ms.append((time.perf_counter() - t) * 1e3)
        log(f"warm-up step {step}: loss {float(loss):.4f}")

    staging = Path(tempfile.mkdtemp(prefix=f".{opts.run_id}-", dir=opts.out.parent))
    try:
        profile_dir = staging / "profile"
        wall_ms: list[float] = []
        with jax.profiler.trace(str(profile_dir), create_perfetto_trace=True):
            for step in range(opts.warmup_steps, opts.steps):
                tokens = trainer.batch(step)
                t = time.perf_counter()
                with jax.profiler.StepTraceAnnotation(STEP_NAME, step_num=step):
                    loss = trainer.run_step(tokens)
                    loss.block_until_ready()
                wall_ms.append((time.perf_counter() - t) * 1e3)
                log(f"profiled step {step}: loss {float(loss):.4f}, {wall_ms[-1]:.1f} ms")
        loss_value = float(loss)
        if not math.isfinite(loss_value):
            raise AsapError(f"training diverged: loss {loss_value}")

        folder = staging / "run"
        folder.mkdir()
        (folder / HLO_FILE).write_text(hlo, encoding="utf-8")
        (folder / MESH_FILE).write_text(mesh_yaml(opts), encoding="utf-8")
        trace, xplane = _find_profile_files(profile_dir)
        session_rel = trace.parent.relative_to(profile_dir)
        (folder / session_rel).mkdir(parents=True)
        shutil.copy2(trace, folder / session_rel / trace.name)
        profile_files = [HLO_FILE, f"{session_rel.as_posix()}/{trace.name}"]
        tools: dict[str, str] = {}
        xplane_note = "No xplane.pb was written."
        if xplane is not None:
            tools = convert_xplane(xplane, folder)
            size = xplane.stat().st_size
            if size <= opts.max_xplane_bytes:
                shutil.copy2(xplane, folder / session_rel / xplane.name)
                profile_files.append(f"{session_rel.as_posix()}/{xplane.name}")
                xplane_note = f"The raw {xplane.name} ({size / 1e6:.1f} MB) is kept."
            else:
                xplane_note = (
                    f"The raw {xplane.name} ({size / 1e6:.1f} MB) was left out to keep the folder small "
                    f"(limit {opts.max_xplane_bytes / 1e6:.1f} MB); rerun the script to regenerate it."
                )
        profile_files += [f"{tool}.json" for tool in XPROF_TOOLS if (folder / f"{tool}.json").is_file()]

        summary = summarize_trace(folder / session_rel / trace.name)
        collectives = count_collectives(hlo)
        step_ms = sum(wall_ms) / len(wall_ms)
        description = _describe(opts, summary, collectives, tools, wall_ms, warm_ms, xplane_note, jax.__version__)
        record = build_record(opts, step_ms=step_ms, profile_files=profile_files, description=description)
        data = record.model_dump(mode="json", exclude_none=True, exclude_defaults=False)
        (folder / "run.yaml").write_text(
            "# Written by scripts/jax_sample_run.py from a real JAX run; see docs/real-jax-run.md.\n"
            + yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True),
            encoding="utf-8",
        )
        if opts.out.exists():
            shutil.rmtree(opts.out)
        folder.rename(opts.out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    loaded = LocalRunStore(opts.out.parent).get(opts.run_id)
    log(
        f"wrote {opts.out}: step {step_ms:.1f} ms, {100 * summary.collective_share:.0f}% of device time in collectives, "
        f"HLO collectives {collectives}"
    )
    return loaded.record


# ----------------------------------------------------------------------------- command line


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jax_sample_run.py",
        description="Train a small transformer on N XLA:CPU virtual devices and write an ASAP run folder.",
    )
    parser.add_argument("--out", required=True, type=Path, help="run folder to create (its name is the run id)")
    parser.add_argument("--id", dest="run_id", help="run id; must equal the folder name (default: that name)")
    parser.add_argument("--devices", type=_positive, default=8, help="virtual CPU devices (default 8)")
    parser.add_argument("--mesh", default="data=2,fsdp=2,tensor=2", help="AXIS=SIZE,... over data, fsdp, tensor")
    parser.add_argument("--layers", type=_positive, default=2)
    parser.add_argument("--d-model", type=_positive, default=256)
    parser.add_argument("--heads", type=_positive, default=4)
    parser.add_argument("--d-ff", type=_positive, default=None, help="gated-MLP width (default 4 x d_model)")
    parser.add_argument("--vocab", type=_positive, default=1024)
    parser.add_argument("--seq", type=_positive, default=128)
    parser.add_argument("--batch", type=_positive, default=16, help="global batch (sequences per step)")
    parser.add_argument("--steps", type=_positive, default=6, help="total steps: warm-up + profiled")
    parser.add_argument(
        "--profile-steps", type=_positive, default=None, help="steps profiled after warm-up (default min(3, steps-1))"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-xplane-mb", type=float, default=DEFAULT_MAX_XPLANE_BYTES / (1 << 20),
        help="keep the raw xplane.pb only up to this size (MiB); the tool JSON is converted from it either way",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing run folder")
    return parser


def options_from_args(argv: Sequence[str] | None = None) -> SampleRunOptions:
    """Parse and validate the command line (no JAX involved); raises ConfigError on bad input."""
    args = build_parser().parse_args(argv)
    out = args.out.expanduser().resolve()
    opts = SampleRunOptions(
        out=out,
        run_id=args.run_id or out.name,
        devices=args.devices,
        mesh=parse_mesh(args.mesh),
        layers=args.layers,
        d_model=args.d_model,
        heads=args.heads,
        d_ff=args.d_ff or 4 * args.d_model,
        vocab=args.vocab,
        seq=args.seq,
        batch=args.batch,
        steps=args.steps,
        profile_steps=args.profile_steps if args.profile_steps is not None else min(3, args.steps - 1),
        seed=args.seed,
        max_xplane_bytes=int(args.max_xplane_mb * (1 << 20)),
        force=args.force,
    )
    validate_options(opts)
    return opts


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: exit 0 on success, 2 with one clear ``error:`` line on bad input."""
    try:
        opts = options_from_args(argv)
        configure_xla(opts.devices)
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        run(opts)
    except AsapError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return 2
    return 0
