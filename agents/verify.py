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
computed answer text only, never from model text, so a model cannot vouch for its own numbers. Reading
figures and meshes out of text is :mod:`agents.figures`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.figures import MeshKey, Quantity, axes_of, mesh_key, meshes_in, plain, quantities, shape_of
from agents.workspace import Workspace

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
            return any(shape_of(m) == mesh for m in self.meshes)
        axes = axes_of(mesh)  # type: ignore[arg-type]
        return mesh in self.meshes or any(axes <= axes_of(m) for m in self.meshes)

    def mesh_rejected(self, mesh: MeshKey | tuple[int, ...]) -> str | None:
        """The Critic's reasons when ``mesh`` is one it rejected (and no computed mesh it could be part of)."""
        if isinstance(mesh, tuple) and mesh and isinstance(mesh[0], int):
            if any(shape_of(m) == mesh for m in self.meshes):
                return None
            return next((r for m, r in self.rejected.items() if shape_of(m) == mesh), None)
        if mesh in self.rejected:
            return self.rejected[mesh]  # type: ignore[index]
        if self.mesh_known(mesh):
            return None
        axes = axes_of(mesh)  # type: ignore[arg-type]
        return next((r for m, r in self.rejected.items() if axes == axes_of(m)), None)


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
    m = _ACTION.search(plain(sentence))
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
