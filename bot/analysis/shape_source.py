"""The training shape behind MFU, tokens/s and achieved TFLOP/s: run.yaml's, else what the run's config states.

A launch script or recipe usually states the global batch and sequence length (Megatron
``--global-batch-size`` / ``--seq-length``; MaxText ``per_device_batch_size`` x chips x accumulation and
``max_target_length``). The cost model already reads them from there (:mod:`knowledge.cost_shapes`); the
KPIs must too, or a run whose run.yaml has no ``training`` section shows MFU "—" next to a prediction
that used the very numbers MFU needs. run.yaml wins where it states a value (it is what the user wrote
down for this run); the config fills only what run.yaml leaves out, and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from bot.configs.mesh import device_count
from bot.runs.record import RunRecord, TrainingSpec

if TYPE_CHECKING:
    from bot.runs.store import Run


@dataclass(frozen=True)
class KpiShape:
    """The record the KPIs are computed from, and where its batch / sequence length and model came from."""

    record: RunRecord
    source: str | None  # "run.yaml" | "config <file>" | "run.yaml + config <file>" | None (unknown)
    note: str | None  # a sentence for the report's warnings when the config supplied a value
    model_source: str | None = None  # where the model dimensions came from (same words); None: no model known
    model_notes: tuple[str, ...] = ()  # sentences for the warnings when the config supplied model dimensions


def kpi_shape(run: Run) -> KpiShape:
    """The run's record with ``training.global_batch`` / ``seq_len`` and the model's dimensions filled from its
    config when run.yaml omits them (run.yaml wins where it states a value)."""
    record = run.record
    own_model = "run.yaml" if record.model is not None and record.model.model_fields_set - {"name"} else None
    if not record.config:
        t = record.training
        return KpiShape(record, "run.yaml" if t and t.global_batch and t.seq_len else None, None, own_model)
    # lazy: the cost-model settings reader sits above analysis; only its config reading is needed here
    from knowledge.cost_model_source import config_model
    from knowledge.cost_settings import settings_for_run

    settings = settings_for_run(run)
    if settings is None:
        t = record.training
        return KpiShape(record, "run.yaml" if t and t.global_batch and t.seq_len else None, None, own_model)
    cm = config_model(record, settings)
    shape = _training(cm.record, settings)
    return KpiShape(shape.record, shape.source, shape.note, cm.source, cm.notes)


def _training(record: RunRecord, settings: Any) -> KpiShape:
    """``record`` with the batch / sequence length its config states filled in where run.yaml omits them."""
    from knowledge.cost_shapes import config_global_batch

    t = record.training
    have_batch, have_seq = bool(t and t.global_batch), bool(t and t.seq_len)
    if have_batch and have_seq:
        return KpiShape(record, "run.yaml", None)
    batch = t.global_batch if have_batch else config_global_batch(record, settings)  # type: ignore[union-attr]
    seq = t.seq_len if have_seq else settings.seq_len  # type: ignore[union-attr]
    filled: list[str] = []
    unstated: list[str] = []
    if batch and not have_batch:
        if settings.global_batch:
            filled.append(f"global batch {batch}")
        elif settings.local_batch:  # torchtitan: local_batch_size per data-parallel rank
            filled.append(f"global batch {batch} (local batch {settings.local_batch} x data-parallel degree "
                          f"{record.num_chips // (settings.batch_divisor or 1)})")
        else:  # MaxText states it per device: per_device_batch_size x chips x gradient accumulation
            accum = f" x {settings.grad_accum} accumulation steps" if (settings.grad_accum or 1) > 1 else ""
            devices = device_count(record.num_chips, record.jax_devices_per_chip)  # JAX devices: two per TPU7x chip
            filled.append(f"global batch {batch} (per-device batch {settings.per_device_batch:g} x {devices}{accum})")
        unstated.append("training.global_batch")
    if seq and not have_seq:
        filled.append(f"sequence length {seq}")
        unstated.append("training.seq_len")
    if not filled:
        return KpiShape(record, None, None)
    name = PurePath(record.config).name
    base = t if t is not None else TrainingSpec()
    training = base.model_copy(update={"global_batch": batch, "seq_len": seq})
    source = f"config {name}" if not (have_batch or have_seq) else f"run.yaml + config {name}"
    where = "has no training section" if t is None else "does not state " + " or ".join(unstated)
    note = (f"MFU, tokens/s and achieved TFLOP/s use the {' and '.join(filled)} from the config ({name}); "
            f"run.yaml {where}")
    return KpiShape(record.model_copy(update={"training": training}), source, note)
