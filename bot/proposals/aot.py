"""Ahead-of-time (AOT) compile check: does XLA accept this mesh's sharded train step, and what does it insert?

``aot_check(run, mesh)`` lowers and compiles the training step of a small decoder-only transformer
(:mod:`bot.samples.jaxmodel`, run by :mod:`bot.proposals.aot_worker`) sharded the way the real run would
be — batch over ``data`` x ``fsdp``, weights over ``fsdp`` (d_model side) and ``tensor`` (Megatron
column/row), activations' sequence over ``sequence`` — on XLA:CPU virtual devices, and reports:

* whether it compiled, or XLA's error text (a mesh XLA rejects is a hard Critic failure);
* collective counts by op type and total collective bytes per step (per device), read from the compiled
  HLO text with :func:`bot.profiles.hlo_text.parse_hlo_text`;
* ``compiled.memory_analysis()``: argument, output, alias, temp and generated-code bytes per device.

All figures are for the **reduced** model (2 layers, d_model ~128, the axes' sizes capped at
:data:`MAX_CPU_DEVICES` devices), on CPU: use them to compare candidate meshes with each other and to
catch shardings XLA rejects, never as the real model's memory or traffic (the cost model owns those).

Why a subprocess: ``--xla_force_host_platform_device_count`` must be in ``XLA_FLAGS`` before JAX is first
imported, and the calling process may already have JAX loaded. Without JAX installed the report says
``unavailable`` with how to install it; the Critic then skips the check (never a failure).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.configs.mesh import AXES, Mesh
from bot.errors import ConfigError
from bot.runs.record import RunRecord

if TYPE_CHECKING:
    from bot.runs.store import Run

MAX_CPU_DEVICES = 64
"""Most virtual XLA:CPU devices one check compiles for; larger meshes are scaled down axis by axis."""
DEFAULT_TIMEOUT_S = 120.0
SUPPORTED_AXES = ("data", "fsdp", "sequence", "tensor")
"""Axes the AOT model can shard over. Expert (MoE) and pipeline (stages) need model code it does not have."""
SHOWN_OPS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
REDUCED_LAYERS = 2
MIN_D_MODEL = 128
MIN_SEQ = 64
MIN_VOCAB = 512
CAVEAT = (
    "figures are for the REDUCED model compiled on XLA:CPU virtual devices (per device, per step): compare "
    "candidate meshes with each other; they are not the real model's memory or traffic"
)
INSTALL_HINT = "install the jax extra: pip install 'asap[jax]'"

AotStatus = Literal["compiled", "compile_error", "unavailable", "timeout", "refused", "skipped", "error"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AotMemory(_Model):
    """``compiled.memory_analysis()`` of the reduced model's step, bytes per device."""

    argument_bytes: int | None = None
    output_bytes: int | None = None
    alias_bytes: int | None = None
    temp_bytes: int | None = None
    generated_code_bytes: int | None = None


class AotDims(_Model):
    """Shape of the reduced model that was compiled (chosen so every axis divides what it shards)."""

    layers: int
    d_model: int
    heads: int
    d_ff: int
    vocab: int
    seq: int
    batch: int


class AotReport(_Model):
    """Result of one AOT compile check (see module docstring); ``status`` says what happened."""

    status: AotStatus
    message: str = Field(description="what happened, with XLA's error text for compile_error")
    mesh: dict[str, dict[str, int]] = Field(description="the real mesh checked ({ici, dcn}, size-1 axes dropped)")
    mesh_short: str
    real_devices: int = Field(description="devices of the real mesh")
    devices: int | None = Field(default=None, description="virtual XLA:CPU devices the reduced mesh was compiled for")
    compiled_axes: dict[str, int] | None = Field(
        default=None, description="the reduced mesh compiled (ICI and DCN merged per axis; CPU has one network)"
    )
    scaled: bool = Field(default=False, description="the mesh was scaled down to fit the CPU device cap")
    scale_note: str | None = Field(default=None, description="how it was scaled and whether the axis ratios held")
    dims: AotDims | None = Field(default=None, description="the reduced model compiled")
    remat: str | None = Field(default=None, description="rematerialisation used: none, full or dots")
    collective_counts: dict[str, int] = Field(default_factory=dict, description="op -> count in the compiled step")
    collective_bytes_per_step: int | None = Field(
        default=None, description="sum of collective result bytes per device per step (reduced model)"
    )
    memory: AotMemory | None = None
    lower_s: float | None = None
    compile_s: float | None = None
    wall_s: float | None = Field(default=None, description="whole check including the subprocess and JAX import")
    caveat: str = CAVEAT

    @property
    def compiled(self) -> bool:
        return self.status == "compiled"


