"""Playbook moves: the changes an expert tries first for a diagnosed bottleneck, read from the playbooks.

The moves are the ```` ```yaml asap-move ```` blocks of ``playbooks/*.md`` (read by
:func:`knowledge.playbooks.load_moves_from_playbooks`), each under the heading whose prose explains it, so
the rule the engine applies and the text a person reads are one source. A block is a rule
``{id, when, move | settings | advice, rationale, tradeoffs, source}`` (see ``playbooks/README.md``); each
rule carries its ``citation`` (``playbooks/<file>.md#<heading-anchor>``). A rule whose ``when`` matches the run's diagnosis, chip and current mesh
turns the baseline mesh into one candidate mesh (``move``), changes a training setting the cost model
understands (``settings``: micro-batch, per-device batch, gradient accumulation, remat policy), or gives a
recommendation that is not a computed change (``advice``: input pipeline). Candidates from moves join the
enumerated meshes; every one still has to pass the Critic and is ranked by predicted time like the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bot.configs.mesh import AXES, Mesh
from bot.errors import AsapError, brief
from bot.resources import playbooks_dir

PLAYBOOKS_PATH = playbooks_dir()

Bottleneck = Literal["compute", "hbm", "communication", "host"]

MEMORY_TIGHT_SHARE = 0.8
"""``when.memory``: a run whose predicted memory per chip reaches this share of HBM is *tight* (the Critic's usable
line is 90% with the default 10% headroom, so little or nothing is left for a change that costs memory);
below it there is *room*."""
_CONDITION = re.compile(r"^\s*(?:(ici|dcn|total)\.)?([a-z]+)\s*(>=|<=|==|!=|>|<)\s*(\d+)\s*$")
_AXIS_REF = re.compile(r"^(?:(ici|dcn)\.)?([a-z]+)$")


def _parse_axis_ref(text: str) -> tuple[str, str]:
    m = _AXIS_REF.match(text.strip())
    if not m or m.group(2) not in AXES:
        raise ValueError(f"{text!r} is not an axis; expected [ici.|dcn.]<axis> with axis one of {', '.join(AXES)}")
    return (m.group(1) or "ici", m.group(2))


class Shift(BaseModel):
    """Move a factor of one axis to another axis on the same network (the product stays the same)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from", description="[ici.|dcn.]axis that shrinks (ici when no prefix)")
    to: str = Field(description="[ici.|dcn.]axis that grows; must be on the same network as 'from'")
    factor: int | Literal["all"] = Field(default=2, description="factor moved, or 'all' of the 'from' axis")

    @field_validator("from_", "to")
    @classmethod
    def _axis(cls, v: str) -> str:
        _parse_axis_ref(v)
        return v

    @field_validator("factor")
    @classmethod
    def _factor(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 2:
            raise ValueError(f"factor must be >= 2 or 'all', got {v}")
        return v

    @model_validator(mode="after")
    def _same_network(self) -> Shift:
        (nf, af), (nt, at) = _parse_axis_ref(self.from_), _parse_axis_ref(self.to)
        if nf != nt:
            raise ValueError(f"'from' ({self.from_}) and 'to' ({self.to}) must be on the same network (ici or dcn)")
        if af == at:
            raise ValueError(f"'from' and 'to' are the same axis ({af})")
        return self


class Swap(BaseModel):
    """Exchange an axis's DCN factor with an equal ICI factor of another axis (moves a heavy axis onto ICI)."""

    model_config = ConfigDict(extra="forbid")
    onto_ici: str = Field(description="axis whose whole DCN size moves onto ICI")
    onto_dcn: str = Field(description="axis that gives up the same factor on ICI and takes it on DCN")

    @field_validator("onto_ici", "onto_dcn")
    @classmethod
    def _axis(cls, v: str) -> str:
        if v not in AXES:
            raise ValueError(f"{v!r} is not an axis; expected one of {', '.join(AXES)}")
        return v


class Move(BaseModel):
    """Exactly one of: a shift, a list of shifts applied in order, or a swap between ICI and DCN."""

    model_config = ConfigDict(extra="forbid")
    shift: Shift | None = None
    shifts: list[Shift] | None = None
    swap: Swap | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Move:
        given = [k for k in ("shift", "shifts", "swap") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"a move needs exactly one of shift, shifts, swap; got {given or 'none'}")
        return self

    def apply(self, mesh: Mesh) -> Mesh | None:
        """The moved mesh, or None when the move does not apply (an axis too small or not dividing)."""
        ici, dcn = dict(mesh.ici), dict(mesh.dcn)
        nets = {"ici": ici, "dcn": dcn}
        steps = [self.shift] if self.shift else (self.shifts or [])
        for step in steps:
            (net, src), (_, dst) = _parse_axis_ref(step.from_), _parse_axis_ref(step.to)
            sizes = nets[net]
            have = sizes.get(src, 1)  # type: ignore[call-overload]
            factor = have if step.factor == "all" else step.factor
            if factor < 2 or have % factor:
                return None
            sizes[src] = have // factor  # type: ignore[index]
            sizes[dst] = sizes.get(dst, 1) * factor  # type: ignore[index, call-overload]
        if self.swap:
            f = dcn.get(self.swap.onto_ici, 1)  # type: ignore[call-overload]
            give = ici.get(self.swap.onto_dcn, 1)  # type: ignore[call-overload]
            if f < 2 or give % f:
                return None
            dcn[self.swap.onto_ici] = 1  # type: ignore[index]
            dcn[self.swap.onto_dcn] = dcn.get(self.swap.onto_dcn, 1) * f  # type: ignore[index, call-overload]
            ici[self.swap.onto_dcn] = give // f  # type: ignore[index]
            ici[self.swap.onto_ici] = ici.get(self.swap.onto_ici, 1) * f  # type: ignore[index, call-overload]
        return Mesh(ici={a: v for a, v in ici.items() if v != 1}, dcn={a: v for a, v in dcn.items() if v != 1})


class SettingsMove(BaseModel):
    """Change one training setting: a batch split up/down, or the remat policy lighter/heavier.

    ``micro_batch`` (Megatron ``micro_batch_size``) keeps the global batch: fewer accumulation steps,
    same optimization. ``per_device_batch`` (MaxText) and ``grad_accum`` raise the global batch: the
    proposal says so as a trade-off. ``remat`` walks the framework's policy ladder (MaxText
    full ... minimal ... none; Megatron full, selective, none); every step that fits memory is a candidate.
    ``zero_stage`` moves a DeepSpeed run's ZeRO stage one step up or down (:mod:`bot.proposals.zero`).
    ``tp_overlap`` (direction ``enable``) turns on the framework's tensor-parallel communication overlap (Megatron
    ``--tp-comm-overlap`` with the sequence parallelism it requires; torchtitan async TP with the torch.compile it
    requires) on meshes with tensor parallelism. ``ep_overlap`` (``enable``) turns on Megatron-Core's expert-parallel
    all-to-all overlap (``overlap_moe_expert_parallel_comm``) on meshes with expert parallelism. ``whole_experts``
    (``enable``) sets Megatron's ``expert_tensor_parallel_size`` to 1 on meshes with tensor parallelism. ``hsdp``
    (``enable``) keeps a fully sharded run's per-micro-batch collectives inside the node: one distributed-optimizer
    instance per node for Megatron-FSDP (optim_grads_params), ZeRO++ hpZ for DeepSpeed ZeRO-3 (:mod:`bot.proposals.hsdp`).
    ``dp_overlap`` (``enable``) turns on Megatron's ``--overlap-grad-reduce`` (and ``--overlap-param-gather`` with the
    distributed optimizer) where the config leaves them off.
    """

    model_config = ConfigDict(extra="forbid")
    change: Literal["micro_batch", "per_device_batch", "grad_accum", "remat", "zero_stage", "tp_overlap", "ep_overlap",
                    "whole_experts", "hsdp", "dp_overlap"]
    direction: Literal["up", "down", "lighter", "heavier", "enable"]
    max_factor: int = Field(default=8, ge=2, le=64, description="largest factor tried for up/down")

    @model_validator(mode="after")
    def _direction_fits(self) -> SettingsMove:
        if (self.change == "remat") != (self.direction in ("lighter", "heavier")) or (
            (self.change in ("tp_overlap", "ep_overlap", "whole_experts", "hsdp", "dp_overlap"))
            != (self.direction == "enable")
        ):
            raise ValueError(
                "remat takes direction lighter or heavier; tp_overlap, ep_overlap, whole_experts, hsdp and dp_overlap "
                "take enable; "
                "micro_batch, per_device_batch, grad_accum and zero_stage take up or down"
            )
        return self


class When(BaseModel):
    """When a rule applies. Every given condition must hold."""

    model_config = ConfigDict(extra="forbid")
    bottleneck: list[Bottleneck] = Field(min_length=1, description="diagnosed bottlenecks the rule answers")
    mesh: list[str] = Field(
        default_factory=list, description="conditions like 'tensor > 1', 'dcn.fsdp > 1', 'ici.sequence >= 2'"
    )
    chip_family: list[Literal["tpu", "gpu", "cpu"]] | None = Field(default=None, description="omit = any chip")
    multi_slice: bool | None = Field(default=None, description="true: only runs over several slices/nodes")
    moe: bool | None = Field(default=None, description="true: only mixture-of-experts models")
    recomputes: bool | None = Field(
        default=None, description="true: only runs whose remat policy recomputes activations (a lighter policy "
        "exists); a run whose policy is not stated still matches, and the answer says it depends on the policy")
    fp8_recipe: list[Literal["tensorwise", "delayed", "mxfp8", "blockwise", "rowwise"]] | None = Field(
        default=None, description="only fp8 runs whose stated scaling recipe is one of these "
        "(knowledge.cost_fp8_recipe); a run that is not fp8, or does not state its recipe, never matches")
    memory: Literal["tight", "room"] | None = Field(
        default=None, description="tight: only runs whose predicted memory per chip is at least "
        "MEMORY_TIGHT_SHARE of HBM; room: only runs below it; a run whose memory is not predicted never matches")

    @field_validator("mesh")
    @classmethod
    def _conditions(cls, v: list[str]) -> list[str]:
        for cond in v:
            m = _CONDITION.match(cond)
            if not m or m.group(2) not in AXES:
                raise ValueError(
                    f"mesh condition {cond!r} not understood; expected '[ici.|dcn.|total.]<axis> <op> <int>' "
                    f"with axis one of {', '.join(AXES)} and op one of > >= < <= == !="
                )
        return v


class Rule(BaseModel):
    """One playbook rule."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="stable id, kebab-case")
    when: When
    move: Move | None = Field(default=None, description="the mesh change; omit for advice")
    settings: SettingsMove | None = Field(default=None, description="a training-settings change (no mesh change)")
    advice: str | None = Field(default=None, description="a recommendation that is not a mesh change")
    rationale: str = Field(min_length=1, description="why this helps for the matched diagnosis")
    tradeoffs: str = Field(min_length=1, description="what it costs")
    source: str = Field(min_length=1, description="where the practice is documented")
    priority: int = Field(default=100, description="lower is tried/shown first when predictions tie or are absent")
    citation: str | None = Field(
        default=None,
        description="playbook file#heading-anchor that explains the rule; set by the reader, never written in a block",
    )

    @model_validator(mode="after")
    def _move_or_advice(self) -> Rule:
        given = [k for k in ("move", "settings", "advice") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a rule needs exactly one of 'move', 'settings' or 'advice'; got {given or 'none'}")
        return self


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1]
    rules: list[Rule]

    @model_validator(mode="after")
    def _unique_ids(self) -> Playbook:
        seen: set[str] = set()
        for r in self.rules:
            if r.id in seen:
                raise ValueError(f"duplicate rule id {r.id!r}")
            seen.add(r.id)
        return self


@dataclass(frozen=True)
class MoveCandidate:
    """A mesh produced by a playbook rule."""

    rule: Rule
    mesh: Mesh


def memory_state(used_bytes: float | None, capacity_bytes: float) -> str | None:
    """``tight`` or ``room`` for ``when.memory`` (:data:`MEMORY_TIGHT_SHARE`); None when memory is not predicted."""
    if used_bytes is None or capacity_bytes <= 0:
        return None
    return "tight" if used_bytes >= MEMORY_TIGHT_SHARE * capacity_bytes else "room"


def _cond_holds(cond: str, mesh: Mesh) -> bool:
    m = _CONDITION.match(cond)
    assert m is not None  # validated at load time
    scope, axis, op, value = m.group(1) or "total", m.group(2), m.group(3), int(m.group(4))
    size = {"ici": mesh.ici.get(axis, 1), "dcn": mesh.dcn.get(axis, 1), "total": mesh.size(axis)}[scope]  # type: ignore[call-overload, arg-type]
    return {
        ">": size > value,
        ">=": size >= value,
        "<": size < value,
        "<=": size <= value,
        "==": size == value,
        "!=": size != value,
    }[op]


def rule_matches(
    rule: Rule, *, bottleneck: str | None, mesh: Mesh, chip_family: str, num_slices: int, moe: bool,
    recomputes: bool | None = None, memory: str | None = None, fp8_recipe: str | None = None,
) -> bool:
    """Whether ``rule.when`` holds for this diagnosis, chip and mesh (``recomputes``: the run's remat policy
    recomputes activations, None = not stated; ``memory``: tight | room, None = not predicted; ``fp8_recipe``: an
    fp8 run's stated scaling recipe, None = not fp8 or not stated)."""
    w = rule.when
    if w.fp8_recipe is not None and fp8_recipe not in w.fp8_recipe:
        return False
    if w.recomputes is not None and recomputes is not None and w.recomputes != recomputes:
        return False
    if w.memory is not None and w.memory != memory:
        return False
    if bottleneck is None or bottleneck not in w.bottleneck:
        return False
    if w.chip_family is not None and chip_family not in w.chip_family:
        return False
    if w.multi_slice is not None and w.multi_slice != (num_slices > 1):
        return False
    if w.moe is not None and w.moe != moe:
        return False
    return all(_cond_holds(c, mesh) for c in w.mesh)


def load_playbook(directory: Path | None = None) -> Playbook:
    """Read and validate the moves of a playbooks folder (default: the bundled ``playbooks/``).

    Errors name the playbook file and line of the move block, the rule id and the field. Cached per folder
    until a playbook file changes (mtime or size).
    """
    directory = Path(directory) if directory is not None else PLAYBOOKS_PATH
    if not directory.is_dir():
        raise AsapError("playbooks folder not found", source=str(directory),
                        hint="ASAP_PLAYBOOKS_DIR must name a folder of playbook *.md files "
                             "(the moves live in their asap-move blocks)")
    stamp = tuple(
        (p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.glob("*.md")) if p.is_file()
    )
    return _load_cached(str(directory), stamp)


@lru_cache(maxsize=8)
def _load_cached(directory: str, _stamp: tuple[tuple[str, int, int], ...]) -> Playbook:
    from knowledge.playbooks import load_moves_from_playbooks

    raw = load_moves_from_playbooks(Path(directory))
    rules: list[Rule] = []
    seen: set[str] = set()
    for block in raw:
        cit = block["citation"]
        fields = {k: v for k, v in block.items() if k != "citation"}
        where = f"{cit.file} line {cit.line}"
        try:
            rule = Rule.model_validate({**fields, "citation": cit.ref})
        except ValidationError as exc:
            err = exc.errors()[0]
            rest = ".".join(str(p) for p in err["loc"]) or "(rule)"
            got = f" (got {brief(err['input'])})" if "input" in err and not isinstance(err["input"], dict | list) else ""
            raise AsapError(f"{err['msg']}{got}", source=where, field=f"rule {block['id']}: {rest}") from None
        if rule.id in seen:  # the reader refuses duplicates already; kept for playbooks built in code
            raise AsapError(f"duplicate rule id {rule.id!r}", source=where, field="id")
        seen.add(rule.id)
        rules.append(rule)
    return Playbook(schema_version=1, rules=rules)


def matching_rules(
    playbook: Playbook, *, bottleneck: str | None, mesh: Mesh, chip_family: str, num_slices: int, moe: bool,
    recomputes: bool | None = None, memory: str | None = None, fp8_recipe: str | None = None,
) -> list[Rule]:
    """Rules whose conditions hold, by priority then file order."""
    hits = [
        r
        for r in playbook.rules
        if rule_matches(r, bottleneck=bottleneck, mesh=mesh, chip_family=chip_family, num_slices=num_slices, moe=moe,
                        recomputes=recomputes, memory=memory, fp8_recipe=fp8_recipe)
    ]
    return sorted(hits, key=lambda r: r.priority)


def move_candidates(rules: list[Rule], mesh: Mesh) -> list[MoveCandidate]:
    """The meshes the matching mesh-changing rules produce from ``mesh`` (rules that do not apply are skipped)."""
    out = []
    for r in rules:
        if r.move is None:
            continue
        moved = r.move.apply(mesh)
        if moved is not None:
            out.append(MoveCandidate(rule=r, mesh=moved))
    return out
