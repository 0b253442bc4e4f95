"""Readers for XProf tool exports: ``hlo_stats``, ``roofline_model``, ``overview_page``, ``op_profile``.

Each reader takes the JSON an XProf tool serves (``xspace_to_tool_data(...)`` or the web UI's download)
and returns a partial :class:`Profile`; :mod:`bot.profiles.loader` merges them. Both the Google
DataTable form XProf serves and the plain JSON of the underlying proto are accepted. Units follow xprof
(see ``docs/profile-formats.md``): times in microseconds (op_profile: picoseconds), FLOP rates in
GFLOP/s, bandwidths in GiB/s, "percent" columns of hlo_stats/roofline and ``roofline_efficiency`` as
fractions 0..1.

A CPU profile leaves hlo_stats/roofline/op_profile rows empty (xprof only fills them for TPU/GPU); that
gives a Profile with no ops and a warning, not an error.
"""

from __future__ import annotations

import gc
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bot.errors import ProfileError, brief
from bot.profiles import xprof_proto as proto
from bot.profiles.classify import CONTAINER_CATEGORIES, bound_by, category_kind, op_kind
from bot.profiles.datatable import Table, fast_table, parse_envelope, read_table
from bot.profiles.io import loads_json, open_mapped, read_bytes
from bot.profiles.model import OpStat, Profile
from bot.profiles.reduce import OpReducer

GIB = float(1 << 30)
GIB_PER_US = GIB * 1e-6  # GiB/s x us -> bytes
TOOLS = ("hlo_stats", "roofline_model", "overview_page", "op_profile")


# ----------------------------------------------------------------------------------------- helpers
def _proto_error(exc: ValidationError, source: str) -> ProfileError:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
    got = ""
    if "input" in err and isinstance(err["input"], (str, int, float, bool)) and err["type"] != "extra_forbidden":
        got = f" (got {brief(err['input'])})"
    msg = "unexpected key for this XProf tool's JSON" if err["type"] == "extra_forbidden" else err["msg"]
    return ProfileError(f"{msg}{got}", source=source, field=loc)


def _validate(model: type[BaseModel], obj: Any, source: str) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise _proto_error(exc, source) from None
    except RecursionError:
        raise ProfileError("JSON nested too deeply", source=source) from None


def _num(value: Any, source: str, field: str) -> float | None:
    """A finite number or None; anything else (text, bool, NaN) is an error naming the field."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ProfileError(f"expected a number, got {value[:40]!r}", source=source, field=field) from None
        else:
            raise ProfileError(f"expected a number, got {type(value).__name__}", source=source, field=field)
    if not math.isfinite(value):
        raise ProfileError(f"expected a finite number, got {value!r}", source=source, field=field)
    return float(value)


def _text(value: Any, source: str, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(int(value)) if float(value).is_integer() else str(value)
    raise ProfileError(f"expected text, got {type(value).__name__}", source=source, field=field)


def _prop_float(props: dict[str, Any], key: str) -> float | None:
    """A DataTable property such as ``"87.5%"`` or ``"0.8"`` as a float (None when absent or unparsable)."""
    value = props.get(key)
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    text = str(value).strip().rstrip("%").strip()
    try:
        out = float(text)
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def _op_name_from_expression(expression: str) -> str:
    """xprof's GetHloOpNameFromExpression: ``%fusion.3 = bf16[...] fusion(...)`` -> ``fusion.3``."""
    head = expression.split(" = ", 1)[0].strip()
    return head[1:] if head.startswith("%") else head


def _make_op(
    *,
    name: str,
    category: str,
    occurrences: float | None,
    total_us: float,
    self_us: float | None,
    flop_rate: float | None,
    mem_bw: float | None,
    hbm_bw: float | None,
    intensity: float | None,
    flops: float | None = None,
    bytes_accessed: float | None = None,
    bound: Any = None,
    efficiency: float | None = None,
    program: str | None = None,
) -> OpStat:
    """One OpStat from xprof's per-op figures (rates are over total time, per xprof's SetRooflineMetrics)."""
    container = category.lower() in CONTAINER_CATEGORIES
    time_us = self_us if (container and self_us is not None) else total_us
    if not container:
        if not flops and flop_rate and total_us:
            flops = flop_rate * 1e9 * total_us * 1e-6
        if not bytes_accessed and total_us:
            bw = hbm_bw if hbm_bw else mem_bw
            if bw:
                bytes_accessed = bw * GIB * total_us * 1e-6
        if not bytes_accessed and flops and intensity:
            bytes_accessed = flops / intensity
    else:
        flops = bytes_accessed = None
    if efficiency is not None:
        efficiency = None if efficiency < 0 else min(efficiency, 1.0)
    return OpStat(
        name=name,
        category=category,
        kind=op_kind(category, name),
        occurrences=int(occurrences or 0),
        total_time_us=max(time_us, 0.0),
        flops=flops or None,
        bytes_accessed=bytes_accessed or None,
        bound_by=bound_by(bound),
        roofline_efficiency=efficiency,
        program=program or None,
    )


