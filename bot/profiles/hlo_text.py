"""Collectives in compiled HLO text (``jax.jit(f).lower(...).compile().as_text()``, ``*.hlo.txt``).

Each instruction line ``%name = <shape> <opcode>(<operands>), attr=..., metadata={...}`` is parsed
structurally: the opcode is the token right after the result shape, so an op name that merely mentions a
collective (``%all-reduce-fusion = f32[] fusion(...)``) or a ``metadata={op_name="...all-gather..."}``
string is never counted. String literals are blanked before attributes are read.

Replica groups are understood in the three forms XLA prints:
``{{0,1},{2,3}}`` (explicit), ``[2,4]<=[8]`` (iota: 2 groups of 4, optionally ``T(...)`` transposed), and
``mesh['x'=2,'y'=4] {'y'}`` (groups along the named mesh axes). ``-start`` forms are counted once (their
``-done`` is skipped), and collectives inside a computation called by ``async-start`` are marked async.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from bot.errors import ProfileError
from bot.profiles.io import MAX_PROFILE_BYTES, decode_text, read_bytes
from bot.profiles.model import CollectiveOp

COLLECTIVES = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "ragged-all-to-all",
    "collective-permute",
    "collective-broadcast",
)
_OPCODES = {op: op for op in COLLECTIVES} | {f"{op}-start": op for op in COLLECTIVES}

DTYPE_BITS = {
    "pred": 8,
    "s2": 2,
    "u2": 2,
    "s4": 4,
    "u4": 4,
    "s8": 8,
    "u8": 8,
    "s16": 16,
    "u16": 16,
    "s32": 32,
    "u32": 32,
    "s64": 64,
    "u64": 64,
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
    "c64": 64,
    "c128": 128,
    "f8e4m3fn": 8,
    "f8e5m2": 8,
    "f8e4m3": 8,
    "f8e4m3b11fnuz": 8,
    "f8e4m3fnuz": 8,
    "f8e5m2fnuz": 8,
    "f8e3m4": 8,
    "f8e8m0fnu": 8,
    "f4e2m1fn": 4,
    "tf32": 32,
    "token": 0,
    "opaque": 0,
}

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[A-Za-z_][\w.\-]*)\s*=\s*(?P<rest>.*)$")
_COMP = re.compile(r"^\s*(?:ENTRY\s+)?%?(?P<name>[A-Za-z_][\w.\-]*)\s*(?:\(.*\))?\s*(?:->\s*.*)?\{\s*$")
_ARRAY = re.compile(r"(?P<dtype>[a-z][a-z0-9]*)\[(?P<dims>[^\]]*)\]")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_COMMENT = re.compile(r"/\*.*?\*/")  # e.g. /*index=5*/ inside long tuple shapes
_HEADER_INT = re.compile(r"\b(num_partitions|replica_count)=(\d+)")


class _Shape:
    """A parsed result shape: total bytes, and the dtype holding most of them."""

    __slots__ = ("bytes", "dtype", "parts")

    def __init__(self, nbytes: int, dtype: str, parts: list[_Shape] | None = None) -> None:
        self.bytes = nbytes
        self.dtype = dtype
        self.parts = parts or []


def _split_top(text: str) -> list[str]:
    """Split a tuple body on commas at nesting depth 0 (layouts ``{1,0}`` and dims ``[2,3]`` nest)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p.strip() for p in out if p.strip()]


def _parse_shape(text: str) -> _Shape:
    text = text.strip()
    if text.startswith("("):
        parts = [_parse_shape(p) for p in _split_top(text[1:-1])]
        nbytes = sum(p.bytes for p in parts)
        dtype = max(parts, key=lambda p: p.bytes).dtype if parts else "tuple"
        return _Shape(nbytes, dtype, parts)
    m = _ARRAY.match(text)
    if not m:
        raise ValueError(f"unrecognised shape {text[:40]!r}")
    dtype = m.group("dtype")
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        raise ValueError(f"unknown element type {dtype!r}")
    count = 1
    for dim in (d for d in m.group("dims").split(",") if d.strip()):
        dim = dim.strip().lstrip("<=").strip()
        if not dim.isdigit():
            raise ValueError(f"unrecognised dimension {dim!r}")
        count *= int(dim)
    return _Shape(math.ceil(count * bits / 8), dtype)


