"""Sum hlo_stats rows below the reducer's cutoff straight from their columns, with no OpStat per row.

Once :class:`bot.profiles.reduce.OpReducer` keeps ``MAX_OPS`` ops, every later row shorter than the shortest
kept op is only summed into its (category, kind, bound_by, program) bucket. Building an OpStat for each of
millions of such rows, then filtering and grouping them in Python, cost two thirds of reading a 1 GiB
export. Here a window's checked columns become numpy arrays, the rows at/above the cutoff are picked out
(only they become OpStats), and the rest are summed per group. The arithmetic is the one
``xprof_export._hlo_rows_to_ops`` does per row (same IEEE operations in the same order) and each group's
sums use :func:`math.fsum` over the same rows as folding the OpStats would, so the buckets are bit-identical
(tests/test_profiles_fold.py compares both).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_not
from typing import Any

import numpy as np

from bot.profiles.classify import CONTAINER_CATEGORIES, category_kind, op_kind

GIB = float(1 << 30)
GIB_PER_US = GIB * 1e-6  # GiB/s x us -> bytes

GroupKey = tuple[Any, ...]  # (category, kind, bound_by or "", program or "")


@dataclass
class GroupSum:
    """One bucket's share of a window: how many rows, their occurrences, time, FLOPs and bytes (None: none had any)."""

    key: GroupKey
    count: int
    occurrences: int
    time_us: float
    flops: float | None
    nbytes: float | None


@dataclass
class WindowSplit:
    """A window split at the cutoff: rows to build OpStats for, the sums of the rest, nested rows skipped."""

    keep: list[int]
    groups: list[GroupSum]
    folded: int
    nested: int


def _floats(values: Sequence[float | None]) -> np.ndarray:
    """A checked column (finite floats or None) as float64, None as 0 (every use below treats None like 0)."""
    arr = np.array(values, dtype=np.float64)
    return np.nan_to_num(arr, nan=0.0, copy=False)