def _no_ops_warning(profile: Profile, source: str, tool: str) -> None:
    if not profile.ops:
        profile.warnings.append(
            f"{source}: {tool} has no op rows (xprof fills them only for TPU/GPU profiles; "
            "a CPU profile leaves them empty)"
        )


def _single_table(obj: Any, source: str) -> Any:
    if isinstance(obj, list):
        if len(obj) != 1:
            raise ProfileError(f"expected one DataTable, got a list of {len(obj)}", source=source)
        return obj[0]
    return obj


def _is_datatable(obj: Any) -> bool:
    first = obj[0] if isinstance(obj, list) and obj else obj
    return isinstance(first, dict) and "cols" in first


# ----------------------------------------------------------------------------------------- hlo_stats
HLO_REQUIRED = ("hlo_op_name", "category", "occurrences", "total_time")
HLO_OPTIONAL = (
    "total_self_time",
    "program_id",
    "normalized_flop_rate",
    "measured_memory_bw",
    "hbm_bw",
    "operational_intensity",
    "bound_by",
    "parent_op_name",
    "total_self_time_percent",
)
HLO_KNOWN = (
    "rank",
    "hlo_op_expression",
    "tf_op_name",
    "avg_time",
    "avg_self_time",
    "cumulative_total_self_time_percent",
    "dma_stall_percent",
    "model_flop_rate",
    "cmem_read_bw",
    "cmem_write_bw",
    "hlo_rematerialization",
    "outside_compilation",
    "autotuned",
    "source_info",
    "core_type",
    "vdd_energy",
)
HLO_ALIASES = {"measured_flop_rate": "normalized_flop_rate"}


def _float_column(values: list[Any], source: str, column: str, *, required: bool = False) -> list[float | None]:
    """A column of numbers, checked. All int/float and a finite sum (so no NaN/inf) passes at C speed."""
    types = set(map(type, values))  # C-speed scan; a bool is not a number here
    if types <= {float, int}:
        try:
            if math.isfinite(math.fsum(values)):
                return list(map(float, values)) if int in types else values
        except OverflowError:
            pass
    out: list[float | None] = []
    for r, v in enumerate(values):
        x = _num(v, source, f"rows[{r}].{column}")
        if x is None and required:
            raise ProfileError("missing value", source=source, field=f"rows[{r}].{column}")
        out.append(x)
    return out


def _text_column(values: list[Any], source: str, column: str) -> list[str]:
    if set(map(type, values)) <= {str}:
        return values
    return [_text(v, source, f"rows[{r}].{column}") for r, v in enumerate(values)]


