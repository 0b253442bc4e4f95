"""The eval harness: ``asap eval CASES_DIR`` over case folders.

A case folder is a run folder (``run.yaml``, the sharding config, and the profile when there is one) plus
``expected.yaml``::

    schema_version: 1
    kind: profiled            # profiled: run propose() on the profile; config_only: no profile exists
    source: "where the expert configuration or measurement is published"
    adopted_mesh: {ici: {fsdp: 256}}          # optional: the mesh experts adopted
    measured:                                 # optional: measured step time per mesh
      - {mesh: {ici: {data: 2, fsdp: 2, tensor: 2}}, step_time_ms: 248.6, source: "run.yaml measured"}

* **profiled** cases: the engine proposes from the run's profile; *top-1* / *top-3* = the adopted mesh is
  the first / among the proposals (when the adopted mesh is the run's current one, a match means the
  engine proposes nothing that beats it beyond noise). Optional ``expected_verdict`` (e.g.
  ``mesh_not_the_problem`` for a host-bound run) and ``expected_kinds`` (``tensor->fsdp``: a top-3
  proposal makes that kind of change) are checked too; with no adopted mesh, the verdict decides the match.
* **config_only** cases (a published expert config without a profile): the expert mesh must pass the
  Critic, and its *rank* is 1 + the number of distinct-in-kind, Critic-passing meshes predicted faster than
  it beyond the prediction's uncertainty (uncalibrated model); top-1 / top-3 = rank 1 / rank <= 3.

Also reported: the share of proposals that fail a Critic check when re-checked independently, the
relative error of predicted vs measured step time, and the time per case.
"""

from __future__ import annotations

import fnmatch
import statistics
import time
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError, model_validator

from bot import yamlsafe
from bot.configs.mesh import Mesh
from bot.errors import AsapError
from bot.proposals.eval_figures import figures, measured_points
from bot.proposals.kinds import MIN_DISTANCE, distance, kind_of, mesh_key
from bot.proposals.models import CaseResult, EvalReport, MeasuredPoint

EXPECTED_FILE = "expected.yaml"
CONFIG_ONLY_MAX_CRITIQUED = 200


class MeasuredOutcome(BaseModel):
    """One measured outcome of a configuration, as the source states it (at least one figure, or ``oom``)."""

    model_config = ConfigDict(extra="forbid")
    mesh: Mesh | None = Field(default=None, description="the measured mesh; default: the case config's mesh")
    step_time_ms: PositiveFloat | None = Field(default=None, description="stated step time, milliseconds")
    tokens_per_second_per_chip: PositiveFloat | None = Field(default=None, description="stated tokens/s per chip (GPU)")
    tflops_per_chip: PositiveFloat | None = Field(default=None, description="stated model TFLOP/s per chip (GPU)")
    mfu_percent: float | None = Field(default=None, gt=0, le=100, description="stated model FLOPs utilization")
    peak_memory_gib: PositiveFloat | None = Field(default=None, description="stated peak memory per chip, GiB")
    oom: bool = Field(default=False, description="the source states this configuration ran out of memory")
    ran: bool = Field(default=False, description="the source states this configuration runs, without a figure "
                      "(e.g. a recipe that 'will work out of the box'): scored for OOM and Critic rejections only")
    source: str | None = Field(default=None, description="where in the source (table, row, footnote)")
    anomaly: str | None = Field(
        default=None, description="the source's own words that this figure is not explained by the configuration "
        "(e.g. MaxText's v4 README: 'quirkily higher ... because of choices made by the compiler'): the row counts "
        "for every error figure but is left out of the table's ranking (Spearman), which is also shown with it")

    @model_validator(mode="after")
    def _something_measured(self) -> MeasuredOutcome:
        figures = (self.step_time_ms, self.tokens_per_second_per_chip, self.tflops_per_chip, self.mfu_percent,
                   self.peak_memory_gib)
        if self.oom and self.ran:
            raise ValueError("oom: true and ran: true contradict each other")
        if not (self.oom or self.ran) and all(v is None for v in figures):
            raise ValueError("a measured outcome needs a figure (step_time_ms, tokens_per_second_per_chip, "
                             "tflops_per_chip, mfu_percent, peak_memory_gib), oom: true or ran: true")
        return self


