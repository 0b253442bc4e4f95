"""The deterministic check every model reply passes before any front end shows it.

"Numbers come from code, words from the model": a model may explain, but a figure it writes must be one
the tools computed in this thread. :func:`check_model_text` reads the model's text sentence by sentence and
removes, with a visible note, every sentence that

* states a quantity (ms, s, GB, GiB, %, x, TFLOP/s, GB/s, chip counts) that no tool result of the thread
  supports within display rounding (``4.9 s`` matches a computed 4898.8 ms; ``120.0 ms`` does not),
* names a mesh (``fsdp=64``, ``fsdp=16 tensor=4``, ``data:8 model:4``, ``8x4x2``) that the Critic rejected
  or that no tool result contains (unchecked meshes are not shown as if they were checked),
* claims an action that was never recorded ("I have applied proposal 3 and opened pull request #42").

The evidence (:class:`Evidence`) is built from the thread's :class:`~agents.workspace.Workspace` and the
computed answer text only, never from model text, so a model cannot vouch for its own numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.workspace import Workspace
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
_RATIO = re.compile(rf"(?P<num>{_NUM})(?P<unit>[x×])(?![A-Za-z0-9])(?!\s*[x×]?\s*\d)")
_CHIPS = re.compile(r"(?P<num>\d[\d,]*)\s*(?:x\s+)?(?:(?:TPU|GPU)\s*(?:v\d\w*|[A-Z]\d+\w*)?\s+)?"
                    r"(?P<unit>chips?|devices?|GPUs?|TPUs?|accelerators?)\b", re.IGNORECASE)

# --------------------------------------------------------------------------------------------- meshes
_AXIS_NAMES = {**AXIS_OF, "tp": "tensor", "pp": "pipeline", "dp": "data", "cp": "sequence", "sp": "sequence",
               "ep": "expert"}
_AXIS_TOKEN = re.compile(r"\b(?P<dcn>dcn[_ ])?(?P<axis>" + "|".join(sorted(_AXIS_NAMES, key=len, reverse=True))
                         + r")\s*[=:]\s*(?P<size>\d+)\b", re.IGNORECASE)
_SHAPE = re.compile(r"(?<![\w.])\d+(?:\s*[x×]\s*\d+)+(?![\w.])")
_JOIN = re.compile(r"^[\s,;/x×*|&+]*(?:and\s*)?(?:\|\s*dcn\s*)?[\s,;/x×*|&+]*$", re.IGNORECASE)

# --------------------------------------------------------------------------------------------- actions
_ACTION_VERBS = (r"applied|opened|created|merged|pushed|committed|deployed|launched|submitted|filed|restarted|"
                 r"edited|modified|rolled out|scheduled|kicked off|re-?ran|benchmarked|"
                 r"changed the config|updated the config")
_ACTION = re.compile(
    rf"\b(?:I|we|ASAP)(?:'ve|’ve|'d|\s+have|\s+has|\s+had|\s+will\s+have)?\s+(?:just\s+|already\s+|now\s+|also\s+|successfully\s+)*"
    rf"(?:{_ACTION_VERBS})\b"
    rf"|\b(?:has|have|was|were)\s+(?:just\s+|already\s+|now\s+|successfully\s+)*been\s+(?:{_ACTION_VERBS})\b"
    r"|\b(?:pull request|merge request|PR|MR)\s*#\s*\d+",
    re.IGNORECASE)
_PR_REF = re.compile(r"#\s*(\d+)")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(*\-]?[A-Z0-9])")


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
    plain = _plain(text)
    masked = _SHAPE.sub(lambda m: " " * len(m.group(0)), plain)
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
        raw = m.group("num")
        out.append(Quantity(m.group(0).strip(), "ratio", _num(raw), 0.5 * 10 ** -_decimals(raw)))
    for m in _CHIPS.finditer(masked):
        out.append(Quantity(m.group(0).strip(), "chips", _num(m.group("num")), 0.0))
    return out


def _plain(text: str) -> str:
    """Text without markdown emphasis/code marks, so ``**120.0** ms`` reads as ``120.0 ms``."""
    return re.sub(r"[*_`]+", "", text)


MeshKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]


def mesh_key(mesh: Mapping[str, Mapping[str, int]]) -> MeshKey:
    """A mesh as a comparable value: size-1 axes dropped, axis names canonical, order fixed."""
    def part(axes: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
        return tuple(sorted((_AXIS_NAMES.get(str(a).lower(), str(a)), int(v)) for a, v in (axes or {}).items()
                            if int(v) != 1))
    return part(mesh.get("ici")), part(mesh.get("dcn"))


def _axes(key: MeshKey) -> frozenset[tuple[str, int]]:
    """The (axis, size) pairs of a mesh, ICI and DCN together (text often leaves the network unsaid)."""
    return frozenset(key[0] + key[1])


def _shape(key: MeshKey) -> tuple[int, ...]:
    return tuple(sorted((v for _, v in key[0] + key[1]), reverse=True))


def meshes_in(text: str) -> list[tuple[str, MeshKey | tuple[int, ...]]]:
    """Meshes written in ``text``: named axes (grouped when adjacent) as mesh keys, ``8x4x2`` as sorted shapes."""
    plain = _plain(text)
    found: list[tuple[str, MeshKey | tuple[int, ...]]] = []
    groups: list[list[re.Match[str]]] = []
    for m in _AXIS_TOKEN.finditer(plain):
        if groups and _JOIN.match(plain[groups[-1][-1].end():m.start()]):
            groups[-1].append(m)
        else:
            groups.append([m])
    for g in groups:
        mesh: dict[str, dict[str, int]] = {"ici": {}, "dcn": {}}
        for m in g:
            mesh["dcn" if m.group("dcn") else "ici"][_AXIS_NAMES[m.group("axis").lower()]] = int(m.group("size"))
        found.append((plain[g[0].start():g[-1].end()], mesh_key(mesh)))
    for m in _SHAPE.finditer(plain):
        sizes = tuple(sorted((int(x) for x in re.split(r"\s*[x×]\s*", m.group(0)) if int(x) != 1), reverse=True))
        if len(sizes) >= 2:
            found.append((m.group(0), sizes))
    return found


# --------------------------------------------------------------------------------------------- evidence
_FRACTION_KEYS = ("uncertainty", "efficiency", "utilization", "fraction", "share", "duty_cycle")
_CHIP_KEYS = {"num_chips", "chips", "current_chips", "devices", "num_devices", "device_count", "chips_per_slice",
              "world_size"}


def _typed(key: str, value: float) -> Iterator[tuple[str, float]]:
    """The figures a numeric field stands for, by the unit its name carries (``step_time_ms`` is a time)."""
    k = key.lower()
    if k.endswith("_ms") or k == "ms":
        yield "time", value
    elif k.endswith(("_us", "_in_us")):
        yield "time", value * 1e-3
    elif k.endswith(("_s", "_seconds", "_sec")):
        yield "time", value * 1e3
    if k.endswith("_bytes") or k == "bytes":
        yield "bytes", value
    elif k.endswith("_gb"):
        yield "bytes", value * 1e9
    elif k.endswith("_gib"):
        yield "bytes", value * 2.0**30
    elif k.endswith("_mb"):
        yield "bytes", value * 1e6
    if "percent" in k or k.endswith("_pct"):
        yield "percent", value
    if any(f in k for f in _FRACTION_KEYS) and abs(value) <= 1.0:
        yield "percent", value * 100
    if "speedup" in k or k.endswith(("_x", "ratio")):
        yield "ratio", value
        if value > 0:
            yield "percent", (value - 1) * 100
            yield "percent", (1 - 1 / value) * 100
    if "flop" in k:
        for f in (1.0, 1e9, 1e12):
            yield "flops", value * f
    if "bw" in k or "bandwidth" in k or "bytes_per_s" in k:
        for f in (1.0, 1e9):
            yield "bandwidth", value * f
    if k in _CHIP_KEYS:
        yield "chips", value


@dataclass
class Evidence:
    """What this thread's tools computed: typed figures, meshes the Critic passed or rejected, actions taken."""

    values: dict[str, list[float]] = field(default_factory=dict)
    meshes: set[MeshKey] = field(default_factory=set)
    rejected: dict[MeshKey, str] = field(default_factory=dict)  # mesh -> the Critic's reasons
    actions: list[dict[str, Any]] = field(default_factory=list)  # recorded actions: {"kind": ..., "ref": "#42"}

    def add(self, dimension: str, value: float) -> None:
        if math.isfinite(value):
            self.values.setdefault(dimension, []).append(value)

    def supports(self, q: Quantity) -> bool:
        """True when a computed figure of the same dimension shows as ``q`` at the precision it is written."""
        tol = q.tolerance * 1.0001 + 1e-9 * max(1.0, abs(q.value))
        for v in self.values.get(q.dimension, ()):
            if abs(abs(v) - abs(q.value)) <= tol:
                return True
        return False

    def mesh_known(self, mesh: MeshKey | tuple[int, ...]) -> bool:
        """A computed mesh, or some of its axes ("tensor=16" of ``fsdp=16 tensor=16``; ICI or DCN unsaid)."""
        if isinstance(mesh, tuple) and mesh and isinstance(mesh[0], int):
            return any(_shape(m) == mesh for m in self.meshes)
        axes = _axes(mesh)  # type: ignore[arg-type]
        return mesh in self.meshes or any(axes <= _axes(m) for m in self.meshes)

    def mesh_rejected(self, mesh: MeshKey | tuple[int, ...]) -> str | None:
        """The Critic's reasons when ``mesh`` is one it rejected (and no computed mesh it could be part of)."""
        if isinstance(mesh, tuple) and mesh and isinstance(mesh[0], int):
            if any(_shape(m) == mesh for m in self.meshes):
                return None
            return next((r for m, r in self.rejected.items() if _shape(m) == mesh), None)
        if mesh in self.rejected:
            return self.rejected[mesh]  # type: ignore[index]
        if self.mesh_known(mesh):
            return None
        axes = _axes(mesh)  # type: ignore[arg-type]
        return next((r for m, r in self.rejected.items() if axes == _axes(m)), None)