def _hlo_rows_to_ops(table: Table, source: str, profile: Profile) -> None:
    """Rows -> OpStats, column by column (a large export has 100k rows)."""
    d = table.data
    names = d["hlo_op_name"]
    if not all(type(n) is str and n for n in names):
        r = next(r for r, n in enumerate(names) if not (type(n) is str and n))
        raise ProfileError("expected a non-empty op name", source=source, field=f"rows[{r}].hlo_op_name")
    cats = _text_column(d["category"], source, "category")
    totals = _float_column(d["total_time"], source, "total_time", required=True)
    neg = next((r for r, t in enumerate(totals) if t < 0), None)
    if neg is not None:
        raise ProfileError(f"negative time {totals[neg]}", source=source, field=f"rows[{neg}].total_time")
    occs = [int(o or 0) for o in _float_column(d["occurrences"], source, "occurrences")]
    selfs = _float_column(d["total_self_time"], source, "total_self_time")
    rates = _float_column(d["normalized_flop_rate"], source, "normalized_flop_rate")
    mem = _float_column(d["measured_memory_bw"], source, "measured_memory_bw")
    hbm = _float_column(d["hbm_bw"], source, "hbm_bw")
    ois = _float_column(d["operational_intensity"], source, "operational_intensity")
    progs = (
        [p or None for p in _text_column(d["program_id"], source, "program_id")]
        if "program_id" in table.present
        else d["program_id"]
    )
    bounds = d["bound_by"]
    parents = d["parent_op_name"]

    containers = {c for c in set(cats) if c.lower() in CONTAINER_CATEGORIES}
    flops = [r * 1e3 * t if r and t else None for r, t in zip(rates, totals, strict=True)]  # GFLOP/s x us -> FLOPs
    nbytes = [
        (h or m) * GIB_PER_US * t if (h or m) and t else (f / oi if f and oi else None)
        for h, m, t, f, oi in zip(hbm, mem, totals, flops, ois, strict=True)
    ]
    if containers:  # their time includes other rows' ops: self time, and no FLOPs/bytes counted twice
        for r, c in enumerate(cats):
            if c in containers:
                totals[r] = selfs[r] if selfs[r] is not None else totals[r]
                flops[r] = nbytes[r] = None
    by_cat = {c: category_kind(c) for c in set(cats)}  # most categories decide the kind: one lookup per row
    kinds = [by_cat[c] or op_kind(c, n) for c, n in zip(cats, names, strict=True)]
    bound_cache = {b: bound_by(b) for b in set(bounds) if b is None or isinstance(b, str)}
    bad_bound = next((r for r, b in enumerate(bounds) if b not in bound_cache), None)
    if bad_bound is not None:
        raise ProfileError("expected text", source=source, field=f"rows[{bad_bound}].bound_by")
    none = [None] * table.nrows
    ops = list(
        map(
            OpStat,
            names,
            cats,
            kinds,
            occs,
            totals,
            flops,
            nbytes,
            [bound_cache[b] for b in bounds],
            none,
            none,
            none,
            progs,
        )
    )
    if "parent_op_name" in table.present and any(parents):
        kept = [op for op, parent in zip(ops, parents, strict=True) if not parent]
        profile.warnings.append(
            f"{source}: skipped {len(ops) - len(kept)} nested op row(s) (parent_op_name set) to avoid double counting"
        )
        ops = kept
    profile.ops.extend(ops)


def _window_to_ops(reducer: OpReducer, source: str, shares: list[float]) -> Callable[[Table, int], None]:
    """The fast path's per-window hook: rows -> OpStats -> the reducer (errors name the row in the whole file).

    ``shares`` accumulates [sum, valid values, rows] of ``total_self_time_percent`` for :func:`_set_visible_share`.
    """
    def take(table: Table, first_row: int) -> None:
        total, valid, rows = _fraction_stats(table.data.get("total_self_time_percent"))
        shares[0] += total
        shares[1] += valid
        shares[2] += rows
        part = Profile()
        try:
            _hlo_rows_to_ops(table, source, part)
        except ProfileError as exc:
            if exc.field:
                exc.field = re.sub(r"^rows\[(\d+)\]", lambda m: f"rows[{int(m.group(1)) + first_row}]", exc.field)
                exc.args = (exc.render(),)
            raise
        reducer.add(part.ops, part.warnings)
    return take