def _shape_and_opcode(rest: str) -> tuple[str, str, str] | None:
    """Split ``<shape> <opcode>(...)...`` into shape text, opcode and the text after the opcode."""
    rest = rest.strip()
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    shape, tail = rest[: i + 1], rest[i + 1 :]
                    break
        else:
            return None
    else:
        m = re.match(r"\S+", rest)
        if not m:
            return None
        shape, tail = m.group(0), rest[m.end() :]
    m = re.match(r"\s+([a-z][\w\-]*)\(", tail)
    if not m:
        return None
    return shape, m.group(1), tail[m.end() :]


def _groups(attrs: str, total_devices: int | None) -> tuple[int | None, int | None]:
    """(group size, number of groups) from an instruction's attribute text (strings already blanked)."""
    m = re.search(r"source_target_pairs=\{((?:\s*\{\s*\d+\s*,\s*\d+\s*\}\s*,?)*)\}", attrs)
    if m:
        pairs = re.findall(r"\{\s*\d+\s*,\s*\d+\s*\}", m.group(1))
        return 2, (len(pairs) or None)
    if re.search(r"replica_groups=\{\s*\}", attrs) or "replica_groups" not in attrs:
        # Empty groups: one group of every participant.
        return total_devices, (1 if total_devices else None)
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=\[[\d,]+\](?:T\([\d,]+\))?", attrs)
    if m:
        return int(m.group(2)), int(m.group(1))
    # mesh['x'=2,'y'=4] {'y'}, optionally with a device order: mesh[...], device_ids=([2,2,2]T(1,0,2)) {'y'}
    m = re.search(
        r"replica_groups=mesh\[([^\]]*)\](?:\s*,\s*device_ids=\((?:[^()]|\([^()]*\))*\))?\s*\{([^}]*)\}", attrs
    )
    if m:
        sizes = {k: int(v) for k, v in re.findall(r"'([^']+)'\s*=\s*(\d+)", m.group(1))}
        axes = re.findall(r"'([^']+)'", m.group(2))
        if sizes and all(a in sizes for a in axes) and not re.search(r"[:(]", m.group(2)):
            size = math.prod(sizes[a] for a in axes) if axes else 1
            total = math.prod(sizes.values())
            return size, total // size if size else None
        return None, None
    m = re.search(r"replica_groups=\{((?:\s*\{[\d,\s]*\}\s*,?)*)\}", attrs)
    if m:
        groups = [g for g in re.findall(r"\{([\d,\s]*)\}", m.group(1)) if g.strip()]
        sizes = {len([x for x in g.split(",") if x.strip()]) for g in groups}
        if len(sizes) == 1:
            return sizes.pop(), len(groups)
        return (max(sizes) if sizes else None), (len(groups) or None)
    return None, None


def group_stride(attrs: str) -> int | None:
    """Device-id step inside the first replica group, when the group is evenly spaced (else None).

    Which mesh axis a collective runs over shows in this pattern: neighbours (stride 1) are the innermost
    axis, a stride of k the axis whose inner axes multiply to k. Explicit ``{{0,4},{1,5}}`` and iota
    ``[G,S]<=[dims]T(perm)`` forms are read; ``mesh[...]`` forms name their axes and are left to the caller.
    """
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", attrs)
    if m:
        groups, size = int(m.group(1)), int(m.group(2))
        dims = [int(x) for x in m.group(3).split(",")]
        if groups * size != math.prod(dims) or size < 2 or math.prod(dims) > 1 << 20:
            return None
        perm = [int(x) for x in m.group(4).split(",")] if m.group(4) else list(range(len(dims)))
        if sorted(perm) != list(range(len(dims))):
            return None
        return _even_step([_iota_member(k, dims, perm) for k in range(size)])
    m = re.search(r"replica_groups=\{\s*\{([\d,\s]*)\}", attrs)
    if m:
        return _even_step([int(x) for x in m.group(1).split(",") if x.strip()])
    return None


