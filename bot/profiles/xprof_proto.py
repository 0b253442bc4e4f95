"""pydantic models for the plain-JSON-of-proto forms of XProf tool data (openxla/xprof protos).

XProf's protos (``plugin/xprof/protobuf/{hlo_stats,roofline_model,overview_page,input_pipeline,
op_profile}.proto``) can be written as JSON with ``google.protobuf.json_format`` in camelCase (the
default) or snake_case (``preserving_proto_field_name``); both are accepted. Unknown keys are errors so
a file from some other tool is not silently misread. Fields ASAP does not use are declared (so real
exports validate) but left loosely typed. int64 fields arrive as strings in proto JSON; pydantic's lax
mode converts them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class ProtoModel(BaseModel):
    """Strict (extra="forbid") model accepting both camelCase and snake_case keys."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


Num = float | int | str  # numbers, or int64-as-string


# --- hlo_stats.proto ---------------------------------------------------------------------------------
class HloStatsRecord(ProtoModel):
    rank: Num = 0
    program_id: Num = 0
    hlo_category: str = ""
    hlo_expression: str = ""
    tf_op_name: str = ""
    occurrences: int = 0
    total_time_in_us: float = 0.0
    avg_time_in_us: float = 0.0
    total_self_time_in_us: float = 0.0
    avg_self_time_in_us: float = 0.0
    total_self_time_as_fraction: float = 0.0
    cumulative_total_self_time_as_fraction: float = 0.0
    dma_stall_fraction: float = 0.0
    measured_flop_rate: float = 0.0  # GFLOP/s over total time
    model_flop_rate: float = 0.0
    measured_memory_bw: float = 0.0  # GiB/s, all memories
    hbm_bw: float = 0.0  # GiB/s
    cmem_read_bw: float = 0.0
    cmem_write_bw: float = 0.0
    vmem_read_bw: float = 0.0
    vmem_write_bw: float = 0.0
    operational_intensity: float = 0.0
    hbm_operational_intensity: float = 0.0
    cmem_read_operational_intensity: float = 0.0
    cmem_write_operational_intensity: float = 0.0
    vmem_read_operational_intensity: float = 0.0
    vmem_write_operational_intensity: float = 0.0
    bottleneck_operational_intensity: float = 0.0
    bound_by: str = ""
    rematerialization: bool = False
    outside_compilation: bool = False
    autotuned: bool = False
    flops: float = 0.0
    flops_v2: float = 0.0
    bytes_accessed: float = 0.0
    source_info: dict[str, Any] | None = None
    core_type: str = ""
    parent_op_name: str = ""
    vdd_energy_j: float = 0.0


class HloStatsDatabase(ProtoModel):
    hlo_stats_record: list[HloStatsRecord] = Field(default_factory=list)


# --- roofline_model.proto ----------------------------------------------------------------------------
class RooflineModelRecord(ProtoModel):
    record_type: str | int = 0  # ALL=1, AVERAGE_STEP=2, PER_STEP=3, ALL_HW=4
    step_num: int = 0
    rank: Num = 0
    hlo_module_id: Num = 0
    hlo_category: str = ""
    hlo_name: str = ""
    occurrences: int = 0
    total_time_in_us: float = 0.0
    total_time_per_core_in_us: float = 0.0
    total_time_in_percentage: float = 0.0
    avg_time_in_us: float = 0.0
    total_self_time_in_us: float = 0.0
    avg_self_time_in_us: float = 0.0
    total_self_time_as_fraction: float = 0.0
    cumulative_total_self_time_as_fraction: float = 0.0
    dma_stall_fraction: float = 0.0
    measured_flop_rate: float = 0.0
    model_flop_rate: float = 0.0
    measured_memory_bw: float = 0.0
    hbm_bw: float = 0.0
    cmem_read_bw: float = 0.0
    cmem_write_bw: float = 0.0
    vmem_read_bw: float = 0.0
    vmem_write_bw: float = 0.0
    operational_intensity: float = 0.0
    hbm_operational_intensity: float = 0.0
    cmem_read_operational_intensity: float = 0.0
    cmem_write_operational_intensity: float = 0.0
    vmem_read_operational_intensity: float = 0.0
    vmem_write_operational_intensity: float = 0.0
    bottleneck_operational_intensity: float = 0.0
    bound_by: str = ""
    optimal_flop_rate: float = 0.0
    roofline_efficiency: float = 0.0  # fraction 0..1
    flop_rate_relative_to_hw_limit: float = 0.0
    memory_bw_relative_to_hw_limit: float = 0.0
    include_infeed_outfeed: bool = False
    apply_time_scale_multiplier: bool = False
    flops: float = 0.0
    flops_v2: float = 0.0
    bytes_accessed: float = 0.0
    source_info: dict[str, Any] | None = None