def parse_hlo_stats(data: bytes | Any, *, source: str) -> Profile:
    """hlo_stats export (DataTable or ``HloStatsDatabase`` JSON) -> Profile with one OpStat per HLO op.

    Op rows are converted window by window and kept by :class:`bot.profiles.reduce.OpReducer`: every op
    while there are at most ``MAX_OPS``, else the longest ``MAX_OPS`` one by one and the rest summed per
    category (said in a warning), so a 1 GiB export stays within bounded memory.
    """
    profile = Profile(sources=[source])
    reducer = OpReducer()
    shares = [0.0, 0, 0]
    enabled = gc.isenabled()
    gc.disable()  # millions of short-lived containers: generational GC passes would dominate the time
    try:
        table = fast_table(
            data,
            source=source,
            required=HLO_REQUIRED,
            optional=HLO_OPTIONAL,
            known=HLO_KNOWN,
            aliases=HLO_ALIASES,
            warnings=profile.warnings,
            window=_window_to_ops(reducer, source, shares),
        )
        if table is not None:
            reducer.finish(profile, source)
            _set_visible_share(shares[0], int(shares[1]), int(shares[2]), profile)
        else:
            reducer = OpReducer()  # not the compact form (perhaps after some windows): read it the general way
            obj = loads_json(data, source=source)
            if not _is_datatable(obj):
                return _hlo_stats_proto(obj, source, profile)
            table = read_table(
                _single_table(obj, source),
                source=source,
                required=HLO_REQUIRED,
                optional=HLO_OPTIONAL,
                known=HLO_KNOWN,
                aliases=HLO_ALIASES,
                warnings=profile.warnings,
            )
            _hlo_rows_to_ops(table, source, profile)
            _visible_share(table.data.get("total_self_time_percent"), profile)
    finally:
        if enabled:
            gc.enable()
    _no_ops_warning(profile, source, "hlo_stats")
    return profile


def _fraction_stats(fractions: list[Any] | None) -> tuple[float, int, int]:
    """(sum of the valid fractions, how many were valid, how many rows) of a ``total_self_time_percent`` column."""
    if not fractions:
        return 0.0, 0, 0
    values = [float(v) for v in fractions if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0]
    return math.fsum(values), len(values), len(fractions)


def _set_visible_share(total: float, valid: int, rows: int, profile: Profile) -> None:
    """Set ``op_time_fraction`` from summed fractions when most rows had one and the sum is a share (<= ~1)."""
    if not rows or not profile.ops or not valid or valid < rows // 2:
        return
    if 0.0 < total <= 1.05:
        profile.op_time_fraction = min(total, 1.0)


def _visible_share(fractions: list[Any] | None, profile: Profile) -> None:
    """``op_time_fraction``: the summed ``total_self_time_percent`` (a 0..1 fraction in xprof's hlo_stats,
    ``total_self_time_as_fraction`` in the proto) of the rows read, i.e. how much of the profile's op time
    the export holds. A full export sums to ~1; a top-N export to less, and the analysis must know."""
    _set_visible_share(*_fraction_stats(fractions), profile)


def _hlo_stats_proto(obj: Any, source: str, profile: Profile) -> Profile:
    if not isinstance(obj, dict):
        raise ProfileError(
            f"expected a DataTable or an HloStatsDatabase object, got {type(obj).__name__}", source=source
        )
    db = _validate(proto.HloStatsDatabase, obj, source)
    for rec in db.hlo_stats_record:
        if rec.parent_op_name:
            continue
        name = _op_name_from_expression(rec.hlo_expression) or rec.tf_op_name
        if not name:
            continue
        profile.ops.append(
            _make_op(
                name=name,
                category=rec.hlo_category,
                occurrences=rec.occurrences,
                total_us=rec.total_time_in_us,
                self_us=rec.total_self_time_in_us,
                flop_rate=rec.measured_flop_rate,
                mem_bw=rec.measured_memory_bw,
                hbm_bw=rec.hbm_bw,
                intensity=rec.operational_intensity,
                flops=rec.flops_v2 or rec.flops,
                bytes_accessed=rec.bytes_accessed,
                bound=rec.bound_by,
                program=str(rec.program_id),
            )
        )
    _visible_share([r.total_self_time_as_fraction for r in db.hlo_stats_record if not r.parent_op_name], profile)
    _no_ops_warning(profile, source, "hlo_stats")
    return profile


# ----------------------------------------------------------------------------------------- roofline_model
ROOF_REQUIRED = ("operation", "category", "occurrences", "total_time")
ROOF_OPTIONAL = (
    "step",
    "rank",
    "total_self_time",
    "measured_flop_rate",
    "measured_memory_bw",
    "hbm_bw",
    "operational_intensity",
    "bound_by",
    "roofline_efficiency",
    "hlo_module_id",
)
ROOF_KNOWN = (
    "avg_time",
    "avg_self_time",
    "total_self_time_percent",
    "cumulative_total_self_time_percent",
    "dma_stall_percent",
    "model_flop_rate",
    "cmem_read_bw",
    "cmem_write_bw",
    "vmem_read_bw",
    "vmem_write_bw",
    "hbm_operational_intensity",
    "cmem_read_operational_intensity",
    "cmem_write_operational_intensity",
    "vmem_read_operational_intensity",
    "vmem_write_operational_intensity",
    "bottleneck_operational_intensity",
    "total_time_per_core",
    "total_time_in_percentage",
    "optimal_flop_rate",
    "compute_efficiency",
    "max_mem_bw_utilization",
    "include_infeed_outfeed",
    "source_info",
)
_RECORD_TYPES = {
    "1": "Total",
    "ALL": "Total",
    "4": "Total (HW)",
    "ALL_HW": "Total (HW)",
    "2": "Average",
    "AVERAGE_STEP": "Average",
}


