"""Figures and meshes as people write them: ``4,898.8 ms``, ``5.7 GiB``, ``1.43x``, ``fsdp=16 tensor=4``, ``8x4x2``.

:func:`quantities` reads every figure with a unit and converts it to its dimension's base unit (ms, bytes,
%, x, FLOP/s, B/s, chips) with the tolerance its written precision implies (``4.9 s`` is 4850..4950 ms);
:func:`meshes_in` reads meshes in the forms ASAP's users write them (MaxText axis names, ``ici_mesh``
names such as ``data:8 model:4``, Megatron's ``tp=4``, bare shapes). :mod:`agents.verify` compares them
with what the tools computed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from bot.configs.plainmesh import AXIS_OF

# --------------------------------------------------------------------------------------------- units
# unit as written (lower case) -> (dimension, factor to the dimension's base unit)
_UNITS: dict[str, tuple[str, float]] = {
    **{u: ("time", 1e-3) for u in ("us", "µs", "μs", "microseconds", "microsecond")},
    **{u: ("time", 1.0) for u in ("ms", "msec", "milliseconds", "millisecond")},
    **{u: ("time", 1e3) for u in ("s", "sec", "secs", "seconds", "second")},
    **{u: ("time", 6e4) for u in ("min", "mins", "minutes", "minute")},
    **{u: ("time", 3.6e6) for u in ("h", "hr", "hrs", "hours", "hour")},
    "kb": ("bytes", 1e3), "mb": ("bytes", 1e6), "gb": ("bytes", 1e9), "tb": ("bytes", 1e12),
    "kib": ("bytes", 2.0**10), "mib": ("bytes", 2.0**20), "gib": ("bytes", 2.0**30), "tib": ("bytes", 2.0**40),
    "mb/s": ("bandwidth", 1e6), "gb/s": ("bandwidth", 1e9), "tb/s": ("bandwidth", 1e12),
    "gib/s": ("bandwidth", 2.0**30), "tib/s": ("bandwidth", 2.0**40),
    "flop/s": ("flops", 1.0), "flops": ("flops", 1.0), "gflop/s": ("flops", 1e9), "gflops": ("flops", 1e9),
    "tflop/s": ("flops", 1e12), "tflops": ("flops", 1e12), "pflop/s": ("flops", 1e15), "pflops": ("flops", 1e15),
    "%": ("percent", 1.0), "percent": ("percent", 1.0),
    "x": ("ratio", 1.0), "×": ("ratio", 1.0),
    **{u: ("chips", 1.0) for u in ("chip", "chips", "device", "devices", "gpu", "gpus", "tpu", "tpus",
                                     "accelerator", "accelerators")},
}
_NUM = r"[-+−]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?"
_UNIT_RE = (r"(?:[TGMKtgmk]i?[Bb]/s|[TGPtgp]?FLOP[Ss]?/s|[TGPtgp]?FLOPS|[TGPtgp]?FLOPs|[TGMKtgmk]i?B|"
            r"microseconds?|milliseconds?|seconds?|minutes?|hours?|msec|secs?|mins?|hrs?|ms|us|µs|μs|s|h|"
            r"%|percent)")
_QUANTITY = re.compile(rf"(?P<num>{_NUM})(?:\s*(?:-|–|to)\s*(?P<num2>{_NUM}))?\s*(?P<unit>{_UNIT_RE})(?![A-Za-z0-9])")
_RATIO = re.compile(rf"(?P<num>{_NUM})(?P<unit>[x×])(?![A-Za-z0-9])(?!\s*[x×]?\s*\d)"
                    r"|(?<![A-Za-z0-9.])[x×](?P<pre>\d+(?:\.\d+)?)(?![\w.])")  # 1.8x, and x1.8
_CHIPS = re.compile(r"(?P<num>\d[\d,]*)\s*(?:x\s+)?(?:(?:TPU|GPU)\s*(?:v\d\w*|[A-Z]\d+\w*)?\s+)?"
                    r"(?P<unit>chips?|devices?|GPUs?|TPUs?|accelerators?)\b", re.IGNORECASE)

# --------------------------------------------------------------------------------------------- meshes
_AXIS_NAMES = {**AXIS_OF, "tp": "tensor", "pp": "pipeline", "dp": "data", "cp": "sequence", "sp": "sequence",
               "ep": "expert"}
_AXIS_TOKEN = re.compile(r"\b(?P<dcn>dcn[_ ])?(?P<axis>" + "|".join(sorted(_AXIS_NAMES, key=len, reverse=True))
                         + r")\s*[=:]\s*(?P<size>\d+)\b", re.IGNORECASE)
_SHAPE = re.compile(r"(?<![\w.])\d+(?:\s*[x×]\s*\d+)+(?![\w.])")
_JOIN = re.compile(r"^[\s,;/x×*|&+]*(?:and\s*)?(?:\|\s*dcn\s*)?[\s,;/x×*|&+]*$", re.IGNORECASE)

def _num(text: str) -> float:
    return float(text.replace(",", "").replace("−", "-"))


def _decimals(text: str) -> int:
    t = text.replace(",", "").lower()
    if "e" in t:
        return 0
    return len(t.split(".", 1)[1]) if "." in t else 0


@dataclass(frozen=True)
class Quantity:
    """A figure as written in text, converted to its dimension's base unit (ms, bytes, %, x, FLOP/s, B/s, chips)."""

    text: str
    dimension: str
    value: float
    tolerance: float  # half the last written digit, in base units (display rounding)


