"""Builders for analysis tests: run records and profiles with ops placed on a known roofline position.

Ops are built from the time they take and the efficiency they reach, so a test states the physics
("80% of the step in matmuls at 60% of peak") and the FLOPs and bytes follow from the chip's peaks.
"""

from __future__ import annotations

from typing import Any

from bot.analysis.analyze import analyze
from bot.analysis.report import AnalysisReport
from bot.configs.mesh import Mesh
from bot.profiles.model import OpKind, OpStat, Profile
from bot.runs.record import RunRecord
from knowledge.hardware import get_chip

STEPS = 10
STEP_US = 100_000.0  # 100 ms
WINDOW_US = STEPS * STEP_US

LLAMA_8B = {
    "name": "llama3-8b",
    "layers": 32,
    "d_model": 4096,
    "d_ff": 14336,
    "heads": 32,
    "kv_heads": 8,
    "vocab": 128256,
}


def record(
    *, chip: str = "tpu-v5p", num_chips: int = 8, num_slices: int = 1, model: bool | dict[str, Any] = True, **extra: Any
) -> RunRecord:
    """A run record; ``model=False`` leaves the model unknown, a dict gives its shape (default: Llama-3 8B)."""
    body: dict[str, Any] = {"id": "r1", "chip": chip, "num_chips": num_chips, "num_slices": num_slices, **extra}
    if model:
        body["model"] = model if isinstance(model, dict) else LLAMA_8B
        body.setdefault("training", {"global_batch": 3, "seq_len": 1024})
    return RunRecord.model_validate(body)


def matmul(name: str, share: float, *, eff: float = 0.6, intensity: float = 600.0, chip: str = "tpu-v5p", **kw: Any) -> OpStat:
    """A compute-kind op taking ``share`` of the window at ``eff`` of the chip's FLOP peak."""
    c = get_chip(chip)
    us = share * WINDOW_US
    flops = eff * c.peak_bf16_flops * us * 1e-6
    return OpStat(name, kw.pop("category", "convolution fusion"), OpKind.COMPUTE, STEPS * 4, us,
                  flops=flops, bytes_accessed=flops / intensity, **kw)


def streaming(name: str, share: float, *, eff: float = 0.8, intensity: float = 2.0, chip: str = "tpu-v5p", **kw: Any) -> OpStat:
    """A compute-kind op below the ridge point moving HBM bytes at ``eff`` of the chip's bandwidth."""
    c = get_chip(chip)
    us = share * WINDOW_US
    nbytes = eff * c.hbm_bandwidth * us * 1e-6
    return OpStat(name, kw.pop("category", "loop fusion"), OpKind.COMPUTE, STEPS * 8, us,
                  flops=nbytes * intensity, bytes_accessed=nbytes, **kw)


def collective(name: str, share: float, *, group: int | None = None, category: str = "all-reduce", **kw: Any) -> OpStat:
    return OpStat(name, category, OpKind.COLLECTIVE, STEPS * 2, share * WINDOW_US, group_size=group, **kw)


def host_op(name: str, share: float) -> OpStat:
    return OpStat(name, "infeed", OpKind.HOST, STEPS, share * WINDOW_US)


def profiled(ops: list[OpStat], *, duty: float | None = None, host_wait: float | None = None, steps: int | None = STEPS,
             step_us: float | None = STEP_US, **kw: Any) -> Profile:
    return Profile(
        sources=["hlo_stats.json"],
        device_kind=kw.pop("device_kind", None),
        num_steps=steps,
        step_time_us=step_us,
        device_duty_cycle_percent=duty,
        host_wait_percent=host_wait,
        ops=ops,
        **kw,
    )


def run_analysis(rec: RunRecord, prof: Profile, mesh: Mesh | None = None, **kw: Any) -> AnalysisReport:
    return analyze(rec, prof, mesh, "maxtext" if mesh else None, **kw)