def _pick_step_rows(groups: dict[str, list[OpStat]], profile: Profile, source: str) -> None:
    """Whole-profile rows when present, else the sum over complete steps, else the average step."""
    for key in ("Total", "Total (HW)"):
        if groups.get(key):
            profile.ops = groups[key]
            return
    numbered = {k: v for k, v in groups.items() if re.fullmatch(r"\d+", k)}
    if numbered:
        merged: dict[tuple[str, str | None], OpStat] = {}
        for ops in numbered.values():
            for op in ops:
                key = (op.name, op.program)
                have = merged.get(key)
                if have is None:
                    merged[key] = op
                else:
                    have.total_time_us += op.total_time_us
                    have.occurrences += op.occurrences
                    have.flops = (have.flops or 0) + (op.flops or 0) or None
                    have.bytes_accessed = (have.bytes_accessed or 0) + (op.bytes_accessed or 0) or None
        profile.ops = list(merged.values())
        profile.num_steps = len(numbered)
        return
    if groups.get("Average"):
        profile.ops = groups["Average"]
        profile.num_steps = 1
        profile.warnings.append(f"{source}: roofline_model has only per-step averages; op totals cover one step")
        return
    if groups.get(""):
        profile.ops = groups[""]


def parse_roofline_model(data: bytes, *, source: str) -> Profile:
    """roofline_model export (list of DataTables, or ``RooflineModelDatabase`` JSON) -> Profile."""
    profile = Profile(sources=[source])
    obj = loads_json(data, source=source)
    if not _is_datatable(obj):
        return _roofline_proto(obj, source, profile)
    tables = obj if isinstance(obj, list) else [obj]
    roof = None
    for i, t in enumerate(tables):
        env = parse_envelope(t, source=source, where=f"[{i}]")
        ids = {c.id for c in env.cols}
        if ids == {"severity", "message"}:
            for row in env.rows:
                cells = row.get("c") if isinstance(row, dict) else None
                if isinstance(cells, list) and len(cells) == 2 and all(isinstance(c, dict) for c in cells):
                    sev, msg = cells[0].get("v"), cells[1].get("v")
                    if sev in ("WARNING", "ERROR") and isinstance(msg, str):
                        profile.warnings.append(f"{source}: xprof {sev.lower()}: {msg[:200]}")
            continue
        if roof is None:
            roof = (i, t)
    if roof is None:
        raise ProfileError("no roofline table (columns operation/category/total_time) in the list", source=source)
    i, t = roof
    table = read_table(
        t,
        source=source,
        where=f"[{i}].",
        required=ROOF_REQUIRED,
        optional=ROOF_OPTIONAL,
        known=ROOF_KNOWN,
        warnings=profile.warnings,
    )
    device = table.props.get("device_type")
    if isinstance(device, str) and device:
        profile.device_kind = device
    groups: dict[str, list[OpStat]] = {}
    for r, (name, cat, occ, total, step, rank, self_t, rate, mem_bw, hbm, oi, bound, eff, module) in enumerate(
        table.rows
    ):
        f = f"[{i}].rows[{r}]"
        category = _text(cat, source, f + ".category")
        if _num(rank, source, f + ".rank") == 0 or category == "Program":
            continue  # whole-program aggregate row, not an op
        name = _text(name, source, f + ".operation")
        if not name:
            raise ProfileError("expected a non-empty op name", source=source, field=f + ".operation")
        total_us = _num(total, source, f + ".total_time")
        if total_us is None or total_us < 0:
            raise ProfileError("expected a non-negative total time", source=source, field=f + ".total_time")
        op = _make_op(
            name=name,
            category=category,
            occurrences=_num(occ, source, f + ".occurrences"),
            total_us=total_us,
            self_us=_num(self_t, source, f + ".total_self_time"),
            flop_rate=_num(rate, source, f + ".measured_flop_rate"),
            mem_bw=_num(mem_bw, source, f + ".measured_memory_bw"),
            hbm_bw=_num(hbm, source, f + ".hbm_bw"),
            intensity=_num(oi, source, f + ".operational_intensity"),
            bound=bound,
            efficiency=_num(eff, source, f + ".roofline_efficiency"),
            program=_text(module, source, f + ".hlo_module_id"),
        )
        groups.setdefault(_text(step, source, f + ".step"), []).append(op)
    _pick_step_rows(groups, profile, source)
    _no_ops_warning(profile, source, "roofline_model")
    return profile


