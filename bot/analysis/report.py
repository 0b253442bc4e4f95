"""The analysis report: the stable, documented JSON that ``asap why --json`` prints.

Other tools read ``diagnosis.bottleneck``, ``diagnosis.confidence``, ``kpis`` and ``top_ops``; the schema
is documented in ``docs/json-output.md`` and versioned by ``schema_version``. Fields are only ever added.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Bottleneck = Literal["compute", "hbm", "communication", "host"]
BoundByName = Literal["compute", "hbm", "ici", "dcn", "host", "unknown"]

SCHEMA_VERSION = 1


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunSummary(_Out):
    id: str
    name: str | None
    chip: str = Field(description="catalog key of the chip")
    chip_name: str
    num_chips: int
    num_slices: int
    mesh: dict[str, dict[str, int]] | None = Field(description="{'ici': {...}, 'dcn': {...}} or null when no config")
    mesh_short: str | None
    config_format: str | None = Field(description="maxtext | ici_mesh | megatron | null")
    model: str | None
    params: float | None
    profile_sources: list[str]


class Kpis(_Out):
    step_time_ms: float | None = Field(description="average step time")
    step_time_source: str | None = Field(description="profile | measured | op-sum")
    device_duty_cycle_percent: float | None = Field(description="share of the step the device was busy")
    collective_percent: float | None = Field(description="share of step time in collectives (exposed on device)")
    host_wait_percent: float | None = Field(description="share of step time waiting on input/host")
    compute_bound_percent: float | None = Field(description="share of step in compute-bound ops")
    hbm_bound_percent: float | None = Field(description="share of step in HBM-bound ops")
    idle_percent: float | None = Field(description="share of step the device was idle")
    mfu_percent: float | None = Field(description="model FLOPs utilization; null when the model is unknown")
    mfu_source: Literal["computed", "measured"] | None = Field(
        default=None, description="computed: from the model shape and step time; measured: run.yaml measured.mfu_percent"
    )
    achieved_tflops_per_chip: float | None
    hbm_used_bytes: float | None
    hbm_capacity_bytes: float
    hbm_use_percent: float | None
    tokens_per_second: float | None
    shape_source: str | None = Field(
        default=None,
        description="where the global batch and sequence length behind MFU, tokens/s and achieved TFLOP/s came "
        "from: run.yaml, config <file> (run.yaml states no training shape), run.yaml + config <file>; null: unknown",
    )
    model_source: str | None = Field(
        default=None,
        description="where the model dimensions behind MFU and achieved TFLOP/s came from: run.yaml, config <file> "
        "(run.yaml has no model section and the config states the model), run.yaml + config <file>; null: unknown",
    )
    op_coverage_percent: float | None = Field(
        default=None,
        description="share of the device's busy time in the window (duty cycle x steps x step time) that the visible "
        "ops' time covers; small for a top-N export",
    )
    attribution_source: Literal["ops", "profile", "breakdown"] | None = Field(
        default=None,
        description="what the compute/HBM/collective shares rest on: ops (the op table), profile (the profiler's step "
        "breakdown, because the visible ops cover little of the step), breakdown (no op rows at all)",
    )


class TopOp(_Out):
    name: str
    category: str
    kind: str = Field(description="compute | collective | memory | host | idle | other")
    time_percent: float = Field(description="share of step time")
    time_per_step_ms: float | None
    occurrences: int
    flops: float | None = Field(description="FLOPs per step")
    bytes_accessed: float | None = Field(description="HBM bytes per step")
    arithmetic_intensity: float | None = Field(description="FLOPs per HBM byte")
    bound_by: BoundByName
    bound_by_source: Literal["profile", "computed", "kind"] = Field(
        description="profile: the profiler's roofline; computed: from FLOPs, bytes and the chip's peaks; kind: from what the op is"
    )
    roofline_efficiency: float | None = Field(description="achieved / attainable at this intensity, 0..1")


class Evidence(_Out):
    signal: str = Field(description="KPI or op the statement rests on, e.g. kpis.collective_percent")
    value: float | str | None
    statement: str


class Diagnosis(_Out):
    bottleneck: Bottleneck
    secondary: list[Bottleneck]
    summary: str
    evidence: list[Evidence]
    conflicts: list[str] = Field(description="where KPIs and ops disagree, and how it was resolved")
    confidence: float = Field(ge=0, le=1)
    confidence_reasons: list[str]
    scores: dict[str, float] = Field(description="share of step attributed to each resource, 0..1")
    near_optimal: bool = Field(
        default=False, description="compute-bound and running close to the chip's peak: little left for sharding to win"
    )


class PredictedStep(_Out):
    """The cost model's step for a run without a profile (pre-flight): the figures a KPI table would hold, predicted.

    Shown in place of measured KPIs that nothing measured, always labelled "predicted — no profile"; absent for a
    report diagnosed from a profile.
    """

    step_time_ms: float = Field(description="predicted step time (calibrated on run.yaml's measurement when it has one)")
    step_time_low_ms: float = Field(description="low edge of the prediction band")
    step_time_high_ms: float = Field(description="high edge of the prediction band")
    calibrated: bool = Field(description="the total is calibrated on a step time, tokens/s or MFU run.yaml measured")
    split_percent: dict[str, float] = Field(
        description="share of the predicted step per term, 0-100: compute, hbm, communication, pipeline_bubble, "
        "moe_overhead, moe_dispatch, offload, fixed (terms that are zero are left out)")
    mfu_percent: float | None = Field(description="model FLOPs utilization at the predicted step; null: model unknown")
    tokens_per_second: float | None = Field(description="tokens per second at the predicted step; null: batch unknown")
    memory_per_chip_bytes: float = Field(description="predicted peak memory per chip")
    memory_capacity_bytes: float = Field(description="the chip's memory")
    fits_memory: bool = Field(description="the predicted peak leaves the Critic's headroom free")
    memory_low_bytes: float | None = Field(
        default=None, description="low edge of the memory band (the activation term is the uncertain one)")
    memory_high_bytes: float | None = Field(default=None, description="high edge of the memory band")
    memory_usable_bytes: float | None = Field(
        default=None, description="the chip's memory less the headroom the Critic keeps free")
    memory_fit: Literal["fits", "may_not_fit", "does_not_fit"] = Field(
        default="fits", description="fits: the point prediction fits the usable memory; may_not_fit: it does not, but "
        "the band's low edge does (the answer says so, with the band); does_not_fit: even the low edge does not")


class AnalysisReport(_Out):
    schema_version: int = SCHEMA_VERSION
    run: RunSummary
    kpis: Kpis
    top_ops: list[TopOp]
    diagnosis: Diagnosis
    unavailable: list[str] = Field(description="what could not be computed, and what input would unlock it")
    warnings: list[str]
    basis: Literal["profile", "predicted"] = Field(
        default="profile",
        description="profile: diagnosed from the profile; predicted: no profile, the diagnosis is the cost "
        "model's prediction for the config (pre-flight), calibrated on what run.yaml measured",
    )
    predicted: PredictedStep | None = Field(
        default=None, description="pre-flight only (basis predicted): the cost model's step, memory, MFU and tokens/s")
    damaged_inputs: list[str] = Field(
        default_factory=list,
        description="profile files that were skipped as malformed, empty or missing (partial damage: the analysis "
        "rests on the other files and its confidence is lowered); also listed in warnings",
    )
