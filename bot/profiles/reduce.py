"""Bounded op tables: keep the longest ops one by one and sum the rest per category.

A 1 GiB ``hlo_stats`` export holds millions of op rows; the analysis needs the totals (time, FLOPs, bytes
per kind and per roofline verdict) and the top ops, not millions of objects. :class:`OpReducer` takes op
rows window by window and holds at most ``2 x MAX_OPS`` of them: past that it keeps the ``MAX_OPS``
longest and folds the others into one summed OpStat per (category, kind, bound_by, program), named
``(N smaller <category> ops)``. Totals are exact; only the identity of the small ops is given up, and a
warning says so. Tables of at most ``MAX_OPS`` ops are returned exactly as read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter

from bot.profiles.model import OpStat, Profile

MAX_OPS = 100_000
_TIME, _OCC = attrgetter("total_time_us"), attrgetter("occurrences")


def _GROUP(op: OpStat) -> tuple[str, str, str, str]:  # noqa: N802 - used like the attrgetters beside it
    return (op.category, op.kind, op.bound_by or "", op.program or "")
_FLOPS, _BYTES = attrgetter("flops"), attrgetter("bytes_accessed")
_NESTED = re.compile(r"skipped (\d+) nested op row\(s\)")


@dataclass
class _Bucket:
    count: int = 0
    occurrences: int = 0
    time_us: float = 0.0
    flops: float | None = None
    nbytes: float | None = None


def _add(total: float | None, value: float | None) -> float | None:
    return total if value is None else (value if total is None else total + value)


class OpReducer:
    """Collects op rows with bounded memory (see the module docstring)."""

    def __init__(self, max_ops: int = MAX_OPS) -> None:
        self.max_ops = max_ops
        self.ops: list[OpStat] = []
        self.buckets: dict[tuple[object, ...], _Bucket] = {}
        self.rows = 0
        self.cutoff: float | None = None  # time of the shortest op kept after the last compaction
        self.nested = 0
        self.other_warnings: list[str] = []

    def add(self, ops: list[OpStat], warnings: list[str] = ()) -> None:  # type: ignore[assignment]
        """Take one window's ops (and its reader warnings: nested-row counts are summed over windows)."""
        self.rows += len(ops)
        if self.cutoff is not None:  # below the shortest kept op: summed at once, never sorted with the rest
            self._fold([op for op in ops if op.total_time_us < self.cutoff])
            ops = [op for op in ops if op.total_time_us >= self.cutoff]
        self.ops.extend(ops)
        for w in warnings:
            m = _NESTED.search(w)
            if m:
                self.nested += int(m.group(1))
            elif w not in self.other_warnings:
                self.other_warnings.append(w)
        if len(self.ops) > 2 * self.max_ops:
            self._compact()

    def _compact(self) -> None:
        self.ops.sort(key=_TIME, reverse=True)
        self._fold(self.ops[self.max_ops:])
        del self.ops[self.max_ops:]
        if len(self.ops) == self.max_ops:
            self.cutoff = self.ops[-1].total_time_us

    def _fold(self, small: list[OpStat]) -> None:
        """Sum ops into their (category, kind, bound_by, program) buckets: a sort and C-level sums, no per-op Python."""
        small.sort(key=_GROUP)
        for key, grouped in groupby(small, key=_GROUP):
            ops = list(grouped)
            b = self.buckets.get(key)
            if b is None:
                b = self.buckets[key] = _Bucket()
            b.count += len(ops)
            b.occurrences += sum(map(_OCC, ops))
            b.time_us += math.fsum(map(_TIME, ops))
            flops = [f for f in map(_FLOPS, ops) if f is not None]
            nbytes = [n for n in map(_BYTES, ops) if n is not None]
            b.flops = _add(b.flops, math.fsum(flops) if flops else None)
            b.nbytes = _add(b.nbytes, math.fsum(nbytes) if nbytes else None)

    def finish(self, profile: Profile, source: str) -> None:
        """Put the kept ops and the summed rest into ``profile`` (with a warning when anything was summed)."""
        if self.buckets or len(self.ops) > self.max_ops:
            self._compact()
        profile.ops.extend(self.ops)
        folded = 0
        for (category, kind, bound, program), b in sorted(self.buckets.items(), key=lambda kv: -kv[1].time_us):
            folded += b.count
            profile.ops.append(OpStat(
                name=f"({b.count:,} smaller {category} ops)", category=str(category), kind=kind,  # type: ignore[arg-type]
                occurrences=b.occurrences, total_time_us=b.time_us, flops=b.flops, bytes_accessed=b.nbytes,
                bound_by=bound or None, program=program or None,  # type: ignore[arg-type]
            ))
        profile.warnings.extend(self.other_warnings)
        if self.nested:
            profile.warnings.append(
                f"{source}: skipped {self.nested} nested op row(s) (parent_op_name set) to avoid double counting")
        if folded:
            profile.warnings.append(
                f"{source}: {self.rows:,} op rows; the {len(self.ops):,} longest are kept one by one and the other "
                f"{folded:,} are summed per category (their time, FLOPs and bytes stay in every total)")