def _iota_member(k: int, dims: list[int], perm: list[int]) -> int:
    """The k-th device (row-major) of iota(dims) transposed by ``perm``: XLA's iota replica-group list."""
    shape = [dims[p] for p in perm]
    index = [0] * len(dims)
    for axis in range(len(shape) - 1, -1, -1):  # k -> multi-index in the transposed array
        k, index[perm[axis]] = divmod(k, shape[axis])
    flat = 0
    for axis, size in enumerate(dims):  # original multi-index -> row-major device id
        flat = flat * size + index[axis]
    return flat


def _even_step(members: list[int]) -> int | None:
    if len(members) < 2:
        return None
    ordered = sorted(members)
    step = ordered[1] - ordered[0]
    if step <= 0 or any(b - a != step for a, b in zip(ordered, ordered[1:], strict=False)):
        return None
    return step


def _result(op: str, opcode: str, shape: _Shape) -> _Shape:
    """The part of a ``-start`` tuple that is the collective's output."""
    if not opcode.endswith("-start") or not shape.parts:
        return shape
    if op in ("all-gather", "collective-permute", "all-to-all", "reduce-scatter") and len(shape.parts) >= 2:
        return shape.parts[1]  # (operands, outputs[, contexts...])
    return shape


def parse_hlo_text(text: str, *, source: str) -> list[CollectiveOp]:
    """Every collective instruction in an HLO module's text, with result bytes and replica groups."""
    header = {k: int(v) for k, v in _HEADER_INT.findall(text.split("\n", 1)[0])}
    total = (header.get("num_partitions", 1) * header.get("replica_count", 1)) if header else None
    found: list[CollectiveOp] = []
    async_comps = set(re.findall(r"async-start\([^\n]*?calls=%?([\w.\-]+)", text))
    computation: str | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if "=" not in line:
            m = _COMP.match(line)
            if m:
                computation = m.group("name")
            continue
        m = _INSTR.match(line)
        if not m:
            m2 = _COMP.match(_STRING.sub('""', line))
            if m2:
                computation = m2.group("name")
            continue
        clean = _COMMENT.sub("", _STRING.sub('""', m.group("rest")))
        parsed = _shape_and_opcode(clean)
        if parsed is None:
            continue
        shape_text, opcode, attrs = parsed
        op = _OPCODES.get(opcode)
        if op is None:
            continue
        try:
            shape = _result(op, opcode, _parse_shape(shape_text))
        except ValueError as exc:
            raise ProfileError(f"line {lineno}: {exc}", source=source, field=m.group("name")) from None
        size, count = _groups(attrs, total)
        found.append(
            CollectiveOp(
                name=m.group("name"),
                op=op,
                dtype=shape.dtype,
                result_bytes=shape.bytes,
                group_size=size,
                num_groups=count,
                is_async=opcode.endswith("-start") or computation in async_comps,
                computation=computation,
                group_stride=group_stride(attrs) if op != "collective-permute" else None,
            )
        )
    return found


def read_hlo_text(path: Path, *, source: str | None = None, limit: int = MAX_PROFILE_BYTES) -> list[CollectiveOp]:
    """Read an HLO text file and return its collectives."""
    src = source or str(path)
    text = decode_text(read_bytes(path, limit, source=src), source=src)
    if "HloModule" not in text[:4096] and not re.search(r"^\s*(ENTRY\s+)?%?[\w.\-]+\s.*\{\s*$", text, re.M):
        raise ProfileError("not HLO text: expected an 'HloModule' header or HLO computations", source=src)
    return parse_hlo_text(text, source=src)
