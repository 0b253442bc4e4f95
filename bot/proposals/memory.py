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
    from knowledge.cost_settings import unknown_settings, with_options

    unknowns = unknown_settings(settings, record.framework, record.training.remat if record.training else None)
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