class Expected(BaseModel):
    """``expected.yaml`` of one eval case."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    kind: Literal["profiled", "config_only"]
    source: str = Field(min_length=1, description="citation: file/URL of the expert config or measurement")
    url: str | None = Field(default=None, description="link to the source at a fixed revision")
    table: str | None = Field(
        default=None, description="the published table this case is a row of; rank correlation is computed per table"
    )
    row: str | None = Field(default=None, description="the row as the source labels it")
    stated: list[str] = Field(default_factory=list, description="what the source states, quoted or closely paraphrased")
    assumed: list[str] = Field(default_factory=list, description="what the case assumes beyond the source, and why")
    memory_capacity_matches: bool = Field(
        default=True,
        description="false when the measured hardware's memory differs from the catalog chip: OOM is then not scored",
    )
    hardware_variant: str | None = Field(
        default=None,
        description="the measured hardware is a variant of the catalog chip (e.g. '96gb-hbm2e-500w'): its points are "
        "calibrated as a family of their own",
    )
    adopted_mesh: Mesh | None = None
    expected_verdict: Literal[
        "improve", "near_optimal", "uncertain", "current_fails", "mesh_not_the_problem", "no_valid_proposals"
    ] | None = Field(
        default=None, description="profiled: the verdict an expert would give (e.g. mesh_not_the_problem for host-bound)"
    )
    expected_kinds: list[str] = Field(
        default_factory=list,
        description="profiled: kinds of change one of the top 3 should make; shell patterns, e.g. 'tensor->*'",
    )
    measured: list[MeasuredOutcome] = Field(default_factory=list)
    notes: str | None = None


def load_expected(path: Path) -> Expected:
    try:
        raw = yamlsafe.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise AsapError(f"cannot read expected file: {exc}", source=str(path)) from None
    except yaml.YAMLError as exc:
        raise AsapError(f"malformed YAML: {getattr(exc, 'problem', exc)}", source=str(path)) from None
    if not isinstance(raw, dict):
        raise AsapError("expected a mapping (kind, source, adopted_mesh, measured)", source=str(path))
    try:
        return Expected.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise AsapError(err["msg"], source=str(path), field=loc) from None


def case_folders(cases_dir: Path) -> list[Path]:
    if not cases_dir.is_dir():
        raise AsapError("cases directory does not exist", source=str(cases_dir))
    found = sorted(p for p in cases_dir.iterdir() if (p / "run.yaml").is_file() and (p / EXPECTED_FILE).is_file())
    if not found:
        raise AsapError(
            f"no case folders (a run folder with run.yaml and {EXPECTED_FILE}) found", source=str(cases_dir)
        )
    return found


def _recheck_failures(run, report, proposals) -> int:  # type: ignore[no-untyped-def]
    """Proposals that fail a hard check when re-checked independently: the config edited with the proposal's
    settings and parsed again, the Critic run afresh on the mesh with those settings."""
    from bot.proposals.critic import critique
    from bot.proposals.settings import settings_of_proposal

    bad = 0
    for p in proposals:
        mesh = Mesh(ici=p.mesh["ici"], dcn=p.mesh["dcn"])  # type: ignore[arg-type]
        try:
            settings = settings_of_proposal(run, p.settings)
        except AsapError:
            bad += 1
            continue
        bad += 0 if critique(run, mesh, report=report, settings=settings).ok else 1
    return bad


def _step_errors(points: list[MeasuredPoint]) -> list[float]:
    """|predicted - measured| / measured step time of each measured outcome that has both."""
    return [
        abs(p.predicted_step_ms - p.measured_step_ms) / p.measured_step_ms
        for p in points if p.predicted_step_ms and p.measured_step_ms
    ]


def _pmesh(p) -> Mesh:  # type: ignore[no-untyped-def]
    return Mesh(ici=p.mesh["ici"], dcn=p.mesh["dcn"])


def eval_profiled(run, expected: Expected) -> CaseResult:  # type: ignore[no-untyped-def]
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import baseline_mesh, propose
    from knowledge.costmodel import Calibration

    report = analyze_run(run)
    ps = propose(run, report)
    base, _ = baseline_mesh(run, report)
    meshes = [Mesh(ici=p.mesh["ici"], dcn=p.mesh["dcn"]) for p in ps.proposals]  # type: ignore[arg-type]
    top1 = top3 = kind_top3 = None
    notes = [ps.summary]
    if expected.adopted_mesh is not None:
        want = mesh_key(expected.adopted_mesh)
        if want == mesh_key(base):
            # A settings-only proposal keeps the adopted mesh: it does not contradict the experts' mesh.
            beats = [
                p for p in ps.proposals
                if p.predicted is not None and not p.change.within_noise and mesh_key(_pmesh(p)) != want
                and (p.change.time_per_token_percent or 0) < 0
            ]
            top1 = top3 = not beats
            kind_top3 = top3
            notes.append("adopted mesh = current mesh: a match means no proposal changes the mesh and beats it beyond noise")
        else:
            keys = [mesh_key(m) for m in meshes]
            top1 = bool(keys) and keys[0] == want
            top3 = want in keys[:3]
            kind_top3 = kind_of(base, expected.adopted_mesh) in [p.kind for p in ps.proposals[:3]]
    if expected.expected_kinds:
        kinds = [p.kind for p in ps.proposals[:3]]
        hit = any(fnmatch.fnmatchcase(k, pat) for pat in expected.expected_kinds for k in kinds)
        kind_top3 = hit if kind_top3 is None else (kind_top3 and hit)
    verdict_ok = None if expected.expected_verdict is None else ps.verdict == expected.expected_verdict
    if expected.adopted_mesh is None and verdict_ok is not None:
        top1 = top3 = verdict_ok
    calibration = Calibration.model_validate(ps.calibration) if ps.calibration else None
    points = measured_points(run, expected, base, calibration)
    return CaseResult(
        verdict=ps.verdict,
        verdict_match=verdict_ok,
        case=run.record.id,
        kind="profiled",
        source=expected.source,
        top1=top1,
        top3=top3,
        kind_top3=kind_top3,
        expert_rank=None,
        proposals=[p.mesh_short for p in ps.proposals],
        adopted=expected.adopted_mesh.short() if expected.adopted_mesh else None,
        proposals_failing_check=_recheck_failures(run, report, ps.proposals),
        proposals_total=len(meshes),
        step_time_errors=_step_errors(points),
        points=points,
        seconds=0.0,
        notes=notes,
    )


def eval_config_only(run, expected: Expected) -> CaseResult:  # type: ignore[no-untyped-def]
    from bot.proposals.critic import critique
    from bot.proposals.engine import baseline_mesh
    from knowledge import costmodel, meshsearch
    from knowledge.cost_settings import settings_for_run

    record = run.record
    expert, _ = baseline_mesh(run, None)
    settings = settings_for_run(run)
    if expected.adopted_mesh is not None and mesh_key(expected.adopted_mesh) != mesh_key(expert):
        raise AsapError(
            f"config-only case: adopted_mesh {expected.adopted_mesh.short()} differs from the config's mesh {expert.short()}",
            source=str(run.folder / EXPECTED_FILE),
            field="adopted_mesh",
        )
    notes: list[str] = []
    points = measured_points(run, expected, expert)
    expert_check = critique(run, expert, settings=settings)
    if not expert_check.ok:
        notes.append("the expert mesh FAILS the Critic: " + "; ".join(c.reason for c in expert_check.failures if c.hard))
    for c in expert_check.failures:
        if not c.hard:
            notes.append(f"Critic warning on the expert mesh ({c.name}): {c.reason}")
    if not costmodel.model_known(record, settings):
        notes.append("model unknown: cannot rank the expert mesh")
        return CaseResult(
            verdict=None, verdict_match=None, case=record.id, kind="config_only", source=expected.source, top1=None, top3=None, kind_top3=None,
            expert_rank=None, expert_passes_critic=expert_check.ok, proposals=[], adopted=expert.short(),
            proposals_failing_check=0, proposals_total=0, step_time_errors=[], seconds=0.0, notes=notes, points=points,
        )
    expert_pred = costmodel.predict(record, expert, settings=settings)
    noise = expert_pred.uncertainty * expert_pred.step_time_ms
    meshes = meshsearch.enumerate_meshes(record)
    scores = meshsearch.score_meshes(record, meshes, None, settings=settings)
    order = sorted(
        ((float(t), m) for t, m in zip(scores, meshes, strict=True) if float(t) < expert_pred.step_time_ms - noise),
        key=lambda tm: tm[0],  # equal predicted times keep enumeration order (meshes do not compare)
    ) if meshes else []
    better: list[Mesh] = []
    critiqued = 0
    for _, m in order:
        if len(better) >= 3 or critiqued >= CONFIG_ONLY_MAX_CRITIQUED:
            break
        if mesh_key(m) == mesh_key(expert):
            continue
        if any(kind_of(expert, m) == kind_of(expert, b) or distance(expert, b, m) < MIN_DISTANCE for b in better):
            continue
        critiqued += 1
        if critique(run, m, settings=settings).ok:
            better.append(m)
    rank = len(better) + 1
    if better:
        notes.append(
            f"predicted faster than the expert beyond +-{expert_pred.uncertainty:.0%}: " + "; ".join(b.short() for b in better)
        )
    notes.append(
        f"expert mesh predicted {expert_pred.step_time_ms:.1f} ms/step (uncalibrated), "
        f"{expert_pred.memory_per_chip_bytes / 1e9:.1f} GB per chip (band {(expert_pred.memory_low_bytes or 0) / 1e9:.1f}-"
        f"{(expert_pred.memory_high_bytes or 0) / 1e9:.1f}) of {expert_pred.memory_capacity_bytes / 1e9:.0f} GB"
    )
    scored = expected.adopted_mesh is not None  # a config that ran out of memory was never adopted
    return CaseResult(
        verdict=None,
        verdict_match=None,
        case=record.id,
        kind="config_only",
        source=expected.source,
        top1=(rank == 1 and expert_check.ok) if scored else None,
        top3=(rank <= 3 and expert_check.ok) if scored else None,
        kind_top3=None,
        expert_rank=rank,
        expert_passes_critic=expert_check.ok,
        proposals=[b.short() for b in better],
        adopted=expert.short() if scored else None,
        proposals_failing_check=0,
        proposals_total=0,
        step_time_errors=_step_errors(points),
        points=points,
        seconds=0.0,
        notes=notes,
    )


SAMPLE_PREFIX = "sample-"


def _broken(folder: Path, error: str) -> CaseResult:
    return CaseResult(
        verdict=None, verdict_match=None, case=folder.name, kind="profiled", source="-", top1=None, top3=None,
        kind_top3=None, expert_rank=None, proposals=[], adopted=None, proposals_failing_check=0, proposals_total=0,
        step_time_errors=[], seconds=0.0, error=error,
    )


def _eval_case(store, folder: Path) -> CaseResult:  # type: ignore[no-untyped-def]
    """One case folder; a broken case is a result with its error, not an exception."""
    t0 = time.perf_counter()
    table = None
    try:
        expected = load_expected(folder / EXPECTED_FILE)
        table = expected.table
        run = store.get(folder.name)
        res = eval_profiled(run, expected) if expected.kind == "profiled" else eval_config_only(run, expected)
    except AsapError as exc:
        res = _broken(folder, exc.render())
    except Exception as exc:  # noqa: BLE001 - one case's crash is reported (and fails the floor), not fatal to the eval
        res = _broken(folder, f"internal error: {type(exc).__name__}: {exc}")
    res.seconds = round(time.perf_counter() - t0, 3)
    res.sample = folder.name.startswith(SAMPLE_PREFIX)
    res.table = table
    return res


def run_eval(cases_dir: Path | str) -> EvalReport:
    """Evaluate every case folder under ``cases_dir``; a broken case is reported, not fatal.

    The headline rates count only cases that are not ``sample-*`` (those come from ASAP's own physics model
    and cannot show where it is wrong); the samples get their own figures in ``samples``.
    """
    from bot.runs.store import LocalRunStore

    cases_dir = Path(cases_dir)
    store = LocalRunStore(cases_dir)
    results = [_eval_case(store, folder) for folder in case_folders(cases_dir)]
    counted = [r for r in results if not r.sample]
    samples = [r for r in results if r.sample]

    def rate(vals: list[bool | None]) -> float | None:
        xs = [v for v in vals if v is not None]
        return sum(xs) / len(xs) if xs else None

    total = sum(r.proposals_total for r in counted)
    errors = [e for r in counted for e in r.step_time_errors]
    return EvalReport(
        cases=results,
        top1_rate=rate([r.top1 for r in counted]),
        top3_rate=rate([r.top3 for r in counted]),
        verdict_match_rate=rate([r.verdict_match for r in counted]),
        kind_top3_rate=rate([r.kind_top3 for r in counted]),
        failing_check_rate=(sum(r.proposals_failing_check for r in counted) / total) if total else None,
        step_time_error_mean=statistics.fmean(errors) if errors else None,
        step_time_error_max=max(errors) if errors else None,
        seconds_per_case=statistics.fmean([r.seconds for r in results]) if results else None,
        published=figures(counted),
        samples=figures(samples) if samples else None,
    )