def _walk(obj: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _walk(v, str(k))
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v, key)
    else:
        yield key, obj


def _meshes_of(obj: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(obj, Mapping):
        if isinstance(obj.get("ici"), Mapping) or isinstance(obj.get("dcn"), Mapping):
            yield obj
        for v in obj.values():
            yield from _meshes_of(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _meshes_of(v)


def _hard_reasons(verdict: Mapping[str, Any]) -> str:
    return "; ".join(str(c.get("reason")) for c in verdict.get("checks") or []
                     if not c.get("passed") and c.get("hard", True)) or "fails the Critic's checks"


def _verdict_mesh(short: str, verdict: Mapping[str, Any]) -> MeshKey:
    """The mesh a Critic verdict is about: its ``mesh`` mapping, else its short form (``fsdp=16 tensor=4``)."""
    mesh = verdict.get("mesh")
    if isinstance(mesh, Mapping) and (mesh.get("ici") or mesh.get("dcn")):
        return mesh_key(mesh)
    named = [m for _, m in meshes_in(short) if not (m and isinstance(m[0], int))]
    return named[0] if named else mesh_key({})  # type: ignore[return-value]


def collect_evidence(ws: Workspace, computed: str = "", actions: Iterable[Mapping[str, Any]] = ()) -> Evidence:
    """Everything the thread's tools computed (workspace + this turn's results) and the computed answer text."""
    ev = Evidence(actions=[dict(a) for a in actions])
    sources: list[Any] = [ws.report, ws.proposals, ws.verdicts, ws.suggested, ws.whatif, ws.stance,
                          [r.result for r in ws.turn if r.status == "ok"]]
    steps: list[float] = []
    for key, value in _walk(sources):
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            for dim, v in _typed(key, float(value)):
                ev.add(dim, v)
            if key.startswith("step_time") and key.endswith("_ms"):
                steps.append(float(value))
        elif isinstance(value, str) and any(ch.isdigit() for ch in value):
            for q in quantities(value):
                ev.add(q.dimension, q.value)
            for _, m in meshes_in(value):
                if not (m and isinstance(m[0], int)):
                    ev.meshes.add(m)  # type: ignore[arg-type]
    for q in quantities(computed):
        ev.add(q.dimension, q.value)
    current = ((ws.report or {}).get("kpis") or {}).get("step_time_ms")
    if isinstance(current, (int, float)):  # "saves 653 ms per step": a prediction against the measured step
        for v in steps:
            ev.add("time", abs(float(current) - v))
    for mesh in _meshes_of(sources):
        key = mesh_key(mesh)
        ev.meshes.add(key)
        ev.add("chips", float(math.prod(v for _, v in key[0] + key[1])))
    for short, verdict in ws.verdicts.items():
        if not verdict.get("ok", True):
            ev.rejected[_verdict_mesh(short, verdict)] = _hard_reasons(verdict)
    for s in ws.suggested:
        if isinstance(s.get("verdict"), Mapping) and not s["verdict"].get("ok", True):  # a fixed one stays rejected
            v = s["verdict"]
            key = _verdict_mesh(str(v.get("mesh_short") or ""), v)
            ev.rejected[key] = "; ".join(s.get("reasons") or []) or _hard_reasons(v)
    for mesh in ev.rejected:
        ev.meshes.discard(mesh)
    return ev


# --------------------------------------------------------------------------------------------- the check
@dataclass
class Removal:
    sentence: str
    why: str  # figure | mesh | rejected_mesh | action
    items: list[str]


@dataclass
class Checked:
    """The model text as a person may see it, and what was taken out of it."""

    text: str
    removed: list[Removal] = field(default_factory=list)

    @property
    def note(self) -> str | None:
        """The visible note saying what was removed and why (None when nothing was).

        Removed figures and claims are counted, not repeated (a skimming reader should not pick up the
        invented number from the note); meshes are named, since the computed part shows their verdicts.
        The worklog keeps every removed sentence for tracing.
        """
        if not self.removed:
            return None
        counts: dict[str, int] = {}
        meshes: dict[str, list[str]] = {}
        for r in self.removed:
            counts[r.why] = counts.get(r.why, 0) + 1
            if r.why in ("mesh", "rejected_mesh"):
                meshes.setdefault(r.why, []).extend(r.items)
        labels = {"figure": "with figures no computed result supports",
                  "action": "claiming actions that were not taken",
                  "rejected_mesh": "naming meshes the Critic rejected", "mesh": "naming meshes not checked in this thread"}
        parts = []
        for why in ("figure", "action", "rejected_mesh", "mesh"):
            if why in counts:
                named = f" ({', '.join(dict.fromkeys(meshes[why]))})" if why in meshes else ""
                parts.append(f"{counts[why]} {labels[why]}{named}")
        n = len(self.removed)
        return (f"Note: {n} sentence{'s' if n != 1 else ''} of the model's text {'were' if n != 1 else 'was'} "
                f"removed: {'; '.join(parts)}. The figures above are the computed ones.")


def _sentences(line: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(line) if s]


def _problem(sentence: str, ev: Evidence) -> Removal | None:
    acted = {str(a.get("kind")) for a in ev.actions}
    refs = {str(a.get("ref", "")).lstrip("#") for a in ev.actions if a.get("ref")}
    m = _ACTION.search(_plain(sentence))
    if m and not (acted and all(r in refs for r in _PR_REF.findall(sentence))):
        return Removal(sentence, "action", [m.group(0)])
    rejected, unknown = [], []
    for text, mesh in meshes_in(sentence):
        if ev.mesh_rejected(mesh) is not None:
            rejected.append(text)
        elif not ev.mesh_known(mesh):
            unknown.append(text)
    if rejected:
        return Removal(sentence, "rejected_mesh", rejected)
    if unknown:
        return Removal(sentence, "mesh", unknown)
    bad = [q.text for q in quantities(sentence) if not ev.supports(q)]
    if bad:
        return Removal(sentence, "figure", bad)
    return None


def check_model_text(text: str, ev: Evidence) -> Checked:
    """Keep the sentences of ``text`` whose figures, meshes and claims the evidence supports; remove the rest."""
    out_lines: list[str] = []
    removed: list[Removal] = []
    for line in text.splitlines():
        if not line.strip():
            out_lines.append(line)
            continue
        kept = []
        for sentence in _sentences(line):
            problem = _problem(sentence, ev)
            if problem is None:
                kept.append(sentence)
            else:
                removed.append(problem)
        if kept:
            out_lines.append(" ".join(kept))
    clean = re.sub(r"\n{3,}", "\n\n", "\n".join(out_lines)).strip()
    return Checked(clean, removed)


def check_reply(text: str, ws: Workspace, computed: str = "", actions: Iterable[Mapping[str, Any]] = ()) -> Checked:
    """:func:`check_model_text` against this thread's evidence (the one call the conversation makes)."""
    return check_model_text(text, collect_evidence(ws, computed, actions))
