"""Stage 3, critique: the Critic's checks on one predicted candidate, and whether the config can carry it.

:func:`screen` drops a candidate the bulk score already found out of memory (before predicting it in
full); :func:`review_candidate` runs every Critic check (:func:`bot.proposals.critic.critique`) with the
candidate's prediction and settings, then renders its config diff: a mesh or setting the run's own config
format cannot express is not a proposal. Every rejection is tallied by check name with one example, so the
answer can say why fewer than ``k`` proposals were found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.errors import ConfigError
from bot.proposals.critic import critique
from bot.proposals.models import CriticResult

if TYPE_CHECKING:
    from bot.proposals.candidates import Candidate
    from bot.proposals.context import Context
    from bot.proposals.predict import Prediction


@dataclass
class Rejections:
    """Why candidates were rejected: check name -> count, and one example per check."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, example: str | None = None) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        if example is not None:
            self.examples.setdefault(name, example)


@dataclass
class Reviewed:
    """A candidate that passed every hard check, with its diff and any extra trade-offs to show."""

    result: CriticResult
    diff: str | None
    extra: list[str]


COMMAND_OWNED = "set by the recorded launch command"
"""How :mod:`bot.configs.edit` says a value comes from run.yaml's ``command:`` (which wins over the file)."""


def config_diff(run: Any, cfg: Any | None, mesh: Any, settings: dict[str, Any] | None = None) -> str | None:
    """Unified diff of the run's config file with ``mesh`` (and setting values) applied; only those lines change."""
    return config_diff_notes(run, cfg, mesh, settings)[0]


def config_diff_notes(run: Any, cfg: Any | None, mesh: Any,
                      settings: dict[str, Any] | None = None) -> tuple[str | None, list[str]]:
    """:func:`config_diff`, and the edited lines whose kept comment still names a value the edit changed."""
    if cfg is None:
        return None, []
    from bot.configs.edit import config_diff_notes as diff_and_notes  # every file the change touches (issue 13)

    return diff_and_notes(cfg, mesh, settings or {}, run.record.config or cfg.source)


def expressible(ctx: Context, cand: Candidate) -> bool:
    """A cheap pre-check that the run's config format can carry this mesh's axes, before predicting it.

    Megatron configs write axis totals (placement follows Megatron's rank order) and have no FSDP axis, so
    each axis is tried once (all chips on it) and remembered: a mesh using an axis the file cannot carry
    is dropped without editing the file again. The full edit in :func:`review_candidate` stays the
    authority; other formats are left to it.
    """
    if ctx.cfg is not None and hasattr(ctx.cfg, "allowed_axes"):
        # issue 13: never an axis the config's framework lacks (e.g. sequence for a MaxText without one)
        allowed = ctx.cfg.allowed_axes()
        if any(size > 1 and axis not in allowed for axis, size in cand.mesh.sizes().items()):
            return False
    if ctx.cfg is None or getattr(ctx.cfg, "format", None) != "megatron":
        return True
    from bot.configs.mesh import Mesh

    record = ctx.record
    for axis, size in cand.mesh.sizes().items():
        if size <= 1:
            continue
        known = ctx.expressible.get(axis)
        if known is None:
            probe = Mesh(ici={axis: record.chips_per_slice}, dcn={axis: record.num_slices} if record.num_slices > 1 else {})
            try:
                config_diff(ctx.run, ctx.cfg, probe)
                known = True
            except ConfigError:
                known = False
            ctx.expressible[axis] = known
        if not known:
            return False
    return True


def screen(ctx: Context, cand: Candidate, rejections: Rejections) -> bool:
    """False when the bulk score already puts ``cand`` out of memory (model known); it is then rejected."""
    if ctx.known and cand.fits is False:
        ctx.counts["rejected"] += 1
        rejections.add("memory")
        return False
    return True