def _roofline_proto(obj: Any, source: str, profile: Profile) -> Profile:
    if not isinstance(obj, dict):
        raise ProfileError(
            f"expected a list of DataTables or a RooflineModelDatabase object, got {type(obj).__name__}", source=source
        )
    db = _validate(proto.RooflineModelDatabase, obj, source)
    if db.device_type:
        profile.device_kind = db.device_type
    groups: dict[str, list[OpStat]] = {}
    for rec in db.roofline_model_record:
        if rec.hlo_category == "Program" or not rec.hlo_name:
            continue
        rtype = str(rec.record_type)
        step = _RECORD_TYPES.get(rtype, str(rec.step_num) if rtype in ("3", "PER_STEP") else "")
        op = _make_op(
            name=rec.hlo_name,
            category=rec.hlo_category,
            occurrences=rec.occurrences,
            total_us=rec.total_time_in_us,
            self_us=rec.total_self_time_in_us,
            flop_rate=rec.measured_flop_rate,
            mem_bw=rec.measured_memory_bw,
            hbm_bw=rec.hbm_bw,
            intensity=rec.operational_intensity,
            flops=rec.flops_v2 or rec.flops,
            bytes_accessed=rec.bytes_accessed,
            bound=rec.bound_by,
            efficiency=rec.roofline_efficiency,
            program=str(rec.hlo_module_id),
        )
        groups.setdefault(step, []).append(op)
    _pick_step_rows(groups, profile, source)
    _no_ops_warning(profile, source, "roofline_model")
    return profile


