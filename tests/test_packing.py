"""Packed fine-tuning sequences are read from the config and widen the band by what attention could cost less
(knowledge/cost_packing.py).

Megatron-Bridge's 26.06 fine-tuning recipes pack SQuAD samples into each 4,096-token sequence
(``src/megatron/bridge/recipes/llama/llama3.py`` @ 63b08b397a3e: ``cfg.dataset.packed_sequence_specs.packed_sequence_size
= seq_length``); Transformer Engine then runs attention within each sample. The published LoRA row on 8 H100s
(TP 2, PP 4, FP8, GBS 32) ran at 2,643 tokens/s/GPU: a 6.20 s step. Its samples' lengths are in the packed dataset,
not the config, so ASAP keeps attention priced over the whole sequence and lowers only the band's low edge.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from bot.runs.store import LocalRunStore
from knowledge import costmodel
from tests.published_cases import EVAL, megatron_yaml_settings, predict_case

H100_LORA = "mbridge-26.06-h100-llama3-70b-lora-8gpu-fp8"


def test_the_packing_settings_of_megatron_bridge_and_nemo_are_read(tmp_path: Path) -> None:
    specs = "dataset:\n  packed_sequence_specs:\n    packed_sequence_size: 4096\n"
    assert megatron_yaml_settings(tmp_path, specs).packed_sequences is True
    assert megatron_yaml_settings(tmp_path, "dataset:\n  packed_sequence_specs: null\n").packed_sequences is False
    assert megatron_yaml_settings(tmp_path, "dataset:\n  enable_offline_packing: false\n"
                               "  offline_packing_specs:\n    packed_sequence_size: 4096\n").packed_sequences is False
    assert megatron_yaml_settings(tmp_path, "data:\n  train_ds:\n    packed_sequence: true\n").packed_sequences is True
    assert megatron_yaml_settings(tmp_path, "").packed_sequences is None


def test_the_published_lora_row_keeps_its_point_and_its_band_reaches_down_by_the_attention() -> None:
    measured_ms = 32 * 4096 / (2643 * 8) * 1000.0  # 6,200 ms
    packed = predict_case(H100_LORA)
    unpacked = predict_case(H100_LORA, packed_sequences=False)
    # the point is the upper bound for attention: unchanged
    assert packed.step_time_ms == unpacked.step_time_ms
    assert packed.step_time_high_ms == unpacked.step_time_high_ms
    # the low edge drops by the attention core's time: about a tenth of this 70B step at 4,096 tokens
    drop = (unpacked.step_time_low_ms - packed.step_time_low_ms) / unpacked.step_time_ms
    assert 0.05 < drop < 0.2, drop
    assert packed.step_time_low_ms < measured_ms < packed.step_time_high_ms
    assert any("packed fine-tuning sequences" in a and "4,096-token" in a for a in packed.assumptions)
    assert not any("packed fine-tuning" in a for a in unpacked.assumptions)


def test_run_yaml_alone_can_say_the_samples_are_packed(tmp_path: Path) -> None:
    run = yaml.safe_load((EVAL / H100_LORA / "run.yaml").read_text())
    run.update(id="r1", config=None)
    run["training"]["packed_sequences"] = True
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "run.yaml").write_text(yaml.safe_dump(run))
    record = LocalRunStore(tmp_path).get("r1").record
    mesh = predict_case(H100_LORA).mesh
    prediction = costmodel.predict(record, mesh)
    assert any("packed fine-tuning sequences" in a for a in prediction.assumptions)