def review_candidate(ctx: Context, cand: Candidate, prediction: Prediction, rejections: Rejections) -> Reviewed | None:
    """Every Critic check on ``cand``; None (tallied in ``rejections``) when a hard check fails or the
    config cannot express its mesh."""
    if not expressible(ctx, cand):
        ctx.counts["rejected"] += 1
        rejections.add(f"not expressible in the {getattr(ctx.cfg, 'format', '?')} config")
        return None
    ctx.counts["critiqued"] += 1
    result = critique(
        ctx.run, cand.mesh, report=ctx.report, prediction=prediction.pred, history=ctx.history, baseline=ctx.base,
        baseline_prediction=ctx.base_pred, settings=prediction.settings, calibration=ctx.calibration,
        base_settings=ctx.settings0,
    )
    if not result.ok:
        ctx.counts["rejected"] += 1
        for ch in result.failures:
            if ch.hard:
                rejections.add(ch.name, f"{cand.mesh.short()}: {ch.reason}")
        return None
    try:
        # a change pinned to its mesh (a DeepSpeed ZeRO stage) is one edit with it: the mesh alone may not be one
        pinned = cand.change.config_values if cand.change.only_mesh is not None else None
        diff, stale = config_diff_notes(ctx.run, ctx.cfg, cand.mesh, pinned)
    except ConfigError as exc:
        if COMMAND_OWNED in exc.message:
            # the run's launch command sets a degree this mesh changes (torchtitan CLI over its TOML): the mesh
            # is the trainer's to run, the edit is the command's, not the file's
            return Reviewed(result=result, diff=None, extra=[
                f"{exc.message.split(': ', 1)[-1]}: change it on the launch command ({exc.hint or 'by hand'}); "
                "ASAP edits files, not recorded commands"])
        # e.g. FSDP in a Megatron config: a mesh the run's own format cannot express is not a proposal.
        ctx.counts["rejected"] += 1
        rejections.add(f"not expressible in the {getattr(ctx.cfg, 'format', '?')} config")
        return None
    extra: list[str] = []
    if cand.change.config_values and not pinned:
        try:
            diff, stale = config_diff_notes(ctx.run, ctx.cfg, cand.mesh, cand.change.config_values)
        except ConfigError as exc:
            extra.append(f"the config file cannot carry this setting ({exc.message}): set it where the trainer reads it")
    elif cand.change.values and not cand.change.config_values and getattr(ctx.cfg, "format", None) == "torchtitan":
        extra.append("the recorded launch command (run.yaml command:) sets this setting and wins over the TOML: "
                     "make the change on the command")
    elif cand.change.values and not cand.change.config_values and ctx.cfg is not None:
        extra.append("the config file has no key for this setting: set it where the trainer reads it")
    extra.extend(_torchtitan_batch(ctx, cand))
    extra.extend(stale)
    return Reviewed(result=result, diff=diff, extra=extra)


def _torchtitan_batch(ctx: Context, cand: Candidate) -> list[str]:
    """A torchtitan TOML without global_batch_size runs local_batch_size x data-parallel degree sequences: a
    mesh with another data-parallel degree changes the global batch unless the file pins it."""
    st = ctx.settings0
    if getattr(ctx.cfg, "format", None) != "torchtitan" or st is None or st.global_batch or not st.local_batch:
        return []
    if "training.global_batch_size" in cand.change.config_values or any(k == "global_batch" for k, _ in cand.change.values):
        return []  # the proposal's own edit pins it (a rebatched mesh: bot.proposals.rebatch)
    sizes = cand.mesh.sizes()
    dp = sizes["data"] * sizes["fsdp"] * sizes["expert"]
    old_dp = ctx.record.num_chips // (st.batch_divisor or 1)
    if dp == old_dp:
        return []
    batch = st.local_batch * old_dp
    from bot.configs.torchtitan_json import is_function_config
    from bot.proposals.rebatch import titan_batch_key

    key = titan_batch_key(ctx.cfg)
    seq = ctx.cfg.settings.get("training.seq_len") if ctx.cfg is not None else None
    if ctx.cfg is not None and is_function_config(ctx.cfg) and isinstance(seq, int):
        fix = f"set config.training.num_tokens_per_train_step = {batch * seq} in the config function"
    elif key == "training.local_batch_size":
        fix = f"set global_batch_size = {batch}"
    elif batch % dp == 0:
        fix = f"set batch_size = {batch // dp} (this torchtitan has no global_batch_size)"
    else:
        fix = f"no whole batch_size does it over {dp} ranks (this torchtitan has no global_batch_size)"
    return [f"torchtitan runs its local batch x data-parallel degree sequences per step (the config sets no "
            f"global batch): with data-parallel degree {old_dp} -> {dp}, {fix} to keep the step's {batch} sequences "
            "this prediction assumes"]