# ----------------------------------------------------------------------------------------- overview_page
STEP_REQUIRED = ("stepnum",)
# Generic (GPU/CPU) step table columns, then the TPU form (no stepTimeMs: a step is the sum of its parts).
STEP_OPTIONAL = (
    "stepTimeMs",
    "infeedTimeMs",
    "deviceComputeTimeMs",
    "deviceCollectivesTimeMs",
    "deviceToDeviceTimeMs",
    "tcComputeTimeMs",
    "scv0ComputeTimeMs",
    "tcInfeedTimeMs",
    "scv0InfeedTimeMs",
    "tcOutfeedTimeMs",
    "tcIdleTimeMs",
)
STEP_KNOWN = (
    "hostComputeTimeMs",
    "kernelLaunchTimeMs",
    "outfeedTimeMs",
    "compileTimeMs",
    "otherTimeMs",
    "tooltip",
    "hostTransferTimeMs",
    "infeedPercentAverage",
    "infeedPercentMin",
    "infeedPercentMax",
    "stepname",
)
_TPU_STEP_PARTS = (
    "tcComputeTimeMs",
    "scv0ComputeTimeMs",
    "tcInfeedTimeMs",
    "scv0InfeedTimeMs",
    "tcOutfeedTimeMs",
    "tcIdleTimeMs",
)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def parse_overview_page(data: bytes, *, source: str) -> Profile:
    """overview_page export (list of DataTables, or ``OverviewPage`` JSON) -> step time, duty cycle, shares."""
    profile = Profile(sources=[source])
    obj = loads_json(data, source=source)
    if not _is_datatable(obj):
        return _overview_proto(obj, source, profile)
    tables = obj if isinstance(obj, list) else [obj]
    props: dict[str, Any] = {}
    step_table: tuple[int, Any] | None = None
    for i, t in enumerate(tables):
        env = parse_envelope(t, source=source, where=f"[{i}]")
        ids = [c.id for c in env.cols]
        if "stepnum" in ids:
            step_table = (i, t)
        for k, v in (env.p or {}).items():
            props.setdefault(k, v)
    hardware = str(props.get("hardware_type") or "")
    cpu_only = hardware.upper().startswith("CPU")
    device_type = props.get("device_type")
    profile.device_kind = str(device_type) if device_type else (hardware or None)
    cores = _prop_float(props, "device_core_count")
    profile.num_devices = int(cores) if cores and cores > 0 else None

    step_us: float | None = None
    infeed = compute = comm = None
    if step_table is not None:
        i, t = step_table
        table = read_table(
            t,
            source=source,
            where=f"[{i}].",
            required=STEP_REQUIRED,
            optional=STEP_OPTIONAL,
            known=STEP_KNOWN,
            warnings=profile.warnings,
        )
        present = table.present
        tpu = "stepTimeMs" not in present and "tcComputeTimeMs" in present
        if not tpu and "stepTimeMs" not in present:
            raise ProfileError(
                "missing required column 'stepTimeMs' (or the TPU step columns tcComputeTimeMs, tcIdleTimeMs, ...)",
                source=source,
                field=f"[{i}].cols",
            )
        d = table.data

        def col(cid: str, r: int) -> float:
            return _num(d[cid][r], source, f"[{i}].rows[{r}].{cid}") or 0.0

        times, inf, comp, coll = [], [], [], []
        for r in range(table.nrows):
            if tpu:
                value = sum(col(c, r) for c in _TPU_STEP_PARTS)
                inf.append(col("tcInfeedTimeMs", r) + col("scv0InfeedTimeMs", r))
                comp.append(col("tcComputeTimeMs", r) + col("scv0ComputeTimeMs", r))
            else:
                value = col("stepTimeMs", r)
                inf.append(col("infeedTimeMs", r))
                comp.append(col("deviceComputeTimeMs", r))
                coll.append(col("deviceCollectivesTimeMs", r) + col("deviceToDeviceTimeMs", r))
            if value < 0:
                raise ProfileError("expected a non-negative step time", source=source, field=f"[{i}].rows[{r}]")
            times.append(value * 1000.0)
        if times:
            profile.step_times_us = times
            profile.num_steps = len(times)
            step_us = _mean(times)
            avg = _prop_float(props, "steptime_ms_average")
            if tpu and avg:
                step_us = avg * 1000.0  # includes all-reduce time the TPU step columns leave out
            infeed, compute = _mean(inf), _mean(comp)
            comm = _mean(coll) if coll else None
            if not tpu:
                if "infeedTimeMs" not in present:
                    infeed = None
                if "deviceComputeTimeMs" not in present:
                    compute = None
                if not {"deviceCollectivesTimeMs", "deviceToDeviceTimeMs"} & present:
                    comm = None
    if step_us is None:
        avg = _prop_float(props, "steptime_ms_average")
        step_us = avg * 1000.0 if avg else None
        infeed_avg = _prop_float(props, "infeed_time_ms_avg")
        infeed = infeed_avg
        compute = _prop_float(props, "device_compute_time_ms_avg")
        c1, c2 = (
            _prop_float(props, "device_collectives_time_ms_avg"),
            _prop_float(props, "device_to_device_time_ms_avg"),
        )
        comm = (c1 or 0.0) + (c2 or 0.0) if (c1 is not None or c2 is not None) else None
    profile.step_time_us = step_us or None
    if cpu_only:
        profile.warnings.append(
            f"{source}: overview reports hardware {hardware!r}: no accelerator, so duty cycle and device "
            "time shares are not reported"
        )
        return profile
    profile.device_duty_cycle_percent = _prop_float(props, "device_duty_cycle_percent")
    if step_us:
        ms = step_us / 1000.0
        profile.host_wait_percent = 100.0 * infeed / ms if infeed is not None else None
        profile.compute_time_percent = 100.0 * compute / ms if compute is not None else None
        profile.communication_time_percent = 100.0 * comm / ms if comm is not None else None
    return profile


