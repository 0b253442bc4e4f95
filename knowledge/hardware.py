"""The hardware catalog: per-chip peaks (HBM, FLOP/s, interconnect) with their public sources.

The figures live in ``knowledge/data/hardware.yaml`` so they can be reviewed and extended without code;
this module validates that file and looks chips up by any of their common names.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from bot import yamlsafe
from bot.errors import AsapError, UnknownChip

CATALOG_PATH = Path(__file__).parent / "data" / "hardware.yaml"


class IntraInterconnect(BaseModel):
    """The fast network inside a slice or node (TPU ICI, GPU NVLink)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="ICI, NVLink, ...")
    link_bandwidth: PositiveFloat = Field(
        description="one-way bytes/s per link (TPU, fully connected GPU mesh) or per GPU (NVLink switch)"
    )
    links_per_chip: PositiveInt = Field(description="links leaving one chip; 1 for NVSwitch GPUs")
    topology: Literal["torus2d", "torus3d", "switch", "fullmesh"] = Field(
        description="how chips are wired: TPU torus, a switch (NVSwitch: any pattern gets the GPU's whole "
        "bandwidth), or a fully connected mesh (AMD Infinity Fabric: one link to each peer, so a group of n chips "
        "gets n-1 links)"
    )
    max_domain_chips: PositiveInt = Field(description="largest slice / NVLink domain (GB200 NVL72: the 72-GPU rack)")
    chips_per_host: PositiveInt = Field(description="chips attached to one host")
    wraparound_rule: str | None = Field(default=None, description="when torus axes have wraparound")
    collective_efficiency: float = Field(
        default=1.0, gt=0, le=1, description="achieved / datasheet bandwidth of large ring collectives (nccl-tests busbw)"
    )


class InterInterconnect(BaseModel):
    """The slow network between slices or nodes (TPU DCN, GPU InfiniBand)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    bandwidth_per_chip: PositiveFloat = Field(description="one-way bytes/s available to each chip")
    collective_efficiency: float = Field(
        default=1.0, gt=0, le=1, description="achieved / datasheet bandwidth of large collectives over this network"
    )


class Chip(BaseModel):
    """One accelerator type with the public figures the analysis uses."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str = Field(description="catalog key, e.g. tpu-v5p")
    display_name: str
    family: Literal["tpu", "gpu", "cpu"]
    aliases: tuple[str, ...] = ()
    hbm_bytes: PositiveFloat = Field(description="HBM capacity per chip, bytes")
    hbm_bandwidth: PositiveFloat = Field(description="HBM bandwidth per chip, bytes/s")
    peak_bf16_flops: PositiveFloat = Field(description="dense bf16 FLOP/s per chip")
    intra: IntraInterconnect
    inter: InterInterconnect
    peak_fp8_flops: PositiveFloat | None = Field(
        default=None, description="dense fp8 FLOP/s per chip where the chip has fp8 matmul units (H100/H200)"
    )
    peak_fp4_flops: PositiveFloat | None = Field(
        default=None, description="dense fp4 (NVFP4) FLOP/s per chip where the vendor publishes one (Blackwell); "
        "null: no published dense fp4 peak in the catalog, and an fp4 run is priced at the bf16 peak"
    )
    peak_int8_ops: PositiveFloat | None = Field(
        default=None, description="dense int8 OP/s per chip where the vendor publishes one (TPU v5e, v6e: Google "
        "Cloud's TPU pages); null: no published int8 peak in the catalog"
    )
    host_link_bandwidth: PositiveFloat | None = Field(
        default=None, description="one-way bytes/s of one chip's link to its host's memory (GPU: PCIe x16, as a "
        "pinned-memory copy achieves): what DeepSpeed ZeRO-Offload's transfers run at; null: not in the catalog, "
        "offload transfers are not priced",
    )
    matmul_efficiency: float | None = Field(
        default=None, gt=0, le=1,
        description="achieved / peak FLOP/s of large, well-shaped matmuls in training, fitted per hardware family "
        "across published tables (docs/cost-model.md); null: the cost model's default",
    )
    attention_rate_fa2: float | None = Field(
        default=None, gt=0, le=4,
        description="the attention core's rate relative to the dense matmuls' under FlashAttention-2 kernels (PyTorch "
        "trainers: SDPA's flash backend, the flash-attn 2 package), where those kernels use none of the generation's "
        "own instructions (Hopper's wgmma / TMA) and cuDNN's or FlashAttention-3's do; null: attention_rate",
    )
    attention_rate: float | None = Field(
        default=None, gt=0, le=4,
        description="achieved FLOP/s of the attention core (flash kernels, forward + backward) relative to the dense "
        "matmuls' on this chip, fitted per GPU generation across published tables with matmul_efficiency "
        "(docs/cost-model.md, 'Blackwell: attention core and GEMMs'); null: 1, the A100 / H100 fit, where the "
        "attention core's own shape factor sets its rate",
    )
    jax_devices_per_chip: int = Field(
        default=1, ge=1, le=8,
        description="devices JAX (and so MaxText's mesh sizes and per_device_batch_size) counts per chip: 2 on "
        "TPU7x, whose two TensorCores are separate devices; 1 elsewhere (v4 / v5p megacore is one device per chip)",
    )
    sources: tuple[str, ...] = Field(min_length=1, description="where the figures come from")

    @property
    def ridge_point(self) -> float:
        """Arithmetic intensity (FLOP/byte) above which an op is compute-bound on this chip."""
        return self.peak_bf16_flops / self.hbm_bandwidth


