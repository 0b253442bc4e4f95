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

from bot.configs.common import find_by_name

# Config keys read (bot.configs.common.settings by name): Megatron-Bridge ConfigContainer
# ``dataset.packed_sequence_specs`` (``packed_sequence_size``; null when not packing) and the newer
# ``dataset.enable_offline_packing`` / ``offline_packing_specs``; NeMo 1 ``model.data.train_ds.packed_sequence``.
NAMES: tuple[str, ...] = ("packed_sequence_specs", "packed_sequence_size", "enable_offline_packing",
                          "offline_packing_specs", "packed_sequence")


def _stated(values: dict[str, Any], key: str) -> tuple[bool, Any]:
    path, value = find_by_name(values, key)
    return path is not None, value


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def packing_settings(values: dict[str, Any]) -> dict[str, Any]:
    """``{"packed_sequences": bool}`` when the config says whether it packs samples, else ``{}`` (not stated).

    A packed-sequence size (``packed_sequence_size``, or a non-null ``packed_sequence_specs``) means packing unless
    offline packing is explicitly off; ``packed_sequence`` (NeMo 1) is read as written.
    """
    has_flag, flag = _stated(values, "enable_offline_packing")
    if has_flag and not _truthy(flag):
        return {"packed_sequences": False}
    has_size, size = _stated(values, "packed_sequence_size")
    has_specs, specs = _stated(values, "packed_sequence_specs")
    has_offline, offline = _stated(values, "offline_packing_specs")
    if (has_size and size not in (None, 0, "null")) or (has_flag and _truthy(flag)):
        return {"packed_sequences": True}
    if has_specs or has_offline:
        return {"packed_sequences": specs not in (None, "null", "") or offline not in (None, "null", "")}
    has_nemo, nemo = _stated(values, "packed_sequence")
    if has_nemo:
        return {"packed_sequences": _truthy(nemo)}
    return {}


def packing_note(seq_len: int) -> str:
    """What a packed run's prediction assumes about attention (one line of the answer)."""
    return (f"packed fine-tuning sequences: samples are packed into each {seq_len:,}-token sequence and attend only "
            "within themselves; their lengths are in the packed dataset, not the config, so attention is priced over "
            "the whole sequence (the upper bound) and the step-time band's low edge takes it at almost none")