def _figures(cats: list[str], totals: list[float], selfs: list[float | None], rates: list[float | None],
             mem: list[float | None], hbm: list[float | None], ois: list[float | None]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row: counted time, FLOPs, whether it has FLOPs, bytes, whether it has bytes (as in _hlo_rows_to_ops)."""
    n = len(totals)
    total = np.array(totals, dtype=np.float64)
    rate, oi = _floats(rates), _floats(ois)
    containers = {c for c in set(cats) if c.lower() in CONTAINER_CATEGORIES}
    is_cont = np.fromiter(map(containers.__contains__, cats), bool, n) if containers else np.zeros(n, bool)
    time = total
    if containers:  # their time includes other rows' ops: self time when given
        self_t = np.array(selfs, dtype=np.float64)
        time = np.where(is_cont & ~np.isnan(self_t), self_t, total)
    has_flops = (rate != 0) & (total != 0)
    flops = rate * 1e3 * total  # GFLOP/s x us -> FLOPs
    hbm_a = _floats(hbm)
    bw = np.where(hbm_a != 0, hbm_a, _floats(mem))  # (h or m)
    by_bw = (bw != 0) & (total != 0)
    by_oi = ~by_bw & has_flops & (flops != 0) & (oi != 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        nbytes = np.where(by_bw, bw * GIB_PER_US * total, flops / oi)
    return time, flops, has_flops & ~is_cont, nbytes, (by_bw | by_oi) & ~is_cont


def _codes(values: Sequence[Any], norm: dict[Any, Any], keys: dict[Any, int]) -> np.ndarray:
    """Each value's bucket-key index: ``norm`` maps a raw value to its key part, ``keys`` numbers the parts."""
    index = {v: keys.setdefault(k, len(keys)) for v, k in norm.items()}
    return np.fromiter(map(index.__getitem__, values), np.intp, len(values))


def _group_codes(cols: Any) -> tuple[np.ndarray, Callable[[int], GroupKey]]:
    """Per row, the index of its (category, kind, bound_by or "", program or "") bucket, and the buckets."""
    cats, n = cols.cats, len(cols.cats)
    by_cat = {c: category_kind(c) for c in set(cats)}
    if all(k is not None for k in by_cat.values()):  # the category decides the kind: no per-row Python
        pairs: Sequence[Any] = cats
        pair_norm: dict[Any, Any] = {c: (c, k) for c, k in by_cat.items()}
    else:
        pairs = [(c, by_cat[c] or op_kind(c, name)) for c, name in zip(cats, cols.names, strict=True)]
        pair_norm = {p: p for p in set(pairs)}
    ck_keys: dict[Any, int] = {}
    b_keys: dict[Any, int] = {}
    p_keys: dict[Any, int] = {}
    ck = _codes(pairs, pair_norm, ck_keys)
    bound = _codes(cols.bounds, {b: (v or "") for b, v in cols.bound_cache.items()}, b_keys)
    prog = _codes(cols.progs, {p: (p or "") for p in set(cols.progs)}, p_keys)
    nb, npg = len(b_keys), len(p_keys)
    codes = (ck * nb + bound) * npg + prog if n else np.zeros(0, np.intp)
    ck_list, b_list, p_list = list(ck_keys), list(b_keys), list(p_keys)

    def decode(i: int) -> GroupKey:
        return (*ck_list[i // (nb * npg)], b_list[i // npg % nb], p_list[i % npg])
    return codes, decode


def _sum_groups(codes: np.ndarray, decode: Callable[[int], GroupKey], occ: np.ndarray, time: np.ndarray, flops: np.ndarray,
                has_flops: np.ndarray, nbytes: np.ndarray, has_bytes: np.ndarray) -> list[GroupSum]:
    """Per bucket, in key order (as OpReducer._fold visits them): counts, integer and fsum'd float sums."""
    order = np.argsort(codes, kind="stable")
    present, starts = np.unique(codes[order], return_index=True)
    ends = [*starts[1:].tolist(), len(order)]
    out = []
    for code, lo, hi in zip(present.tolist(), starts.tolist(), ends, strict=True):
        sel = order[lo:hi]
        f = flops[sel][has_flops[sel]]
        b = nbytes[sel][has_bytes[sel]]
        out.append(GroupSum(key=decode(code), count=hi - lo, occurrences=int(occ[sel].sum()),
                            time_us=math.fsum(time[sel].tolist()),
                            flops=math.fsum(f.tolist()) if f.size else None,
                            nbytes=math.fsum(b.tolist()) if b.size else None))
    out.sort(key=lambda g: g.key)
    return out


def split_window(cols: Any, cutoff: float) -> WindowSplit | None:
    """Split one window's checked columns (``xprof_export._HloColumns``) at ``cutoff``.

    Rows with a parent op are skipped (counted as nested), rows at/above the cutoff are listed in ``keep``,
    the others summed per bucket. ``None`` when an occurrence count does not fit 64 bits (the caller then
    builds OpStats for the window as usual).
    """
    n = len(cols.totals)
    try:
        occ = np.array(cols.occs, dtype=np.int64)
    except OverflowError:
        return None
    if occ.size and int(np.abs(occ).max()) > (1 << 62) // max(n, 1):
        return None  # a sum could overflow int64
    time, flops, has_flops, nbytes, has_bytes = _figures(
        cols.cats, cols.totals, cols.selfs, cols.rates, cols.mem, cols.hbm, cols.ois)
    parent = np.fromiter(map(bool, cols.parents), bool, n) if any(cols.parents) else np.zeros(n, bool)
    below = (time < cutoff) & ~parent
    keep = np.flatnonzero(~below & ~parent).tolist()
    rows = np.flatnonzero(below)
    if rows.size == 0:
        return WindowSplit(keep=keep, groups=[], folded=0, nested=int(parent.sum()))
    codes, decode = _group_codes(cols)
    groups = _sum_groups(codes[rows], decode, occ[rows], time[rows], flops[rows], has_flops[rows], nbytes[rows],
                         has_bytes[rows])
    return WindowSplit(keep=keep, groups=groups, folded=int(rows.size), nested=int(parent.sum()))


_OP_KEY = attrgetter("category", "kind", "bound_by", "program")
_OP_OCC, _OP_TIME = attrgetter("occurrences"), attrgetter("total_time_us")
_OP_FLOPS, _OP_BYTES = attrgetter("flops"), attrgetter("bytes_accessed")


def _optional(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """A column of floats or None as (float64 values, which are not None), without per-item Python."""
    has = np.fromiter(map(is_not, values, repeat(None)), bool, len(values))
    return np.array(values, dtype=np.float64), has


def sum_ops(ops: list[Any]) -> list[GroupSum] | None:
    """OpStats summed per (category, kind, bound_by or "", program or "") bucket, in key order.

    The same sums :meth:`OpReducer._fold` makes op by op (fsum over the same values), from columns taken with
    C-level attribute getters. ``None`` when a count or value does not fit the arrays (the caller folds op by op).
    """
    n = len(ops)
    try:
        occ = np.fromiter(map(_OP_OCC, ops), np.int64, n)
        time = np.fromiter(map(_OP_TIME, ops), np.float64, n)
        flops, has_flops = _optional(list(map(_OP_FLOPS, ops)))
        nbytes, has_bytes = _optional(list(map(_OP_BYTES, ops)))
    except (OverflowError, TypeError, ValueError):
        return None
    if n == 0 or int(np.abs(occ).max()) > (1 << 62) // n:
        return None
    raw = list(map(_OP_KEY, ops))
    keys: dict[GroupKey, int] = {}
    index = {k: keys.setdefault((k[0], k[1], k[2] or "", k[3] or ""), len(keys)) for k in set(raw)}
    codes = np.fromiter(map(index.__getitem__, raw), np.intp, n)
    return _sum_groups(codes, list(keys).__getitem__, occ, time, flops, has_flops, nbytes, has_bytes)
