"""A mesh with another data-parallel degree, carried with the micro-batch that keeps the run's global batch.

Megatron-LM refuses to start unless ``global_batch_size % (micro_batch_size x data-parallel size) == 0``
(``megatron/training/arguments.py``); torchtitan runs ``local_batch_size x`` data-parallel degree sequences per
step unless ``global_batch_size`` pins it (``train.py``, gradient accumulation since #1238). So a mesh that trades
tensor or pipeline ranks for data-parallel ones (TP 8 -> 2 on an 8B model) is only a proposal together with the
per-rank batch that splits the same global batch: Megatron's ``micro_batch_size`` the largest divisor of
global / dp not above today's, torchtitan's local batch exactly global / dp (one forward per step, no
accumulation). Without this the Critic rejected every such mesh, and the answer could not say "drop TP".

The change rides on its one mesh (``SettingsChange.only_mesh``): the edit writes the degrees and the batch key
together, and the cost model prices the mesh with that micro-batch at the run's global batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.configs.mesh import Mesh

if TYPE_CHECKING:
    from bot.proposals.settings import SettingsChange
    from bot.runs.record import RunRecord

KIND = "rebatch"


def data_parallel(mesh: Mesh) -> int:
    """Ranks the global batch is split over (data x fsdp x expert)."""
    s = mesh.sizes()
    return s["data"] * s["fsdp"] * s["expert"]


def rebatch_change(mesh: Mesh, *, record: RunRecord, settings: Any | None, config: Any | None) -> SettingsChange | None:
    """The micro-batch change that lets ``mesh`` run the same global batch, or None when ``mesh`` needs none
    (its split is whole), cannot have one (the global batch does not split over its data ranks), or the
    framework's batch is not a micro-batch that a mesh changes (MaxText's per-device batch)."""
    from bot.proposals.settings import SettingsChange, titan_words, writable_values
    from knowledge.cost_settings import TrainingSettings, key_for
    from knowledge.cost_shapes import effective_global_batch

    fmt = getattr(config, "format", None)
    if settings is None or not settings.micro_batch or fmt not in ("megatron", "torchtitan"):
        return None
    gb = effective_global_batch(record, settings)
    dp = data_parallel(mesh)
    old = int(settings.micro_batch)
    if not gb or gb % (old * dp) == 0 or gb % dp:
        return None
    per_rank = gb // dp
    if fmt == "torchtitan":
        if mesh.size("pipeline") > 1:
            return None  # the local batch splits into pipeline micro-batches: not this lever's arithmetic
        new = per_rank
        key = titan_batch_key(config)
    else:
        new = max(d for d in range(1, min(old, per_rank) + 1) if per_rank % d == 0)
        key = key_for(settings or TrainingSettings(), "micro_batch", config) or "micro_batch_size"
    values: dict[str, Any] = {key: new}
    words = (f"{key.rsplit('.', 1)[-1]} {old} -> {new} with data-parallel degree {dp}: the same global batch of "
             f"{gb} sequences ({per_rank // new} accumulation step{'s' if per_rank // new != 1 else ''})")
    return SettingsChange(
        values=(("micro_batch", new), ("global_batch", gb)),
        words=(words + titan_words(config, values),),
        tradeoffs=(f"{old // new if old % new == 0 else round(old / new, 1)}x smaller micro-batch per rank: "
                   "narrower matmuls per kernel" if new < old else "larger micro-batch per rank: more activation memory",),
        kind=KIND,
        config_values=writable_values(config, values),
        only_mesh=mesh,
    )


def titan_batch_key(config: Any) -> str:
    """The local-batch key this torchtitan file's vintage reads: ``local_batch_size`` (June 2025 on), else
    ``batch_size`` (2024 and spring 2025)."""
    from bot.configs.torchtitan import LEGACY

    if config.vintage == LEGACY or ("training.batch_size" in config.settings
                                    and "training.local_batch_size" not in config.settings):
        return "training.batch_size"
    return "training.local_batch_size"
