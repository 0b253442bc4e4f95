"""Merge the partial profiles read from several files of one run into one :class:`Profile`.

Which file is trusted for what: op rows come from ``hlo_stats`` (per-op FLOPs and bytes), else
``roofline_model``, else ``op_profile``, else trace events; the other op sources fill in what the chosen
one lacks (bound-by and roofline efficiency from the roofline table, FLOPs/bytes from op_profile), matched
by op name. Step time and shares come from the overview page, else the trace's step markers. Compiled
HLO gives ``collectives`` and, by instruction name, the payload bytes and group size of collective ops.
"""

from __future__ import annotations

from bot.profiles.model import CollectiveOp, OpKind, Profile

OP_PRIORITY = ("hlo_stats", "xplane", "roofline_model", "op_profile", "trace")
STEP_PRIORITY = ("overview_page", "xplane", "trace", "roofline_model")


def _first(parts: list[tuple[str, Profile]], order: tuple[str, ...], has) -> Profile | None:  # type: ignore[no-untyped-def]
    for kind in order:
        for k, p in parts:
            if k == kind and has(p):
                return p
    return None


def merge_profiles(parts: list[tuple[str, Profile]], collectives: list[CollectiveOp] | None = None) -> Profile:
    """Combine ``(kind, partial profile)`` pairs; ``kind`` is a tool name, ``xplane`` or ``trace``."""
    out = Profile()
    for _, p in parts:
        out.sources.extend(s for s in p.sources if s not in out.sources)
        out.warnings.extend(p.warnings)

    steps = _first(parts, STEP_PRIORITY, lambda p: p.step_time_us is not None)
    if steps is not None:
        out.num_steps = steps.num_steps
        out.step_time_us = steps.step_time_us
        out.step_times_us = list(steps.step_times_us)
    else:
        counted = _first(parts, STEP_PRIORITY, lambda p: p.num_steps is not None)
        out.num_steps = counted.num_steps if counted else None
    for attr in (
        "device_duty_cycle_percent",
        "host_wait_percent",
        "compute_time_percent",
        "communication_time_percent",
        "peak_hbm_bytes",
        "hbm_capacity_bytes",
        "num_devices",
    ):
        src = _first(parts, STEP_PRIORITY + OP_PRIORITY, lambda p, a=attr: getattr(p, a) is not None)
        if src is not None:
            setattr(out, attr, getattr(src, attr))
    kinds = [p.device_kind for _, p in parts if p.device_kind]
    specific = [k for k in kinds if k.upper() not in ("CPU_ONLY", "CPU", "")]
    out.device_kind = specific[0] if specific else ("cpu" if kinds else None)

    primary = _first(parts, OP_PRIORITY, lambda p: bool(p.ops))
    if primary is not None:
        ops = list(primary.ops)
        if primary.num_steps and out.num_steps and primary.num_steps != out.num_steps:
            scale = out.num_steps / primary.num_steps  # e.g. roofline "Average" rows cover one step
            for op in ops:
                op.total_time_us *= scale
                op.occurrences = round(op.occurrences * scale)
                op.flops = op.flops * scale if op.flops is not None else None
                op.bytes_accessed = op.bytes_accessed * scale if op.bytes_accessed is not None else None
        by_name = {op.name: op for op in ops}
        for kind, p in parts:
            if p is primary or kind not in ("roofline_model", "op_profile", "hlo_stats", "xplane"):
                continue
            for other in p.ops:
                op = by_name.get(other.name)
                if op is None:
                    continue
                if op.bound_by is None:
                    op.bound_by = other.bound_by
                if op.roofline_efficiency is None:
                    op.roofline_efficiency = other.roofline_efficiency
                if op.flops is None and other.flops is not None and other.total_time_us and op.total_time_us:
                    op.flops = other.flops * op.total_time_us / other.total_time_us
                if (
                    op.bytes_accessed is None
                    and other.bytes_accessed is not None
                    and other.total_time_us
                    and op.total_time_us
                ):
                    op.bytes_accessed = other.bytes_accessed * op.total_time_us / other.total_time_us
        out.ops = ops
        out.op_time_fraction = primary.op_time_fraction
        extra = [k for k, p in parts if k == "trace" and p.ops and p is not primary]
        if primary in [p for k, p in parts if k == "trace"] and extra:
            out.warnings.append(f"{len(extra)} more trace file(s) found; op times come from {primary.sources[0]}")

    if collectives:
        out.collectives = list(collectives)
        hlo = {c.name: c for c in collectives}
        for op in out.ops:
            c = hlo.get(op.name) or hlo.get(op.name.removesuffix("-done").removesuffix("-start"))
            if c is not None and op.kind is OpKind.COLLECTIVE:
                if op.collective_bytes is None:
                    op.collective_bytes = float(c.result_bytes)
                if op.group_size is None:
                    op.group_size = c.group_size
                if op.group_stride is None:
                    op.group_stride = c.group_stride
    return out
