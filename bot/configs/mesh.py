"""The canonical device mesh every config format is translated into.

A mesh assigns the chips of a run to named parallelism axes, separately for the fast network inside a
slice/node (``ici``) and the slow one between slices/nodes (``dcn``). The product of all axis sizes is the
device count. Format-specific readers (MaxText, plain ``ici_mesh``, Megatron) translate to and from this.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.errors import ConfigError

Axis = Literal["data", "fsdp", "tensor", "sequence", "expert", "pipeline"]
AXES: tuple[Axis, ...] = ("data", "fsdp", "tensor", "sequence", "expert", "pipeline")

AXIS_HELP: dict[str, str] = {
    "data": "pure data parallelism: weights replicated, batch split, gradients all-reduced",
    "fsdp": "fully-sharded data parallelism: batch split, weights/optimizer sharded and all-gathered",
    "tensor": "tensor (model) parallelism: matmuls split across chips, activations exchanged per layer",
    "sequence": "sequence/context parallelism: the sequence split, attention keys/values exchanged",
    "expert": "expert parallelism: MoE experts placed on different chips, tokens routed by all-to-all",
    "pipeline": "pipeline parallelism: layers split into stages, micro-batches flow through them",
}


class Mesh(BaseModel):
    """Axis sizes over ICI (inside a slice/node) and DCN (across slices/nodes); missing axes are 1."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ici: dict[Axis, int] = Field(default_factory=dict, description="axis -> size inside a slice/node")
    dcn: dict[Axis, int] = Field(default_factory=dict, description="axis -> size across slices/nodes")

    def size(self, axis: Axis) -> int:
        """Total size of an axis (ICI x DCN)."""
        return self.ici.get(axis, 1) * self.dcn.get(axis, 1)

    @property
    def num_devices(self) -> int:
        """Product of every axis: the number of chips this mesh covers."""
        return math.prod(self.ici.values(), start=1) * math.prod(self.dcn.values(), start=1)

    @property
    def num_slices(self) -> int:
        """Number of slices/nodes groups (product of the DCN axes)."""
        return math.prod(self.dcn.values(), start=1)

    def sizes(self) -> dict[Axis, int]:
        """Total size per axis for every canonical axis (1 where unused)."""
        return {a: self.size(a) for a in AXES}

    def normalized(self) -> Mesh:
        """The same mesh with size-1 axes dropped, so equal meshes compare equal."""
        return Mesh(
            ici={a: v for a, v in self.ici.items() if v != 1},
            dcn={a: v for a, v in self.dcn.items() if v != 1},
        )

    def short(self) -> str:
        """Compact human form, e.g. ``fsdp=16 tensor=4 | dcn data=2``."""
        ici = " ".join(f"{a}={self.ici[a]}" for a in AXES if self.ici.get(a, 1) != 1) or "1 chip"
        dcn = " ".join(f"{a}={self.dcn[a]}" for a in AXES if self.dcn.get(a, 1) != 1)
        return f"{ici} | dcn {dcn}" if dcn else ici

    def validate_against(self, num_devices: int, *, source: str | None = None) -> None:
        """Raise :class:`ConfigError` unless the axes are positive and multiply to ``num_devices``."""
        for where, axes in (("ici", self.ici), ("dcn", self.dcn)):
            for axis, value in axes.items():
                if value < 1:
                    raise ConfigError(
                        f"axis size must be a positive integer, got {value}", source=source, field=f"{where}.{axis}"
                    )
        if self.num_devices != num_devices:
            parts = " x ".join(
                [f"{a}={v}" for a, v in self.ici.items()] + [f"dcn_{a}={v}" for a, v in self.dcn.items()]
            ) or "(empty)"
            raise ConfigError(
                f"mesh {parts} = {self.num_devices} devices, but the run has {num_devices}",
                source=source,
                field="mesh",
            )


# MaxText's create_device_mesh lays the mesh's last axes on the nearest devices; in ASAP's axes, innermost first.
# On a chip JAX shows as several devices (TPU7x: its two TensorCores) those devices sit on these axes first.
JAX_INNER_FIRST: tuple[Axis, ...] = ("expert", "tensor", "sequence", "fsdp", "pipeline", "data")


def device_count(chips: int, per_chip: int) -> str:
    """What MaxText's per-device figures multiply by, in words: ``64 chips``, or ``128 devices (64 chips x 2)`` on a
    chip JAX shows as several devices (TPU7x)."""
    return f"{chips} chips" if per_chip == 1 else f"{chips * per_chip} devices ({chips} chips x {per_chip})"


def fold_devices(mesh: Mesh, per_chip: int, *, source: str | None = None) -> Mesh:
    """A mesh over JAX devices as the mesh over chips of ``per_chip`` devices each.

    The chip's devices are taken off the innermost axes that hold them (``JAX_INNER_FIRST``): MaxText's
    ``ici_fsdp_parallelism=64 ici_data_parallelism=2`` on 64 TPU7x chips (128 devices) is fsdp 32 x data 2 over
    chips, each chip holding two neighbouring FSDP shards. ASAP prices chips: per chip the same weights shard and
    batch, and the traffic between a chip's own two devices does not leave it.
    """
    if per_chip == 1:
        return mesh
    ici, left = dict(mesh.ici), per_chip
    for axis in JAX_INNER_FIRST:
        g = math.gcd(ici.get(axis, 1), left)
        if g > 1:
            ici[axis] //= g
            left //= g
    if left != 1:
        raise ConfigError(f"the ICI mesh {mesh.short()} cannot be laid over chips of {per_chip} devices each "
                          f"(its sizes do not hold a factor of {per_chip})", source=source, field="mesh")
    return Mesh(ici=ici, dcn=dict(mesh.dcn))


def unfold_devices(mesh: Mesh, per_chip: int) -> Mesh:
    """The device mesh a chip mesh is written as (the inverse of :func:`fold_devices`): the chip's devices join
    the innermost axis in use (FSDP when every axis is 1)."""
    if per_chip == 1:
        return mesh
    ici = dict(mesh.ici)
    axis = next((a for a in JAX_INNER_FIRST if ici.get(a, 1) > 1), "fsdp")
    ici[axis] = ici.get(axis, 1) * per_chip
    return Mesh(ici=ici, dcn=dict(mesh.dcn))


def resolve_wildcard(sizes: dict[str, int], total: int, *, source: str | None = None, group: str = "ici") -> dict[str, int]:
    """Replace a single ``-1`` axis ("the rest") so that ``sizes`` multiply to ``total``.

    Raises :class:`ConfigError` naming the keys and the arithmetic when that is impossible.
    """
    wild = [k for k, v in sizes.items() if v == -1]
    bad = [k for k, v in sizes.items() if v == 0 or v < -1]
    if bad:
        raise ConfigError(
            f"axis size must be a positive integer or -1 (the rest), got {sizes[bad[0]]}", source=source, field=bad[0]
        )
    if len(wild) > 1:
        raise ConfigError(f"only one {group} axis may be -1, found {len(wild)}: {', '.join(wild)}", source=source, field=wild[1])
    known = math.prod((v for v in sizes.values() if v != -1), start=1)
    if not wild:
        return dict(sizes)
    if total % known != 0:
        raise ConfigError(
            f"{wild[0]}=-1 cannot fill the rest: {total} devices / {known} (product of the other {group} axes) "
            f"is not an integer",
            source=source,
            field=wild[0],
        )
    return {k: (total // known if v == -1 else v) for k, v in sizes.items()}
