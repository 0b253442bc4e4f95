"""Packed fine-tuning sequences: what packing changes in a step, and how a config says it packs.

Fine-tuning recipes pack several short samples into each training sequence (Megatron-Bridge
``packed_sequence_specs`` / offline packing, NeMo ``packed_sequence``) and run attention within each sample only
(Transformer Engine's THD layout with ``cu_seqlens``). The matmuls outside attention see the same tokens; the
attention core does not: a token attends to the keys of its own sample, not to the whole packed sequence.

How long the samples are lives in the packed dataset, not in the config (Megatron-Bridge's own FLOP count reads it
from the packed file, ``flop_utils.py`` ``calculate_avg_seqlen``). So ASAP keeps the attention priced over the whole
sequence, the upper bound, and the step-time band's low edge takes attention at (nearly) nothing: the band spans
what the unknown sample lengths can do, and the answer names it.
"""

from __future__ import annotations

from typing import Any

from bot.configs.common import as_bool, find_by_name, positive_int

# Config keys read (bot.configs.common.settings by name): Megatron-Bridge ConfigContainer
# ``dataset.packed_sequence_specs`` (``packed_sequence_size``; null when not packing) and the newer
# ``dataset.enable_offline_packing`` / ``offline_packing_specs``; NeMo 1 ``model.data.train_ds.packed_sequence``.
NAMES: tuple[str, ...] = ("packed_sequence_specs", "packed_sequence_size", "enable_offline_packing",
                          "offline_packing_specs", "packed_sequence")


def packing_settings(values: dict[str, Any]) -> dict[str, Any]:
    """``{"packed_sequences": bool}`` when the config says whether it packs samples, else ``{}`` (not stated).

    A packed-sequence size (``packed_sequence_size``, or a non-null ``packed_sequence_specs``) means packing unless
    offline packing is explicitly off; ``packed_sequence`` (NeMo 1) is read as written.
    """
    offline_flag = as_bool(find_by_name(values, "enable_offline_packing")[1])
    if offline_flag is not None:
        return {"packed_sequences": offline_flag}
    size_path, size = find_by_name(values, "packed_sequence_size")
    if size_path is not None and positive_int(size):
        return {"packed_sequences": True}
    specs = [find_by_name(values, k) for k in ("packed_sequence_specs", "offline_packing_specs")]
    if any(path is not None for path, _ in specs):
        return {"packed_sequences": any(value not in (None, "null", "") for _, value in specs)}
    nemo_path, nemo = find_by_name(values, "packed_sequence")
    if nemo_path is not None:
        return {"packed_sequences": bool(as_bool(nemo))}
    return {}


def packing_note(seq_len: int) -> str:
    """What a packed run's prediction assumes about attention (one line of the answer)."""
    return (f"packed fine-tuning sequences: samples are packed into each {seq_len:,}-token sequence and attend only "
            "within themselves; their lengths are in the packed dataset, not the config, so attention is priced over "
            "the whole sequence (the upper bound) and the step-time band's low edge takes it at almost none")