class _Collective(_Model):
    op: str
    result_bytes: int
    group_size: int | None = None
    num_groups: int | None = None


class _WorkerAnswer(_Model):
    """What :mod:`bot.proposals.aot_worker` writes to stdout."""

    status: Literal["compiled", "compile_error", "unavailable", "error"]
    message: str = ""
    lower_s: float | None = None
    compile_s: float | None = None
    collectives: list[_Collective] = Field(default_factory=list)
    memory: dict[str, int] = Field(default_factory=dict)


# ----------------------------------------------------------------------------- scaling


def _smallest_factor(n: int) -> int:
    for p in range(2, math.isqrt(n) + 1):
        if n % p == 0:
            return p
    return n


def scale_axes(sizes: dict[str, int], cap: int = MAX_CPU_DEVICES) -> tuple[dict[str, int], str | None]:
    """Shrink axis sizes until their product is at most ``cap``, keeping the axis structure.

    Every axis > 1 stays > 1, and the axes shrink proportionally: each step divides the axis that has
    been reduced least so far (relative to its real size; the larger one on a tie) by its smallest prime
    factor, so ``fsdp=64 tensor=4`` becomes ``fsdp=32 tensor=2`` (16:1 kept), not ``fsdp=16 tensor=4``.
    Returns the reduced sizes and a note saying what was done (None when nothing was).
    """
    orig = {a: v for a, v in sizes.items() if v > 1}
    cur = dict(orig)
    while math.prod(cur.values(), start=1) > cap:
        movable = [a for a in cur if cur[a] > 2]
        if not movable:
            break  # 2^k > cap: cannot keep every axis; the caller refuses (never reached with 4 axes and cap >= 16)
        axis = max(movable, key=lambda a: (cur[a] / orig[a], cur[a], -AXES.index(a)))  # type: ignore[arg-type]
        p = _smallest_factor(cur[axis])
        cur[axis] = cur[axis] // p if cur[axis] // p >= 2 else 2
    full = {a: cur.get(a, 1) for a in sizes}
    if cur == orig:
        return full, None
    before = " ".join(f"{a}={v}" for a, v in orig.items())
    after = " ".join(f"{a}={v}" for a, v in cur.items())
    names = list(orig)
    kept = all(
        orig[a] * cur[b] == orig[b] * cur[a] for i, a in enumerate(names) for b in names[i + 1 :]
    )
    ratio = "ratios between the axes kept" if kept else "ratios between the axes kept as nearly as whole sizes allow"
    return full, (
        f"scaled down for XLA:CPU from {math.prod(orig.values())} devices ({before}) to "
        f"{math.prod(cur.values())} ({after}): the same axes are > 1, {ratio}"
    )


def _lcm(*xs: int) -> int:
    out = 1
    for x in xs:
        out = out * x // math.gcd(out, x)
    return out


