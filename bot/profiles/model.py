"""The normalized profile every reader produces and the analysis consumes.

Readers for XProf tool exports, raw XProf sessions, JAX trace events and compiled HLO text all fill this
one model, so the analysis never needs to know which tool recorded the run. Op rows are plain slotted
dataclasses (not pydantic models) because a profile can hold 100k of them; the file formats themselves
are validated by pydantic models in each reader.

Conventions: times are microseconds; ``OpStat`` totals are summed over the whole profiled window on ONE
device (averaged over devices when the source covers several); ``Profile.num_steps`` tells how many
steps that window held, so per-step figures are ``total / num_steps``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class OpKind(str, Enum):
    """What an operation spends its time on, independent of the profiler's category names."""

    COMPUTE = "compute"  # matmul/convolution/fusions doing arithmetic
    COLLECTIVE = "collective"  # all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute, send/recv
    MEMORY = "memory"  # copies, transposes, dynamic-update-slice, data formatting
    HOST = "host"  # infeed/outfeed, host<->device transfers, host callbacks
    IDLE = "idle"  # device idle / waiting
    OTHER = "other"


class BoundBy(str, Enum):
    """Which roofline ceiling limits an op."""

    COMPUTE = "compute"
    HBM = "hbm"
    ICI = "ici"
    DCN = "dcn"
    HOST = "host"
    UNKNOWN = "unknown"


@dataclass(slots=True)
class OpStat:
    """One operation (aggregated by name) over the profiled window, on one device."""

    name: str
    category: str
    kind: OpKind
    occurrences: int
    total_time_us: float
    flops: float | None = None  # total FLOPs over all occurrences
    bytes_accessed: float | None = None  # total HBM bytes over all occurrences
    bound_by: BoundBy | None = None  # as reported by the profile's own roofline, else None
    roofline_efficiency: float | None = None  # 0..1, as reported by the profile
    collective_bytes: float | None = None  # payload bytes moved per occurrence, for collectives
    group_size: int | None = None  # participants per replica group, for collectives
    program: str | None = None  # HLO module / program the op belongs to
    group_stride: int | None = None  # device-id step inside a replica group (from compiled HLO), for collectives


@dataclass(slots=True)
class CollectiveOp:
    """A collective found in compiled HLO text."""

    name: str  # instruction name, e.g. all-reduce.3
    op: str  # all-reduce | all-gather | reduce-scatter | all-to-all | collective-permute
    dtype: str  # element type of the result, e.g. bf16
    result_bytes: int  # bytes of the result shape (sum over tuple elements)
    group_size: int | None  # devices per replica group (None when not stated)
    num_groups: int | None
    is_async: bool = False  # *-start / *-done pair
    computation: str | None = None  # enclosing HLO computation
    group_stride: int | None = None  # device-id step inside the first replica group (1: neighbours), when regular


@dataclass(slots=True)
class Profile:
    """Everything the analysis needs from a profile, whatever tool produced it."""

    sources: list[str] = field(default_factory=list)  # files read, relative to the run folder
    device_kind: str | None = None  # as reported, e.g. "TPU v5p", "NVIDIA H100 80GB HBM3", "cpu"
    num_devices: int | None = None  # devices covered by the profile
    num_steps: int | None = None  # complete steps in the profiled window
    step_time_us: float | None = None  # average step time
    step_times_us: list[float] = field(default_factory=list)
    device_duty_cycle_percent: float | None = None  # share of the step the device was busy
    host_wait_percent: float | None = None  # share of the step waiting on input/host (overview "input" time)
    compute_time_percent: float | None = None  # as the profiler reports it, when it does
    communication_time_percent: float | None = None  # as the profiler reports it, when it does
    peak_hbm_bytes: float | None = None  # peak memory in use per device
    hbm_capacity_bytes: float | None = None  # as reported by the profile, when it is
    ops: list[OpStat] = field(default_factory=list)
    # Share (0..1) of the profile's whole op time that ``ops`` cover, when the op table states it (hlo_stats
    # ``total_self_time_percent`` summed over the rows; op_profile rows over the root's time). A top-N
    # export covers a small share; None when the table does not say (then ``ops`` are taken as complete).
    op_time_fraction: float | None = None
    collectives: list[CollectiveOp] = field(default_factory=list)  # from compiled HLO, when present
    warnings: list[str] = field(default_factory=list)  # what could not be read, kept for the report
    unreadable: list[str] = field(default_factory=list)  # profile files skipped as damaged or missing (messages)

    @property
    def window_us(self) -> float | None:
        """Profiled device time covered by the op totals (steps x step time), when known."""
        if self.num_steps and self.step_time_us:
            return self.num_steps * self.step_time_us
        return None