class RooflineModelDatabase(ProtoModel):
    device_type: str = ""
    megacore: bool = False
    has_cmem: bool = False
    has_merged_vmem: bool = False
    peak_flop_rate: float = 0.0  # GFLOP/s
    peak_hbm_bw: float = 0.0  # GiB/s
    peak_cmem_read_bw: float = 0.0
    peak_cmem_write_bw: float = 0.0
    peak_vmem_read_bw: float = 0.0
    peak_vmem_write_bw: float = 0.0
    roofline_model_record: list[RooflineModelRecord] = Field(default_factory=list)
    diagnostics: dict[str, Any] | None = None
    time_scale_multiplier: float = 0.0
    num_sparse_core_tiles: int = 0
    peak_sc_flop_rate: float = 0.0
    peak_spmem_read_bw: float = 0.0
    peak_spmem_write_bw: float = 0.0
    sc_roofline_model_record: list[dict[str, Any]] = Field(default_factory=list)


# --- overview_page.proto / input_pipeline.proto ------------------------------------------------------
class StepSummary(ProtoModel):
    average: float = 0.0  # ms
    standard_deviation: float = 0.0
    minimum: float = 0.0
    maximum: float = 0.0


class InputPipelineAnalysisResult(ProtoModel):
    tag: bool = False
    hardware_type: str = ""
    step_time_summary: StepSummary | None = None
    input_percent_summary: StepSummary | None = None
    input_percent: float = 0.0
    output_percent: float = 0.0
    idle_percent: float = 0.0
    compute_percent: float = 0.0
    step_details: list[dict[str, Any]] = Field(default_factory=list)
    input_time_breakdown: dict[str, Any] | None = None
    input_op_details: list[dict[str, Any]] = Field(default_factory=list)
    recommendation: dict[str, Any] | None = None
    step_time_breakdown: dict[str, Any] | None = None
    diagnostics: dict[str, Any] | None = None


class OverviewPageAnalysis(ProtoModel):
    """Only the fields ASAP reads are typed; the rest of the proto's (many, version-dependent) fields pass."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)
    mxu_utilization_percent: float = 0.0
    device_idle_time_percent: float = 0.0
    device_duty_cycle_percent: float = 0.0
    hbm_utilization_percent: float = 0.0
    top_device_ops: list[dict[str, Any]] = Field(default_factory=list)


class OverviewPageRunEnvironment(ProtoModel):
    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)
    host_count: int = 0
    task_count: int = 0
    device_type: str = ""
    device_core_count: int = 0
    replica_count: int = 0
    num_cores_per_replica: int = 0
    is_training: bool = False


class OverviewPage(ProtoModel):
    run_environment: OverviewPageRunEnvironment | None = None
    input_analysis: InputPipelineAnalysisResult | None = None
    analysis: OverviewPageAnalysis | None = None
    recommendation: dict[str, Any] | None = None
    diagnostics: dict[str, Any] | None = None
    inference_latency: dict[str, Any] | None = None
    disaggregated_serving_latency: dict[str, Any] | None = None


# --- op_profile.proto --------------------------------------------------------------------------------
class OpMetrics(ProtoModel):
    flops: float = 0.0  # fraction of peak
    uncapped_flops: float = 0.0
    bandwidth_utils: list[float] = Field(default_factory=list)
    raw_time: float = 0.0  # picoseconds, total over occurrences
    raw_flops: float = 0.0
    bf16_flops: float = 0.0
    normalized_time_ps: float = 0.0
    raw_bytes_accessed_array: list[float] = Field(default_factory=list)  # index 0 = HBM
    occurrences: int = 0
    avg_time_ps: float = 0.0


class XlaInstruction(ProtoModel):
    op: str = ""
    expression: str = ""
    provenance: str = ""
    category: str = ""
    layout: dict[str, Any] | None = None
    computation_primitive_size: int = 0
    fingerprint: Num = 0
    program_id: Num = 0
    source_info: dict[str, Any] | None = None
    xprof_kernel_metadata: str | None = None


class OpNode(ProtoModel):
    name: str = ""
    metrics: OpMetrics | None = None
    children: list[OpNode] = Field(default_factory=list)
    category: dict[str, Any] | None = None
    xla: XlaInstruction | None = None
    num_children: int = 0
    program_serving_metadata: dict[str, Any] | None = None


class OpProfile(ProtoModel):
    by_category: OpNode | None = None
    by_program: OpNode | None = None
    device_type: str = ""
    agg_dvfs_time_scale_multiplier: float = 0.0
    by_category_exclude_idle: OpNode | None = None
    by_program_exclude_idle: OpNode | None = None
    by_provenance: OpNode | None = None
    by_provenance_exclude_idle: OpNode | None = None