MATMUL_DTYPES = ("bf16", "fp8", "fp4", "int8")


def matmul_peak(chip: Chip, dtype: str) -> float | None:
    """The chip's dense matmul peak for ``dtype`` (bf16 | fp8 | fp4 | int8); None when the catalog has none for it."""
    if dtype == "fp8":
        return chip.peak_fp8_flops
    if dtype == "fp4":
        return chip.peak_fp4_flops
    if dtype == "int8":
        return chip.peak_int8_ops
    return chip.peak_bf16_flops


def fast_domain_chips(chip: Chip, chips_per_slice: int) -> int:
    """How many of a slice's chips share one fast (ICI / NVLink) domain.

    A slice that fits one domain is one domain. A larger one is cut into equal domains of whole hosts: the
    largest multiple of ``chips_per_host`` that divides the slice and fits ``max_domain_chips``. That is how
    GB200 NVL72 jobs are placed: Megatron-Bridge's launcher asks Slurm for segments of at most 18 compute trays
    (4 GPUs each), the largest that divides the tray count (scripts/performance/utils/executors.py), so 256 GPUs
    run as 4 NVLink domains of 64, not 3 racks of 72 and a remainder. When no such split exists the domain is
    ``max_domain_chips`` (the axes that do not divide it cross the slow network).
    """
    cap = chip.intra.max_domain_chips
    if chips_per_slice <= cap:
        return max(chips_per_slice, 1)
    host = chip.intra.chips_per_host
    for d in range(cap - cap % host, 0, -host):
        if chips_per_slice % d == 0:
            return d
    return cap


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1]
    chips: dict[str, dict[str, object]]


def _normalize(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


@lru_cache(maxsize=4)
def load_catalog(path: Path = CATALOG_PATH) -> dict[str, Chip]:
    """Read and validate the catalog file; errors name the chip and field that is wrong."""
    try:
        raw = yamlsafe.load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise AsapError(f"cannot read hardware catalog: {exc}", source=str(path)) from None
    try:
        catalog = _CatalogFile.model_validate(raw)
    except ValidationError as exc:
        raise AsapError(f"invalid hardware catalog: {exc.errors()[0]['msg']}", source=str(path)) from None
    chips: dict[str, Chip] = {}
    for key, body in catalog.chips.items():
        try:
            chips[key] = Chip.model_validate({"key": key, **body})
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise AsapError(f"{err['msg']}", source=str(path), field=f"chips.{key}.{loc}") from None
    _alias_index(chips, source=str(path))  # a name two chips answer to is a catalog error, not a silent pick
    return chips


def _alias_index(chips: dict[str, Chip], *, source: str | None = None) -> dict[str, str]:
    """Normalized key / display name / alias -> chip key; AsapError when one name belongs to two chips."""
    index: dict[str, str] = {}
    for key, chip in chips.items():
        for name in (key, chip.display_name, *chip.aliases):
            norm = _normalize(name)
            if index.get(norm, key) != key:
                raise AsapError(
                    f"hardware catalog name {name!r} belongs to both {index[norm]} and {key}",
                    source=source or str(CATALOG_PATH), field=f"chips.{key}.aliases",
                )
            index[norm] = key
    return index


@lru_cache(maxsize=4)
def _catalog_index(path: Path) -> dict[str, str]:
    """The alias index of the catalog at ``path``, built once: every prediction looks its chip up."""
    return _alias_index(load_catalog(path), source=str(path))


def get_chip(name: str) -> Chip:
    """Look a chip up by key, display name or alias ("v5p", "TPU v5p", "H100").

    An unknown name raises :class:`UnknownChip` listing the closest known names.
    """
    chips = load_catalog()
    index = _catalog_index(CATALOG_PATH)
    norm = _normalize(name)
    if norm in index:
        return chips[index[norm]]
    # Device kinds reported by runtimes carry extra words ("TPU v5p chip", "NVIDIA H100 80GB HBM3").
    for alias, key in sorted(index.items(), key=lambda kv: -len(kv[0])):
        if len(alias) >= 3 and re.search(rf"(^|-){re.escape(alias)}($|-)", norm):
            return chips[key]
    near = difflib.get_close_matches(norm, list(index), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(sorted({index[n] for n in near}))}?" if near else None
    raise UnknownChip(
        f"unknown chip {name!r}; known chips: {', '.join(sorted(chips))}",
        field="chip",
        hint=hint,
    )


def known_chips() -> list[Chip]:
    """All catalog chips, in file order."""
    return list(load_catalog().values())