def reduced_dims(axes: dict[str, int], *, heads: int | None = None) -> AotDims:
    """A 2-layer model whose dimensions every axis divides.

    tensor divides heads, d_ff and vocab; fsdp and heads divide d_model; data x fsdp divides the batch
    (one sequence per batch shard); sequence divides the sequence length. ``heads`` (the real model's)
    is used when it is small enough and tensor divides it, so attention keeps its head structure.
    """
    t, f, s = axes.get("tensor", 1), axes.get("fsdp", 1), axes.get("sequence", 1)
    dp = axes.get("data", 1) * f
    h = heads if heads and heads <= 16 and heads % t == 0 else t * max(1, math.ceil(4 / t))
    base = _lcm(h, f)
    d_model = base * max(1, math.ceil(MIN_D_MODEL / base))
    return AotDims(
        layers=REDUCED_LAYERS,
        d_model=d_model,
        heads=h,
        d_ff=4 * d_model,
        vocab=t * max(1, math.ceil(MIN_VOCAB / t)),
        seq=s * max(1, math.ceil(MIN_SEQ / s)),
        batch=dp,
    )


def remat_mode(record: RunRecord, settings: Any | None) -> str:
    """The run's rematerialisation as the AOT model can express it: ``none``, ``full`` or ``dots``.

    ``full`` recomputes each block (nothing saved); any partial policy (MaxText ``minimal``/``save_*``,
    Megatron ``selective``, run.yaml ``dots``/``minimal``) saves the matmul outputs.
    """
    policy = getattr(settings, "remat_policy", None) if settings is not None else None
    if policy is None and record.training is not None:
        policy = record.training.remat
    if policy is None or str(policy).lower() in ("none", "false", "off", ""):
        return "none"
    return "full" if str(policy).lower() == "full" else "dots"


# ----------------------------------------------------------------------------- the check


def _record(run: Run | RunRecord) -> RunRecord:
    return run if isinstance(run, RunRecord) else run.record


def _mesh_dict(mesh: Mesh) -> dict[str, dict[str, int]]:
    n = mesh.normalized()
    return {"ici": {str(a): v for a, v in n.ici.items()}, "dcn": {str(a): v for a, v in n.dcn.items()}}


_CACHE: dict[str, AotReport] = {}
_CACHE_LOCK = threading.Lock()


def aot_check(
    run: Run | RunRecord,
    mesh: Mesh,
    *,
    settings: Any | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_devices: int = MAX_CPU_DEVICES,
) -> AotReport:
    """Lower and compile ``mesh``'s sharded train step at reduced scale; never raises for a bad mesh.

    Refused before compiling when the mesh does not multiply to the run's chips; ``skipped`` when it uses
    expert or pipeline parallelism (the AOT model has neither: reporting a compile of something else would
    be a fake); ``timeout`` when the subprocess runs past ``timeout_s``. Results are cached per reduced job
    within the process (the same reduced mesh and model compile the same).
    """
    record = _record(run)
    base: dict[str, Any] = {
        "mesh": _mesh_dict(mesh),
        "mesh_short": mesh.short(),
        "real_devices": mesh.num_devices,
    }
    try:
        mesh.validate_against(record.num_chips)
    except ConfigError as exc:
        return AotReport(status="refused", message=f"not compiled: {exc.message}", **base)
    sizes: dict[str, int] = {str(a): v for a, v in mesh.sizes().items()}
    unsupported = {a: sizes[a] for a in AXES if a not in SUPPORTED_AXES and sizes[a] > 1}
    if unsupported:
        what = ", ".join(f"{a}={v}" for a, v in unsupported.items())
        return AotReport(
            status="skipped",
            message=f"not compiled: the AOT model is a dense decoder without MoE experts or pipeline stages, so it "
            f"cannot express {what}; compiling the mesh without those axes would not check this mesh",
            **base,
        )
    axes, note = scale_axes({a: sizes[a] for a in SUPPORTED_AXES}, max_devices)
    devices = math.prod(axes.values())
    if devices > max_devices:
        return AotReport(
            status="refused",
            message=f"not compiled: {sum(v > 1 for v in axes.values())} axes > 1 need at least {devices} devices, "
            f"above the {max_devices} virtual CPU devices allowed",
            **base,
        )
    heads = record.model.heads if record.model is not None else None
    dims = reduced_dims(axes, heads=heads)
    remat = remat_mode(record, settings)
    job = {"axes": axes, "dims": dims.model_dump(), "remat": remat}
    base.update(
        devices=devices, compiled_axes={a: v for a, v in axes.items() if v > 1} or {"data": 1},
        scaled=note is not None, scale_note=note, dims=dims, remat=remat,
    )
    key = json.dumps(job, sort_keys=True)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit.model_copy(update={k: v for k, v in base.items() if k in ("mesh", "mesh_short", "real_devices", "scale_note", "scaled")})
    report = _run_worker(job, timeout_s, base)
    if report.status in ("compiled", "compile_error"):
        with _CACHE_LOCK:
            _CACHE[key] = report
    return report


