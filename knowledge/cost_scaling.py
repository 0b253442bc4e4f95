"""The run's own training settings carried to another chip count ("what if we had N chips").

A what-if keeps everything the config states (recompute, micro-batch, distributed optimizer, sequence
parallelism, TP overlap, attention kernel, dtypes) and the global batch and sequence length; what scales
with the chips is the data-parallel degree. Where the config states the batch per device (MaxText
``per_device_batch_size``), keeping the global batch means the per-device batch shrinks (or grows) by the
chip ratio; where it states a micro-batch (Megatron ``micro_batch_size``), the micro-batch stays and each
data-parallel rank takes fewer (or more) micro-batches per step.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.runs.record import RunRecord
from knowledge.cost_settings import TrainingSettings
from knowledge.cost_shapes import config_global_batch


@dataclass(frozen=True)
class Scaled:
    """Settings for the scaled run and the sentences that say what was kept and what scales."""

    settings: TrainingSettings | None
    kept: list[str]
    scaling: list[str]


def kept_settings(settings: TrainingSettings | None) -> list[str]:
    """The settings the config states, in words (what a scaled prediction keeps)."""
    if settings is None:
        return []
    s = settings
    out: list[str] = []
    if s.remat_key is not None:
        layers = f", {s.recompute_num_layers} layer(s)" if s.recompute_num_layers else ""
        method = f" ({s.recompute_method}{layers})" if s.recompute_method else ""
        out.append(f"recompute {s.remat_policy}{method}")
    if s.micro_batch:
        out.append(f"micro-batch {s.micro_batch}")
    if s.grad_accum:
        out.append(f"{s.grad_accum} gradient-accumulation step(s)")
    flags = (("distributed optimizer", s.distributed_optimizer), ("sequence parallel", s.sequence_parallel),
             ("TP comm overlap", s.tp_comm_overlap), ("flash attention", s.flash_attention),
             ("optimizer offload", s.optimizer_offload))
    out.extend(f"{name} {'on' if on else 'off'}" for name, on in flags if on is not None)
    if s.virtual_pipeline:
        out.append(f"virtual pipeline {s.virtual_pipeline}")
    if s.weight_dtype:
        out.append(f"weights {s.weight_dtype}")
    return out


def settings_at_chips(record: RunRecord, settings: TrainingSettings | None, chips: int) -> Scaled:
    """``settings`` (read for ``record``'s chip count) for the same run on ``chips`` chips, same global batch."""
    t = record.training
    batch = config_global_batch(record, settings) or (t.global_batch if t else None)
    seq = (t.seq_len if t else None) or (settings.seq_len if settings else None)
    scaling = [f"the global batch stays {batch} sequences" + (f" of {seq} tokens" if seq else "")
               if batch else "the global batch stays as the run states it",
               f"the data-parallel degree grows with the chips ({record.num_chips} -> {chips})"]
    if settings is None:
        return Scaled(None, [], scaling)
    kept = kept_settings(settings)
    if settings.per_device_batch and not settings.global_batch and batch:
        per_device = batch / (chips * record.jax_devices_per_chip * (settings.grad_accum or 1))
        settings = settings.model_copy(update={"global_batch": batch, "per_device_batch": per_device})
        scaling.append(f"per_device_batch_size {kept_per_device(record, batch, settings)} -> {per_device:g} "
                       "(MaxText states the batch per device)")
    elif settings.micro_batch:
        scaling.append(f"micro-batch {settings.micro_batch} kept: each data-parallel rank accumulates fewer "
                       "micro-batches per step as the chips grow")
    return Scaled(settings, kept, scaling)


def kept_per_device(record: RunRecord, batch: int, settings: TrainingSettings) -> str:
    """The run's own per-device batch, as the scaling sentence names it."""
    return f"{batch / (record.num_chips * record.jax_devices_per_chip * (settings.grad_accum or 1)):g}"
