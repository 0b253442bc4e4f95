"""Roofline position of every op: which ceiling (compute, HBM, ICI, DCN, host) bounds it.

Order of trust, per op:

1. ``profile`` — the profiler's own roofline verdict (XProf ``roofline_model``/``hlo_stats``
   ``bound_by``), with its ``roofline_efficiency``. It saw the hardware counters; we did not. This holds
   for collectives too: an all-reduce XProf marks HBM-bound is on-chip reduction time and counts as HBM,
   not interconnect (the diagnosis states the conflict with its kind).
2. ``kind`` for collectives and host ops — a collective is bounded by the network it crosses (ICI/NVLink
   inside a slice or node, DCN/InfiniBand across them), a host transfer by the host; memory-formatting
   ops (copies, transposes) with no byte count are HBM-bound by nature.
3. ``computed`` — from the op's FLOPs and HBM bytes against the chip's peaks: arithmetic intensity
   ``I = FLOPs / bytes`` versus the ridge point ``peak FLOP/s / HBM B/s``; attainable rate
   ``min(peak, I x HBM B/s)``; roofline efficiency = achieved FLOP rate / attainable rate.

Anything else (a fusion with no FLOPs or byte count) is ``unknown`` and is reported as such.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.analysis.report import TopOp
from bot.configs.mesh import Axis, Mesh
from bot.profiles.model import BoundBy, OpKind, OpStat, Profile
from knowledge.hardware import Chip, fast_domain_chips

# Innermost (neighbouring devices) to outermost: the layout MaxText and Megatron both use in practice —
# tensor parallelism inside a node / nearest neighbours, data and pipeline stages outermost.
AXIS_ORDER_INNER_FIRST: tuple[Axis, ...] = ("tensor", "expert", "sequence", "fsdp", "data", "pipeline")

# Which parallelism axes issue each collective type (MaxText / Megatron / GSPMD practice): gradient
# all-reduce by data parallelism, weight all-gather and gradient reduce-scatter by FSDP, activation
# all-reduce / all-gather / reduce-scatter by tensor parallelism, token all-to-all by expert (and
# Ulysses-style sequence) parallelism, permutes by pipeline stages and ring attention.
COLLECTIVE_USERS: dict[str, tuple[str, ...]] = {
    "all-reduce": ("data", "tensor"),
    "all-gather": ("fsdp", "tensor", "sequence"),
    "reduce-scatter": ("fsdp", "tensor"),
    "all-to-all": ("expert", "sequence"),
    "collective-permute": ("pipeline", "sequence"),
    "send": ("pipeline",),
    "recv": ("pipeline",),
}


def collective_type(category: str, name: str) -> str | None:
    """The collective type an op's category or name states (``all-reduce-start.3`` -> ``all-reduce``)."""
    for text in (category.lower(), name.lower()):
        for op_type in COLLECTIVE_USERS:
            if op_type in text:
                return op_type
        if "allreduce" in text or "all_reduce" in text:
            return "all-reduce"
        if "allgather" in text or "all_gather" in text:
            return "all-gather"
        if "reducescatter" in text or "reduce_scatter" in text:
            return "reduce-scatter"
        if "alltoall" in text or "all_to_all" in text:
            return "all-to-all"
    return None


_RESOURCE_OF_BOUND = {
    "compute": "compute",
    "hbm": "hbm",
    "ici": "communication",
    "dcn": "communication",
    "host": "host",
}