def _worker_env() -> dict[str, str]:
    """The parent's environment, with this checkout importable (an uninstalled checkout still works)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), root) if p)
    return env


def _run_worker(job: dict[str, Any], timeout_s: float, base: dict[str, Any]) -> AotReport:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bot.proposals.aot_worker"],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=_worker_env(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return AotReport(
            status="timeout",
            message=f"not checked: compiling took longer than {timeout_s:g} s (raise the timeout, or run on a "
            "machine with more cores)",
            wall_s=round(time.perf_counter() - t0, 3),
            **base,
        )
    except OSError as exc:
        return AotReport(status="error", message=f"could not start the AOT worker: {exc}", **base)
    wall = round(time.perf_counter() - t0, 3)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    try:
        answer = _WorkerAnswer.model_validate_json(lines[-1]) if lines else None
    except ValidationError as exc:
        answer = None
        proc_err = f"unreadable answer: {exc.errors()[0]['msg']}"
    else:
        proc_err = ""
    if answer is None:
        tail = (proc.stderr or "").strip().splitlines()[-5:]
        detail = proc_err or f"exit status {proc.returncode}"
        return AotReport(status="error", message=f"the AOT worker failed ({detail}): {' | '.join(tail)}", wall_s=wall, **base)
    if answer.status == "unavailable":
        return AotReport(status="unavailable", message=answer.message or f"jax is not installed; {INSTALL_HINT}", wall_s=wall, **base)
    if answer.status != "compiled":
        return AotReport(status=answer.status, message=answer.message, wall_s=wall, **base)
    counts = dict.fromkeys(SHOWN_OPS, 0)
    for c in answer.collectives:
        counts[c.op] = counts.get(c.op, 0) + 1
    return AotReport(
        status="compiled",
        message=answer.message,
        collective_counts=counts,
        collective_bytes_per_step=sum(c.result_bytes for c in answer.collectives),
        memory=AotMemory(**{k: v for k, v in answer.memory.items() if k in AotMemory.model_fields}),
        lower_s=answer.lower_s,
        compile_s=answer.compile_s,
        wall_s=wall,
        **base,
    )


def summarize(report: AotReport) -> str:
    """One line naming the collective counts, bytes and temp memory (or why there are none)."""
    if not report.compiled:
        return report.message
    c = report.collective_counts
    ops = ", ".join(f"{op} {c.get(op, 0)}" for op in SHOWN_OPS)
    mb = (report.collective_bytes_per_step or 0) / 1e6
    temp = report.memory.temp_bytes if report.memory and report.memory.temp_bytes is not None else None
    tmp = f", temp {temp / 1e6:.1f} MB/device" if temp is not None else ""
    axes = " ".join(f"{a}={v}" for a, v in (report.compiled_axes or {}).items())
    scaled = f" (scaled from {report.real_devices})" if report.scaled else ""
    return (
        f"compiled on {report.devices} virtual CPU devices as {axes}{scaled}: {ops}; {mb:.2f} MB collectives/step"
        f"{tmp} (reduced model: for comparing candidates, not absolute)"
    )