def _overview_proto(obj: Any, source: str, profile: Profile) -> Profile:
    if not isinstance(obj, dict):
        raise ProfileError(
            f"expected a list of DataTables or an OverviewPage object, got {type(obj).__name__}", source=source
        )
    page = _validate(proto.OverviewPage, obj, source)
    env, inp, ana = page.run_environment, page.input_analysis, page.analysis
    hardware = (inp.hardware_type if inp else "") or ""
    if env:
        profile.device_kind = env.device_type or hardware or None
        profile.num_devices = env.device_core_count or None
    if inp and inp.step_time_summary and inp.step_time_summary.average > 0:
        profile.step_time_us = inp.step_time_summary.average * 1000.0
    if hardware.upper().startswith("CPU"):
        profile.warnings.append(f"{source}: overview reports hardware {hardware!r}: no device time shares")
        return profile
    if ana:
        profile.device_duty_cycle_percent = ana.device_duty_cycle_percent or None
    if inp:
        profile.host_wait_percent = inp.input_percent
        profile.compute_time_percent = inp.compute_percent or None
    return profile


# ----------------------------------------------------------------------------------------- op_profile
def parse_op_profile(data: bytes, *, source: str) -> Profile:
    """op_profile export (JSON of the op_profile.Profile proto) -> one OpStat per XLA instruction."""
    profile = Profile(sources=[source])
    obj = loads_json(data, source=source)
    if not isinstance(obj, dict):
        raise ProfileError(f"expected an op_profile object, got {type(obj).__name__}", source=source)
    prof = _validate(proto.OpProfile, obj, source)
    if prof.device_type:
        profile.device_kind = prof.device_type
    root = prof.by_category or prof.by_program or prof.by_category_exclude_idle or prof.by_program_exclude_idle
    if root is not None:
        stack: list[tuple[proto.OpNode, str]] = [(root, "")]
        while stack:
            node, category = stack.pop()
            if node.xla is not None:
                m = node.metrics or proto.OpMetrics()
                hbm = m.raw_bytes_accessed_array[0] if m.raw_bytes_accessed_array else 0.0
                cat = category or node.xla.category
                profile.ops.append(
                    OpStat(
                        name=node.name.lstrip("%"),
                        category=cat,
                        kind=op_kind(cat, node.name),
                        occurrences=int(m.occurrences),
                        total_time_us=max(m.raw_time, 0.0) / 1e6,
                        flops=m.raw_flops or None,
                        bytes_accessed=hbm or None,
                        program=str(node.xla.program_id) if node.xla.program_id else None,
                    )
                )
                continue
            child_category = node.name if node.category is not None else category
            for child in reversed(node.children):
                stack.append((child, child_category))
        _op_profile_share(root, profile)
    _no_ops_warning(profile, source, "op_profile")
    return profile


def _op_profile_share(root: proto.OpNode, profile: Profile) -> None:
    """``op_time_fraction`` from op_profile: the instruction rows' raw time over the root's (the root's
    metrics cover every op of the program, including children the export left out)."""
    total_ps = root.metrics.raw_time if root.metrics else 0.0
    if total_ps > 0 and profile.ops:
        seen_ps = sum(op.total_time_us for op in profile.ops) * 1e6
        profile.op_time_fraction = min(1.0, seen_ps / total_ps)


# ----------------------------------------------------------------------------------------- entry points
PARSERS: dict[str, Callable[..., Profile]] = {
    "hlo_stats": parse_hlo_stats,
    "roofline_model": parse_roofline_model,
    "overview_page": parse_overview_page,
    "op_profile": parse_op_profile,
}


def tool_of(path: Path) -> str | None:
    """Which XProf tool a file name belongs to (``run7.hlo_stats.json`` -> ``hlo_stats``)."""
    name = path.name.lower()
    if not name.endswith(".json"):
        return None
    for tool in TOOLS:
        if tool in name:
            return tool
    return None


def read_xprof_export(path: Path, tool: str | None = None, *, source: str | None = None) -> Profile:
    """Read one XProf tool export file; ``tool`` defaults to what the file name says."""
    src = source or str(path)
    tool = tool or tool_of(path)
    if tool not in PARSERS:
        raise ProfileError(
            f"cannot tell which XProf tool this file is; expected a name containing one of {', '.join(TOOLS)}",
            source=src,
        )
    if tool == "hlo_stats":
        with open_mapped(path, source=src) as mapped:  # a large plain file: read through an mmap, page by page
            if mapped is not None:
                return parse_hlo_stats(mapped, source=src)
    return PARSERS[tool](read_bytes(path, source=src), source=src)
