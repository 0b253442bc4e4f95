"""What a mesh change *is*: its kind, and how far apart two changes are.

Three proposals must differ in kind, not be three near-duplicates. A change from the baseline mesh is
described per (network, axis) by ``log2(new size / old size)``: ICI and DCN are separate coordinates
because moving an axis between them is a different decision from resizing it.

* **kind** — the dominant change: the coordinate(s) that shrink most, and those that grow most, ignoring
  by how much. ``tensor 8->4, fsdp 4->8`` and ``tensor 8->1, fsdp 4->16, data 1->2`` are the same kind
  (``tensor->fsdp``); ``tensor 8->4, data 1->2`` is a different kind (``tensor->data``); moving an axis
  across slices (``dcn.fsdp->dcn.data``) is its own kind.
* **distance** — the L1 norm of the difference of two changes' log2 vectors (each factor of 2 on one
  coordinate counts 1). Two proposals are near-duplicates when their kinds are equal or their distance is
  below :data:`MIN_DISTANCE`.
"""

from __future__ import annotations

import math

from bot.configs.mesh import AXES, Mesh

MIN_DISTANCE = 2.0
"""Two changes closer than this (one factor-2 shift apart) count as near-duplicates."""

MeshKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]


def mesh_key(mesh: Mesh) -> MeshKey:
    """A hashable identity for a mesh: equal meshes (size-1 axes ignored) have equal keys."""
    return (
        tuple(sorted((a, v) for a, v in mesh.ici.items() if v != 1)),
        tuple(sorted((a, v) for a, v in mesh.dcn.items() if v != 1)),
    )


def mesh_dict(mesh: Mesh) -> dict[str, dict[str, int]]:
    """JSON form ``{'ici': {...}, 'dcn': {...}}`` in canonical axis order, size-1 axes dropped."""
    return {
        "ici": {a: mesh.ici[a] for a in AXES if mesh.ici.get(a, 1) != 1},
        "dcn": {a: mesh.dcn[a] for a in AXES if mesh.dcn.get(a, 1) != 1},
    }


def change_vector(baseline: Mesh, mesh: Mesh) -> dict[str, float]:
    """``{'ici.tensor': -1.0, ...}``: log2 of each axis's size ratio, zero entries dropped."""
    out: dict[str, float] = {}
    for net, old, new in (("ici", baseline.ici, mesh.ici), ("dcn", baseline.dcn, mesh.dcn)):
        for axis in AXES:
            d = math.log2(new.get(axis, 1)) - math.log2(old.get(axis, 1))
            if abs(d) > 1e-9:
                out[f"{net}.{axis}"] = d
    return out


def kind_of(baseline: Mesh, mesh: Mesh) -> str:
    """The dominant change: the coordinate(s) that shrink most -> those that grow most.

    ``fsdp=8 tensor=8 -> fsdp=64`` and ``-> data=2 fsdp=32`` are both ``tensor->fsdp``;
    ``-> data=8 fsdp=8`` is ``tensor->data``; DCN coordinates carry a ``dcn.`` prefix, so moving an
    axis between networks is its own kind. ``unchanged`` when nothing moved.
    """
    vec = change_vector(baseline, mesh)
    if not vec:
        return "unchanged"

    def order(c: str) -> tuple[bool, int]:
        return (c.startswith("dcn"), AXES.index(c.split(".")[1]))  # type: ignore[arg-type]

    def label(c: str) -> str:
        return c[4:] if c.startswith("ici.") else c

    lo = min(vec.values())
    hi = max(vec.values())
    shrink = sorted((c for c, d in vec.items() if d < 0 and abs(d - lo) < 1e-9), key=order)
    grow = sorted((c for c, d in vec.items() if d > 0 and abs(d - hi) < 1e-9), key=order)
    return f"{'+'.join(map(label, shrink)) or '-'}->{'+'.join(map(label, grow)) or '-'}"


def distance(baseline: Mesh, a: Mesh, b: Mesh) -> float:
    """L1 distance between two changes from the same baseline, in factors of two."""
    va, vb = change_vector(baseline, a), change_vector(baseline, b)
    return sum(abs(va.get(k, 0.0) - vb.get(k, 0.0)) for k in set(va) | set(vb))


def describe_change(baseline: Mesh, mesh: Mesh) -> str:
    """Human form of what moved: ``tensor 8->2, fsdp 4->16, dcn data 1->2``.

    An axis that spans both networks also gets its whole degree (what the config's single number says, e.g.
    Megatron's pipeline size): ``pipeline 1->2 (16->32 in all)``, not only the ICI part that moved.
    """
    parts = []
    for net, old, new, other_old, other_new in (("", baseline.ici, mesh.ici, baseline.dcn, mesh.dcn),
                                                ("dcn ", baseline.dcn, mesh.dcn, baseline.ici, mesh.ici)):
        for axis in AXES:
            o, n = old.get(axis, 1), new.get(axis, 1)
            if o != n:
                oo, on = other_old.get(axis, 1), other_new.get(axis, 1)
                whole = f" ({o * oo}->{n * on} in all)" if max(oo, on) > 1 else ""
                parts.append(f"{net}{axis} {o}->{n}{whole}")
    return ", ".join(parts) or "no change"


def combination_of(baseline: Mesh, mesh: Mesh, chosen: list[Mesh]) -> tuple[int, int] | None:
    """Indices ``(i, j)`` of two chosen meshes whose changes, each scaled by a positive amount, add up to
    ``mesh``'s change, else None.

    ``fsdp->data`` and ``dcn.data->dcn.fsdp`` shown as proposals 1 and 2 make ``data=2 fsdp=128 | dcn data=8
    fsdp=2`` (their sum) or ``data=4 fsdp=64 | dcn data=4 fsdp=4`` (twice each) no new kind of change for a
    person, even though their own kind labels differ.
    """
    v = change_vector(baseline, mesh)
    vecs = [change_vector(baseline, m) for m in chosen]
    for i in range(len(vecs)):
        for j in range(i + 1, len(vecs)):
            if vecs[i] and vecs[j] and _positive_mix(v, vecs[i], vecs[j]):
                return i, j
    return None


def _positive_mix(v: dict[str, float], a: dict[str, float], b: dict[str, float]) -> bool:
    """``v == x * a + y * b`` exactly for some x, y > 0 (least squares on the union of coordinates)."""
    keys = sorted(set(v) | set(a) | set(b))
    va, vb, vv = ([d.get(k, 0.0) for k in keys] for d in (a, b, v))
    aa = sum(x * x for x in va)
    bb = sum(x * x for x in vb)
    ab = sum(x * y for x, y in zip(va, vb, strict=True))
    det = aa * bb - ab * ab
    if abs(det) < 1e-12:
        return False
    av = sum(x * y for x, y in zip(va, vv, strict=True))
    bv = sum(x * y for x, y in zip(vb, vv, strict=True))
    x = (av * bb - bv * ab) / det
    y = (bv * aa - av * ab) / det
    if x <= 1e-9 or y <= 1e-9:
        return False
    return all(abs(p * x + q * y - r) < 1e-6 for p, q, r in zip(va, vb, vv, strict=True))
