"""Memory per chip across the settings a run leaves unstated: the band the Critic judges fit against.

:func:`knowledge.cost_settings.unknown_settings` names the memory-moving settings neither the config,
run.yaml nor a documented framework default states (Megatron's distributed optimizer and sequence
parallelism, activation recompute, ...). :func:`memory_options` predicts the mesh with all of them at their
least memory-hungry option (*lean*) and at their most (*hungry*), and, when only the lean end fits, which
single unknown decides it. The Critic then says "does not fit" only when even the lean option's optimistic
edge exceeds usable memory, and "fits only with the distributed optimizer: set use_distributed_optimizer:
true" when the options straddle it (:func:`bot.proposals.critic.check_memory`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.errors import AsapError

if TYPE_CHECKING:
    from bot.configs.mesh import Mesh
    from bot.runs.record import RunRecord
    from knowledge.cost_settings import UnknownSetting


@dataclass
class MemoryOptions:
    """Predictions of one mesh with the unknown settings at either end, and what decides the fit."""

    unknowns: list[UnknownSetting]
    lean: Any  # knowledge.costmodel.Prediction, every unknown at its least memory-hungry option
    hungry: Any  # every unknown at its most memory-hungry option
    deciding: list[UnknownSetting] = field(default_factory=list)  # each alone (rest hungry) makes it fit

    @property
    def names(self) -> str:
        return ", ".join(u.words for u in self.unknowns)


def _fits(pred: Any, usable: float) -> bool:
    return float(pred.memory_per_chip_bytes) <= usable


def memory_options(
    record: RunRecord, mesh: Mesh, *, settings: Any | None, calibration: Any | None, usable: float
) -> MemoryOptions | None:
    """The lean/hungry predictions of ``mesh``; None when every memory-moving setting is stated."""
    from knowledge import costmodel
    from knowledge.cost_settings import torchtitan_run, unknown_settings, with_options

    unknowns = unknown_settings(settings, record.framework, record.training.remat if record.training else None,
                               record.training.activation_offload_layers if record.training else 0,
                               torchtitan=torchtitan_run(record.tags, settings))
    if not unknowns:
        return None
    try:
        lean = costmodel.predict(record, mesh, calibration=calibration,
                                 settings=with_options(settings, unknowns, "lean"))
        hungry = costmodel.predict(record, mesh, calibration=calibration,
                                   settings=with_options(settings, unknowns, "hungry"))
    except AsapError:
        return None
    opts = MemoryOptions(unknowns=unknowns, lean=lean, hungry=hungry)
    if _fits(lean, usable) and not _fits(hungry, usable):
        for u in unknowns:
            alone = costmodel.predict(record, mesh, calibration=calibration,
                                      settings=with_options(settings, unknowns, "lean", only=u.name))
            if _fits(alone, usable):
                opts.deciding.append(u)
    return opts


GIB = 2**30

PUBLISHED_PEAKS: tuple[tuple[str, float, float, str], ...] = (
    # (run, peak bytes that ran, HBM capacity bytes, source). torchtitan reports torch.cuda max reserved memory
    # ("Memory (GiB)") on H100s with 96 GB HBM2e; NVIDIA's "GB" for HBM are GiB (as the catalog's 80 GB parts).
    ("llama3-8b FSDP1 CP8 (seq 256K)", 84.5 * GIB, 96 * GIB,
     "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @31a17bf, Table 2"),
    ("llama3-8b FSDP2 CP4", 84.0 * GIB, 96 * GIB, "ibid., Table 2"),
    ("llama3-8b FSDP4 CP2", 84.2 * GIB, 96 * GIB, "ibid., Table 2"),
    ("llama3-8b FSDP 128 GPUs", 67.0 * GIB, 96 * GIB, "ibid., Table 3"),
    ("llama3-70b 2D (FSDP32 x TP8)", 71.9 * GIB, 96 * GIB, "ibid., Table 4"),
    ("llama3-405b 3D 1F1B (FSDP8 x TP8 x PP8)", 82.5 * GIB, 96 * GIB, "ibid., Table 5"),
    ("llama3-405b FSDP1 CP8", 84.9 * GIB, 96 * GIB,
     "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @31a17bf, Table 6"),
    ("llama3-405b FSDP2 CP4", 77.1 * GIB, 96 * GIB, "ibid., Table 6"),
)
"""Peak memory per GPU of published runs that ran: the evidence the headroom is checked against."""


def headroom_envelope() -> tuple[float, str]:
    """The largest headroom no published run that ran contradicts: 1 - max(peak / capacity), with its source.

    A headroom above this would call a published, running configuration out of memory; the cost model's
    ``DEFAULT_HEADROOM`` must stay at or below it (tests/test_unknown_settings.py checks that).
    """
    name, peak, cap, src = max(PUBLISHED_PEAKS, key=lambda r: r[1] / r[2])
    return 1.0 - peak / cap, f"{name} ran at {peak / GIB:.1f} GiB of {cap / GIB:.0f} GiB ({src})"


def headroom_words(headroom: float) -> str:
    """Why the headroom is what it is, for the Critic's reason."""
    env, where = headroom_envelope()
    return (f"{headroom:.0%} headroom for allocator fragmentation and runtime workspace; published peaks that ran "
            f"reach {1 - env:.1%} of HBM ({where})")