def quantities(text: str) -> list[Quantity]:
    """Every figure with a unit in ``text`` (ranges give both ends); meshes like ``8x4x2`` are not figures."""
    text = plain(text)
    masked = _SHAPE.sub(lambda m: " " * len(m.group(0)), text)
    out: list[Quantity] = []
    for m in _QUANTITY.finditer(masked):
        unit = m.group("unit")
        key = unit if unit in ("%",) else unit.lower()
        if key not in _UNITS:
            continue
        dim, factor = _UNITS[key]
        for g in ("num", "num2"):
            raw = m.group(g)
            if raw:
                out.append(Quantity(m.group(0).strip(), dim, _num(raw) * factor, 0.5 * 10 ** -_decimals(raw) * factor))
    for m in _RATIO.finditer(masked):
        raw = m.group("num") or m.group("pre")
        out.append(Quantity(m.group(0).strip(), "ratio", _num(raw), 0.5 * 10 ** -_decimals(raw)))
    for m in _CHIPS.finditer(masked):
        out.append(Quantity(m.group(0).strip(), "chips", _num(m.group("num")), 0.0))
    return out


def plain(text: str) -> str:
    """Text without markdown emphasis/code marks, so ``**120.0** ms`` reads as ``120.0 ms``."""
    return re.sub(r"[*_`]+", "", text)


MeshKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]


def mesh_key(mesh: Mapping[str, Mapping[str, int]]) -> MeshKey:
    """A mesh as a comparable value: size-1 axes dropped, axis names canonical, order fixed."""
    def part(axes: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
        return tuple(sorted((_AXIS_NAMES.get(str(a).lower(), str(a)), int(v)) for a, v in (axes or {}).items()
                            if int(v) != 1))
    return part(mesh.get("ici")), part(mesh.get("dcn"))


def axes_of(key: MeshKey) -> frozenset[tuple[str, int]]:
    """The (axis, size) pairs of a mesh, ICI and DCN together (text often leaves the network unsaid)."""
    return frozenset(key[0] + key[1])


def shape_of(key: MeshKey) -> tuple[int, ...]:
    return tuple(sorted((v for _, v in key[0] + key[1]), reverse=True))


def meshes_in(text: str) -> list[tuple[str, MeshKey | tuple[int, ...]]]:
    """Meshes written in ``text``: named axes (grouped when adjacent) as mesh keys, ``8x4x2`` as sorted shapes."""
    text = plain(text)
    found: list[tuple[str, MeshKey | tuple[int, ...]]] = []
    groups: list[list[re.Match[str]]] = []
    for m in _AXIS_TOKEN.finditer(text):
        if groups and _JOIN.match(text[groups[-1][-1].end():m.start()]):
            groups[-1].append(m)
        else:
            groups.append([m])
    for g in groups:
        mesh: dict[str, dict[str, int]] = {"ici": {}, "dcn": {}}
        for m in g:
            mesh["dcn" if m.group("dcn") else "ici"][_AXIS_NAMES[m.group("axis").lower()]] = int(m.group("size"))
        found.append((text[g[0].start():g[-1].end()], mesh_key(mesh)))
    for m in _SHAPE.finditer(text):
        sizes = tuple(sorted((int(x) for x in re.split(r"\s*[x×]\s*", m.group(0)) if int(x) != 1), reverse=True))
        if len(sizes) >= 2:
            found.append((m.group(0), sizes))
    return found
