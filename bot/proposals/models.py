"""Output models of the proposal engine: critic checks, proposals, reviews, eval reports.

These are the stable JSON that ``asap propose --json``, ``asap review --json`` and ``asap eval --json``
print (documented in ``docs/proposals-json.md``). Fields are only ever added, never renamed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

CheckName = Literal["product", "divisibility", "memory", "diagnosis", "known_failure", "aot_compile"]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Check(_Out):
    """One Critic check on one mesh."""

    name: CheckName
    passed: bool = Field(description="false when the mesh fails this check (skipped checks pass)")
    reason: str = Field(description="why, with the numbers the verdict rests on")
    hard: bool = Field(
        default=True, description="a failed hard check keeps the mesh from ever being proposed; soft ones are warnings"
    )
    skipped: bool = Field(default=False, description="the check could not run (e.g. model unknown); reason says why")


class CriticResult(_Out):
    """Every check the Critic ran on one mesh."""

    mesh: dict[str, dict[str, int]]
    mesh_short: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        """True when no hard check failed: the mesh may be shown to a person."""
        return all(c.passed or not c.hard for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


class Predicted(_Out):
    """A computed prediction for one mesh, relative to the calibrated baseline where there is one.

    ``basis`` says where it comes from: ``model`` (the cost model from the model and training shape,
    calibrated on the profile when there is one) or ``profile`` (the model is unknown: the measured step's
    own compute and collective times, scaled by how the change moves each; memory cannot be computed and
    is null).
    """

    step_time_ms: float
    step_time_low_ms: float
    step_time_high_ms: float
    uncertainty: float = Field(description="relative half-width of the step-time band, 0.2 = +-20%")
    memory_per_chip_bytes: float | None = Field(description="null when the model is unknown (basis 'profile')")
    memory_capacity_bytes: float
    fits_memory: bool | None = Field(description="null when memory cannot be computed (basis 'profile')")
    breakdown_ms: dict[str, float]
    memory_breakdown_bytes: dict[str, float]
    assumptions: list[str]
    basis: Literal["model", "profile"] = Field(default="model", description="how the prediction was made")
    memory_low_bytes: float | None = Field(default=None, description="low edge of the memory band")
    memory_high_bytes: float | None = Field(default=None, description="high edge of the memory band")
    tokens_per_step: float | None = Field(default=None, description="tokens per optimizer step this prediction is for")


class Change(_Out):
    """How one proposal compares with the baseline mesh."""

    step_time_ms_delta: float | None = Field(description="proposal minus baseline (negative = faster)")
    step_time_percent: float | None = Field(description="relative change of step time, percent (negative = faster)")
    speedup: float | None = Field(description="baseline / proposal step time")
    memory_per_chip_bytes_delta: float | None
    within_noise: bool = Field(description="the predicted gain is inside the prediction's uncertainty")
    tokens_per_step_factor: float = Field(
        default=1.0, description="tokens per step vs the baseline (a settings change may raise the global batch)"
    )
    time_per_token_percent: float | None = Field(
        default=None, description="relative change of step time per token, percent (negative = faster); "
        "equals step_time_percent when the tokens per step are unchanged"
    )


class MoveRef(_Out):
    """The playbook rule a proposal came from."""

    id: str
    rationale: str
    tradeoffs: str
    source: str
    citation: str | None = Field(default=None, description="playbooks/<file>.md#<anchor> where the move is written")


class Citation(_Out):
    """What a proposal rests on, so a person can check it: a playbook section or a past change."""

    ref: str = Field(description="playbooks/<file>.md#<heading-anchor>, a PR URL, a commit, or applied:<run>")
    title: str = Field(description="the heading path, or the past change's title")
    kind: Literal["playbook", "history", "pr", "commit"] = Field(
        description="playbook section; merged PR; commit; history = ASAP's own applied proposal and its outcome"
    )
    why: str = Field(description="why it is cited: the move applied, the bottleneck, a similar past change and its effect")


class Confidence(_Out):
    value: float = Field(ge=0, le=1)
    reasons: list[str]


class Proposal(_Out):
    rank: int
    mesh: dict[str, dict[str, int]] = Field(description="{'ici': {axis: size}, 'dcn': {axis: size}}, size-1 axes dropped")
    mesh_short: str
    kind: str = Field(description="the change in kind vs the baseline, e.g. 'tensor- fsdp+'")
    origin: Literal["playbook", "search", "both"]
    predicted: Predicted | None = Field(description="null when the model is unknown (no absolute predictions)")
    change: Change
    labels: list[str] = Field(description="e.g. 'within noise', 'does not address the bottleneck'")
    rationale: str
    tradeoffs: list[str]
    move: MoveRef | None
    confidence: float = Field(ge=0, le=1)
    confidence_reasons: list[str]
    critic: list[Check]
    diff: str | None = Field(description="unified diff of the run's config file applying this mesh")
    config_format: str | None
    settings: dict[str, object] = Field(
        default_factory=dict,
        description="settings changed besides the mesh, config key -> new value (micro-batch, remat policy, ...)",
    )
    settings_changes: list[str] = Field(
        default_factory=list, description="the settings changes in words, e.g. 'micro_batch_size 1 -> 4'"
    )
    citations: list[Citation] = Field(
        default_factory=list,
        description="playbook sections (move, bottleneck, retrieved) and similar past changes this proposal rests on",
    )


class Baseline(_Out):
    mesh: dict[str, dict[str, int]]
    mesh_short: str
    measured_step_ms: float | None
    predicted: Predicted | None
    critic: list[Check]


class Advice(_Out):
    """A playbook recommendation that is not a mesh change (input pipeline, remat, ...)."""

    id: str
    text: str
    source: str
    citation: str | None = Field(default=None, description="playbooks/<file>.md#<anchor> where the advice is written")


class ProposalSet(_Out):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    bottleneck: str | None
    verdict: Literal["improve", "near_optimal", "uncertain", "current_fails", "mesh_not_the_problem",
                     "no_valid_proposals"] = Field(
        description="improve: best predicted faster beyond its band; near_optimal: evidence of little headroom; "
        "uncertain: a gain inside a wide band, or a model that cannot move the dominant term; current_fails: the "
        "current configuration fails a hard check (e.g. a recorded OOM); see bot/proposals/verdict.py"
    )
    summary: str
    baseline: Baseline
    proposals: list[Proposal]
    advice: list[Advice]
    notes: list[str] = Field(description="why fewer than k proposals, what was skipped, what would raise confidence")
    missing_info: list[str] = Field(description="inputs that would raise confidence")
    model_known: bool
    calibration: dict[str, object] | None
    candidates: dict[str, int] = Field(description="how many meshes were enumerated / scored / critiqued / rejected")
    elapsed_ms: float


class ReviewSide(_Out):
    path: str
    config_format: str | None
    mesh: dict[str, dict[str, int]] | None
    mesh_short: str | None
    predicted: Predicted | None


class ReviewFinding(_Out):
    severity: Literal["problem", "pre-existing", "warning", "info"] = Field(
        description="problem: introduced by the change (fails the review); pre-existing: a hard check the old "
        "config already failed (shown, does not fail the review); warning; info"
    )
    check: str
    message: str


class ReviewResult(_Out):
    schema_version: int = SCHEMA_VERSION
    old: ReviewSide
    new: ReviewSide
    run_id: str | None
    bottleneck: str | None
    mesh_changed: bool
    change: Change | None
    critic: list[Check]
    findings: list[ReviewFinding]
    skipped: list[str] = Field(description="checks that could not run, and why")
    ok: bool = Field(description="no problem flagged (exit status 0)")


class CaseResult(_Out):
    case: str
    kind: Literal["profiled", "config_only"]
    source: str
    verdict: str | None = Field(description="the engine's verdict (profiled cases)")
    verdict_match: bool | None = Field(description="verdict equals expected_verdict (null when none expected)")
    top1: bool | None
    top3: bool | None
    kind_top3: bool | None = Field(description="a top-3 proposal makes the same kind of change as the adopted mesh")
    expert_rank: int | None = Field(description="config-only: rank of the expert mesh among distinct kinds")
    expert_passes_critic: bool | None = Field(default=None, description="config-only: the published mesh passes every hard check")
    proposals: list[str]
    adopted: str | None
    proposals_failing_check: int
    proposals_total: int
    step_time_errors: list[float] = Field(description="|predicted - measured| / measured per measured mesh")
    seconds: float
    error: str | None = None
    notes: list[str] = Field(default_factory=list)
    sample: bool = Field(default=False, description="generated from ASAP's own physics model (sample-*): reported apart")
    table: str | None = Field(default=None, description="the published table the case is a row of")
    points: list[MeasuredPoint] = Field(default_factory=list, description="each measured outcome vs ASAP's prediction")


class MeasuredPoint(_Out):
    """One measured outcome of an eval case next to what ASAP predicts for the same configuration."""

    mesh: str
    family: str = Field(description="hardware family one calibration is fitted over: chip, plus '-fp8' for fp8 runs")
    measured_step_ms: float | None = Field(description="stated, or derived from the stated throughput (see step_from)")
    step_from: str | None = Field(description="step_time_ms | tokens_per_second_per_chip | tflops_per_chip | mfu_percent")
    predicted_step_ms: float | None = Field(description="ASAP's uncalibrated prediction")
    predicted_band_ms: list[float] | None = Field(
        default=None, description="[low, high] of the uncalibrated prediction's band: what the answer says the step "
        "may be, unknown settings and the model's own uncertainty included")
    metrics: dict[str, list[float]] = Field(
        default_factory=dict, description="throughput metric -> [measured, predicted], for ranking within a table"
    )
    measured_memory_gib: float | None = None
    predicted_memory_gib: float | None = None
    measured_oom: bool = False
    predicted_oom: bool | None = Field(description="the Critic's memory check fails hard (out of memory)")
    oom_scored: bool = Field(description="false when the catalog chip's memory differs from the measured hardware")
    critic_rejects: bool | None = Field(description="some hard Critic check fails this configuration")
    critic_reasons: list[str] = Field(default_factory=list)
    anomaly: str | None = Field(default=None, description="the source flags this figure as not explained by the "
                                "configuration: left out of the table's Spearman")


class TableFigures(_Out):
    """Rank agreement and error within one published table."""

    table: str
    metric: str | None = Field(description="the throughput metric every row of the table states")
    rows: int
    spearman: float | None = Field(description="Spearman rank correlation of predicted vs measured metric (>= 3 rows), "
                                   "over the rows the source does not flag as anomalous")
    spearman_all_rows: float | None = Field(default=None, description="the same over every row, flagged ones included")
    flagged_rows: int = Field(default=0, description="rows whose source says the figure is a quirk, not the config")
    step_time_error_median: float | None = Field(description="median |error| of step time after per-family calibration")
    memory_ratio_min: float | None = None
    memory_ratio_max: float | None = None


class EvalFigures(_Out):
    """The headline eval figures over one group of cases (published, or sample-*)."""

    cases: int
    adopted_cases: int = Field(description="cases that record an adopted configuration")
    top1_rate: float | None
    top3_rate: float | None
    oom_cases: int
    oom_recall: float | None = Field(description="measured OOMs the Critic calls out of memory")
    ran_cases: int = Field(description="measured configurations that ran, with the catalog chip's memory")
    false_oom_rate: float | None = Field(description="configurations that ran but are called out of memory")
    critic_false_rejections: int = Field(description="configurations that ran but fail a hard Critic check")
    critic_false_rejection_rate: float | None
    calibration: dict[str, float] = Field(
        default_factory=dict, description="hardware family -> measured/predicted step time (median; >= 3 points)"
    )
    step_time_points: int
    step_time_error_median_uncalibrated: float | None
    step_time_error_median: float | None = Field(description="after one calibration per hardware family")
    memory_points: int
    memory_error_median: float | None = Field(description="median |predicted/measured - 1| of peak memory")
    memory_ratio_min: float | None
    memory_ratio_max: float | None
    tables: list[TableFigures] = Field(default_factory=list)


class EvalReport(_Out):
    schema_version: int = SCHEMA_VERSION
    cases: list[CaseResult]
    top1_rate: float | None
    top3_rate: float | None
    verdict_match_rate: float | None
    kind_top3_rate: float | None
    failing_check_rate: float | None
    step_time_error_mean: float | None
    step_time_error_max: float | None
    seconds_per_case: float | None
    published: EvalFigures | None = Field(default=None, description="figures over the cases that are not sample-*")
    samples: EvalFigures | None = Field(default=None, description="sample-* cases (ASAP's own physics model), apart")