@dataclass(frozen=True)
class NetworkContext:
    """What decides whether a collective's replica group crosses the slow network.

    ``fast_domain`` is the number of chips one fast network reaches: the slice for TPUs (ICI), the NVLink
    domain for GPUs, whichever is smaller of the run's chips per slice and the chip's largest domain.
    """

    num_chips: int
    num_slices: int
    fast_domain: int
    mesh: Mesh | None = None
    _cache: dict[int | None, tuple[str | None, bool]] = field(default_factory=dict, compare=False, repr=False)
    _type_cache: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def for_run(cls, chip: Chip, num_chips: int, num_slices: int, mesh: Mesh | None) -> NetworkContext:
        per_slice = max(1, num_chips // max(1, num_slices))
        return cls(
            num_chips=num_chips,
            num_slices=num_slices,
            fast_domain=fast_domain_chips(chip, per_slice),
            mesh=mesh,
        )

    def _axis_spans(self) -> list[tuple[int, bool]]:
        """(size, crosses the slow network) for every mesh axis part (ICI or DCN) with size > 1."""
        return [(size, crosses) for _, size, crosses in self._axis_parts()]

    def _axis_parts(self) -> list[tuple[str, int, bool]]:
        """(axis, size, crosses the slow network) for the ICI and DCN part of every mesh axis."""
        if self.mesh is None:
            return []
        parts: list[tuple[str, int, bool]] = []
        stride = 1
        for axis in AXIS_ORDER_INNER_FIRST:
            size = self.mesh.ici.get(axis, 1)
            if size > 1:
                # Members of an ICI axis group are `stride` devices apart; the group stays inside one fast
                # domain when its whole extent fits in it.
                parts.append((axis, size, stride * size > self.fast_domain))
                stride *= size
        for axis in AXIS_ORDER_INNER_FIRST:
            size = self.mesh.dcn.get(axis, 1)
            if size > 1:
                parts.append((axis, size, True))
        return parts

    def network_for_collective(self, category: str, name: str) -> str | None:
        """ICI or DCN for a collective whose replica group is unknown, from which mesh axes use its type.

        Each collective type is issued by particular parallelism axes (gradient all-reduce by data, weight
        all-gather / gradient reduce-scatter by FSDP, activation collectives by tensor, all-to-all by expert,
        permutes by pipeline and ring attention). When every axis of the mesh that issues this type crosses
        the slow network, the op does; when none does, it stays on ICI; otherwise it cannot be told (None).
        """
        op_type = collective_type(category, name)
        if op_type is None or self.mesh is None:
            return None
        if op_type in self._type_cache:
            return self._type_cache[op_type]
        users = COLLECTIVE_USERS.get(op_type, ())
        crossing: dict[str, bool] = {}
        for axis, _, crosses in self._axis_parts():
            if axis in users:
                crossing[axis] = crossing.get(axis, False) or crosses
        verdict: str | None = None
        if crossing and all(crossing.values()):
            verdict = "dcn"
        elif crossing and not any(crossing.values()):
            verdict = "ici"
        self._type_cache[op_type] = verdict
        return verdict

    def network_for_group(self, group_size: int | None) -> tuple[str | None, bool]:
        """``("ici" | "dcn" | None, ambiguous)`` for a replica group of ``group_size`` devices.

        ``None`` when the group size is unknown on a run whose chips span several fast domains;
        ``ambiguous`` when the group could be either (the mesh has ICI and DCN axes of that size).
        """
        hit = self._cache.get(group_size)
        if hit is None:
            hit = self._cache[group_size] = self._network_for_group(group_size)
        return hit

    def _network_for_group(self, group_size: int | None) -> tuple[str | None, bool]:
        if self.num_chips <= self.fast_domain:
            return "ici", False  # every chip shares one fast network
        if group_size is None or group_size < 1:
            return None, False
        if group_size > self.fast_domain:
            return "dcn", False
        spans = self._axis_spans()
        if spans:
            verdicts: set[bool] = set()
            for r in range(1, len(spans) + 1):
                for combo in itertools.combinations(spans, r):
                    if math.prod(s for s, _ in combo) == group_size:
                        verdicts.add(any(crosses for _, crosses in combo))
            if len(verdicts) == 1:
                return ("dcn" if verdicts.pop() else "ici"), False
            if len(verdicts) > 1:
                return "ici", True
        # Fits inside one fast domain and the mesh cannot place it: the usual layout keeps it there.
        return "ici", self.num_slices > 1


@dataclass(slots=True)
class OpRoofline:
    """The roofline verdict for one op."""

    bound_by: str
    source: str  # profile | computed | kind
    intensity: float | None
    efficiency: float | None
    inferred: bool = False  # network inferred from the collective type and the mesh (no replica group)
    overrode_profile: bool = False  # the profile's HBM/compute label was contradicted by the op's own rates


@dataclass
class Attribution:
    """Profiled device time (whole window, microseconds) split by what bounds it."""

    compute_us: float = 0.0
    hbm_us: float = 0.0
    ici_us: float = 0.0
    dcn_us: float = 0.0
    host_us: float = 0.0
    idle_us: float = 0.0
    unclassified_compute_us: float = 0.0  # compute/other ops with no roofline data at all
    hbm_kind_us: float = 0.0  # part of hbm_us placed by kind (copies/transposes with no byte counts)
    inferred_net_us: float = 0.0  # collectives whose ICI/DCN was inferred from their type and the mesh
    collective_unknown_net_us: float = 0.0  # collectives whose network could not be told
    collective_local_us: float = 0.0  # collectives the profile marks HBM-/compute-bound (counted there, not as comm)
    collective_local: list[str] = field(default_factory=list)  # their names, largest first (up to 5)
    collective_relabelled_us: float = 0.0  # collectives labelled HBM/compute whose own rates say they wait on the network
    collective_relabelled: list[str] = field(default_factory=list)
    total_us: float = 0.0
    profile_bound_us: float = 0.0  # time whose verdict came from the profiler
    computed_bound_us: float = 0.0  # time whose verdict was computed from the chip's peaks
    compute_eff_weighted: float = 0.0  # sum(time x efficiency) over compute-bound ops with an efficiency
    compute_eff_time_us: float = 0.0
    total_flops: float = 0.0
    ops_with_flops_us: float = 0.0
    efficiency_clamped: list[str] = field(default_factory=list)
    ambiguous_network: list[str] = field(default_factory=list)

    @property
    def collective_us(self) -> float:
        return self.ici_us + self.dcn_us + self.collective_unknown_net_us

    @property
    def busy_us(self) -> float:
        """Time the device spent executing ops (not idle, not waiting on the host)."""
        return self.total_us - self.idle_us - self.host_us

    @property
    def compute_efficiency(self) -> float | None:
        """Time-weighted roofline efficiency of the compute-bound ops, when known."""
        if self.compute_eff_time_us <= 0:
            return None
        return self.compute_eff_weighted / self.compute_eff_time_us


def _clamp01(value: float) -> float:
    return 0.0 if value < 0 else 1.0 if value > 1 else value


class _Chip:
    """The three chip figures the per-op loop reads, as plain attributes (pydantic access is slower)."""

    __slots__ = ("hbm_bandwidth", "peak_bf16_flops", "hbm_ridge")

    def __init__(self, chip: Chip) -> None:
        self.hbm_bandwidth = chip.hbm_bandwidth
        self.peak_bf16_flops = chip.peak_bf16_flops
        self.hbm_ridge = chip.ridge_point


_BOUND_STR = {b: b.value for b in BoundBy}
_NETWORK_BOUNDS = (BoundBy.ICI, BoundBy.DCN)
_LOCAL_BOUNDS = (BoundBy.HBM, BoundBy.COMPUTE)
# A collective the profile labels HBM-/compute-bound is taken as on-chip work only when it used at least this
# share of that ceiling (its own bytes or FLOPs per second); XProf's label is arithmetic on the op's rates,
# so a collective waiting on the network at 3% of HBM bandwidth still reads "HBM".
LOCAL_MIN_UTILISATION = 0.2
_COLLECTIVE, _HOST, _IDLE, _MEMORY = OpKind.COLLECTIVE, OpKind.HOST, OpKind.IDLE, OpKind.MEMORY
_UNKNOWN = BoundBy.UNKNOWN


def classify(op: OpStat, chip: Chip, net: NetworkContext, group_size: int | None = None) -> OpRoofline:
    """The roofline verdict for one op (see the module docstring for the order of trust)."""
    return _classify(op, _Chip(chip), net, group_size)


def _classify(op: OpStat, chip: _Chip, net: NetworkContext, group_size: int | None) -> OpRoofline:
    flops = op.flops
    nbytes = op.bytes_accessed
    kind = op.kind
    intensity = flops / nbytes if flops is not None and nbytes is not None and nbytes > 0 else None
    reported = op.bound_by
    if kind is _COLLECTIVE:
        # The profiler's verdict is the evidence: XProf's roofline marks a collective HBM- or compute-bound
        # when its time goes to the on-chip reduction/copy (e.g. an all-reduce whose data never leaves the
        # chip, or whose reduction is limited by memory bandwidth), ICI/DCN when it waits on the network.
        # Only where the profile gives no verdict does the op's kind (collective -> network) decide.
        # XProf's roofline derives bound_by from the op's FLOP and byte rates, so a collective that waits on
        # the network while moving a few bytes through HBM is still labelled "HBM": when the op's own rates
        # show it used under LOCAL_MIN_UTILISATION of that ceiling, the label is overridden (and said so).
        overrode = False
        if reported in _NETWORK_BOUNDS:
            return OpRoofline(_BOUND_STR[reported], "profile", intensity, _eff(op.roofline_efficiency))
        if reported in _LOCAL_BOUNDS:
            util = _utilisation(op, chip, reported)
            if util is None or util >= LOCAL_MIN_UTILISATION:
                return OpRoofline(_BOUND_STR[reported], "profile", intensity, _eff(op.roofline_efficiency))
            overrode = True
        network, _ = net.network_for_group(op.group_size if op.group_size is not None else group_size)
        if overrode:
            return OpRoofline(network or "unknown", "kind", intensity, None, overrode_profile=True)
        if network is None:
            network = net.network_for_collective(op.category, op.name)
            if network is not None:
                return OpRoofline(network, "kind", intensity, None, True)
        return OpRoofline(network or "unknown", "kind", intensity, None)
    if kind is _HOST:
        return OpRoofline("host", "kind", intensity, None)
    if reported is not None and reported is not _UNKNOWN:
        return OpRoofline(_BOUND_STR[reported], "profile", intensity, _eff(op.roofline_efficiency))
    if kind is _IDLE:
        return OpRoofline("unknown", "kind", None, None)
    seconds = op.total_time_us * 1e-6
    if intensity is not None and flops >= 0:  # type: ignore[operator]
        if intensity < chip.hbm_ridge:
            eff = (nbytes / seconds) / chip.hbm_bandwidth if seconds > 0 else None  # type: ignore[operator]
            return OpRoofline("hbm", "computed", intensity, eff)
        eff = (flops / seconds) / chip.peak_bf16_flops if seconds > 0 else None  # type: ignore[operator]
        return OpRoofline("compute", "computed", intensity, eff)
    if flops is not None and flops > 0 and nbytes == 0:
        eff = (flops / seconds) / chip.peak_bf16_flops if seconds > 0 else None
        return OpRoofline("compute", "computed", None, eff)
    if kind is _MEMORY:
        return OpRoofline("hbm", "kind", intensity, None)
    return OpRoofline("unknown", "computed", intensity, None)


def _utilisation(op: OpStat, chip: _Chip, reported: BoundBy) -> float | None:
    """How much of the ceiling the profile names (HBM bandwidth or FLOP peak) the op used, 0..1, if known."""
    if op.roofline_efficiency is not None:
        return op.roofline_efficiency
    seconds = op.total_time_us * 1e-6
    if seconds <= 0:
        return None
    if reported is BoundBy.HBM:
        return op.bytes_accessed / seconds / chip.hbm_bandwidth if op.bytes_accessed else None
    return op.flops / seconds / chip.peak_bf16_flops if op.flops else None


def _eff(value: float | None) -> float | None:
    return None if value is None else _clamp01(value)


# Which Attribution bucket an op's time goes to, by its verdict (collectives, host and idle ops by kind).
_BUCKET_OF_BOUND = {"compute": "compute", "hbm": "hbm", "ici": "ici", "dcn": "dcn", "host": "host"}


def attribute(profile: Profile, chip: Chip, net: NetworkContext) -> tuple[Attribution, list[OpRoofline]]:
    """Classify every op and add its time to the resource that bounds it.

    Returns the totals and the per-op verdicts (parallel to ``profile.ops``). This loop runs once per op
    row (100k in a large export), so it keeps to local variables and dict look-ups.
    """
    groups = {c.name: c.group_size for c in profile.collectives if c.group_size}
    att = Attribution()
    sums = dict.fromkeys(("compute", "hbm", "ici", "dcn", "host", "idle", "unclassified", "collective_unknown"), 0.0)
    total = profile_us = computed_us = flops_total = flops_us = eff_weighted = eff_time = hbm_kind = inferred_net = 0.0
    verdicts: list[OpRoofline] = []
    append = verdicts.append
    bucket_of = _BUCKET_OF_BOUND.get
    fast = _Chip(chip)
    first_of_group: dict[int | None, str] = {}  # one op name per replica-group size, for warnings
    local_us = relabelled_us = 0.0
    local: list[tuple[float, str]] = []
    relabelled: list[tuple[float, str]] = []
    for op in profile.ops:
        t = op.total_time_us
        if t < 0:
            t = 0.0
        kind = op.kind
        group = groups.get(op.name) if groups and kind is _COLLECTIVE and op.group_size is None else None
        v = _classify(op, fast, net, group)
        append(v)
        total += t
        if op.flops:
            flops_total += op.flops
            flops_us += t
        src = v.source
        eff = v.efficiency
        if src == "profile":
            profile_us += t
        elif src == "computed" and v.bound_by != "unknown":
            computed_us += t
            if eff is not None and eff > 1.0:
                att.efficiency_clamped.append(op.name)
                v.efficiency = eff = 1.0
        if kind is _IDLE:
            sums["idle"] += t
        elif kind is _COLLECTIVE and v.source == "profile" and (v.bound_by == "hbm" or v.bound_by == "compute"):
            # The profiler says this collective's time is on-chip work: it counts where the profile puts it.
            sums[v.bound_by] += t
            local_us += t
            local.append((t, op.name))
        elif kind is _COLLECTIVE:
            # Device time in a collective the profile does not mark on-chip is exposed communication.
            b = v.bound_by
            sums[b if b == "ici" or b == "dcn" else "collective_unknown"] += t
            if v.inferred:
                inferred_net += t
            if v.overrode_profile:
                relabelled_us += t
                relabelled.append((t, op.name))
            if src == "kind":
                first_of_group.setdefault(op.group_size if op.group_size is not None else group, op.name)
        elif kind is _HOST:
            sums["host"] += t
        else:
            bucket = bucket_of(v.bound_by, "unclassified")
            sums[bucket] += t
            if src == "kind" and bucket == "hbm":
                hbm_kind += t
            if bucket == "compute" and eff is not None:
                eff_weighted += t * eff
                eff_time += t
    att.ambiguous_network = [name for g, name in first_of_group.items() if net.network_for_group(g)[1]][:5]
    att.compute_us, att.hbm_us, att.hbm_kind_us = sums["compute"], sums["hbm"], hbm_kind
    att.inferred_net_us = inferred_net
    att.ici_us, att.dcn_us, att.collective_unknown_net_us = sums["ici"], sums["dcn"], sums["collective_unknown"]
    att.host_us, att.idle_us, att.unclassified_compute_us = sums["host"], sums["idle"], sums["unclassified"]
    att.total_us, att.profile_bound_us, att.computed_bound_us = total, profile_us, computed_us
    att.total_flops, att.ops_with_flops_us = flops_total, flops_us
    att.compute_eff_weighted, att.compute_eff_time_us = eff_weighted, eff_time
    att.collective_local_us = local_us
    att.collective_local = [name for _, name in heapq.nlargest(5, local)]
    att.collective_relabelled_us = relabelled_us
    att.collective_relabelled = [name for _, name in heapq.nlargest(5, relabelled)]
    return att, verdicts


def resource_of(bound_by: str, kind: OpKind) -> str | None:
    """The bottleneck resource (compute | hbm | communication | host) an op's time counts towards."""
    if kind is OpKind.COLLECTIVE:
        # A collective the profile marks HBM-/compute-bound counts there (see attribute()).
        return bound_by if bound_by in ("hbm", "compute") else "communication"
    if kind is OpKind.HOST:
        return "host"
    if kind is OpKind.IDLE:
        return None
    return _RESOURCE_OF_BOUND.get(bound_by)


def top_ops(
    ops: list[OpStat],
    verdicts: list[OpRoofline],
    *,
    n: int,
    num_steps: float,
    share_denominator_us: float,
) -> list[TopOp]:
    """The ``n`` ops with the most time, with their per-step figures and roofline position.

    ``num_steps`` converts window totals to per-step figures; ``share_denominator_us`` is the window the
    time shares are taken of (steps x step time, or the profiled device time when that is unknown).
    """
    if n <= 0 or not ops:
        return []
    idx: Iterable[int] = heapq.nlargest(n, range(len(ops)), key=lambda i: ops[i].total_time_us)
    out: list[TopOp] = []
    for i in idx:
        op, v = ops[i], verdicts[i]
        share = 100.0 * op.total_time_us / share_denominator_us if share_denominator_us > 0 else 0.0
        out.append(
            TopOp(
                name=op.name,
                category=op.category,
                kind=op.kind.value,
                time_percent=round(share, 2),
                time_per_step_ms=round(op.total_time_us / num_steps / 1000.0, 6) if num_steps > 0 else None,
                occurrences=op.occurrences,
                flops=op.flops / num_steps if op.flops is not None and num_steps > 0 else None,
                bytes_accessed=op.bytes_accessed / num_steps if op.bytes_accessed is not None and num_steps > 0 else None,
                arithmetic_intensity=round(v.intensity, 4) if v.intensity is not None else None,
                bound_by=v.bound_by,  # type: ignore[arg-type]
                bound_by_source=v.source,  # type: ignore[arg-type]
                roofline_efficiency=round(v.efficiency, 4) if v.efficiency is not None else None,
            )
        )
    return out
