"""Critic with training settings: memory is judged with the candidate's own micro-batch / remat, tight
memory is a warning while out-of-memory beyond the band is a hard failure, and the batch must split."""

from __future__ import annotations

from pathlib import Path

from test_proposals_support import LLAMA_70B, make_run, maxtext_config

from bot.configs.mesh import Mesh
from bot.proposals.critic import check_memory, critique
from knowledge.cost_settings import settings_for_run
from knowledge.costmodel import Prediction


def _pred(used: float, low: float, cap: float = 96e9) -> Prediction:
    return Prediction(
        mesh=Mesh(ici={"fsdp": 8}), step_time_ms=1.0, step_time_low_ms=1.0, step_time_high_ms=1.0, uncertainty=0.1,
        breakdown_ms={}, exposed_comm_ms=0.0, memory_per_chip_bytes=used,
        memory_breakdown_bytes={"activations": used}, memory_capacity_bytes=cap, fits_memory=used <= 0.9 * cap,
        assumptions=[], memory_low_bytes=low, memory_high_bytes=used * 1.2,
    )


def test_memory_check_fits_tight_and_out_of_memory() -> None:
    run = None  # the memory check reads only the prediction
    ok = check_memory(run, Mesh(ici={"fsdp": 8}), _pred(80e9, 70e9))  # type: ignore[arg-type]
    assert ok.passed
    tight = check_memory(run, Mesh(ici={"fsdp": 8}), _pred(90e9, 80e9))  # type: ignore[arg-type]
    assert not tight.passed and not tight.hard and "tight" in tight.reason
    oom = check_memory(run, Mesh(ici={"fsdp": 8}), _pred(120e9, 100e9))  # type: ignore[arg-type]
    assert not oom.passed and oom.hard and "out of memory" in oom.reason


def test_critic_reads_the_runs_remat_policy_from_its_config(tmp_path: Path) -> None:
    # Llama-70B on 64 v5p chips, 4 sequences of 4096 per chip: fits with full remat, not without it.
    training = {"global_batch": 256, "seq_len": 4096}
    full = make_run(tmp_path, run_id="full", model=LLAMA_70B, training=training)
    text = maxtext_config({"fsdp": 64}, per_device_batch=4).replace("remat_policy: full", "remat_policy: none")
    none = make_run(tmp_path, run_id="none", model=LLAMA_70B, training=training, config_text=text)
    mesh = Mesh(ici={"fsdp": 64})
    assert critique(full, mesh).check("memory").passed  # type: ignore[union-attr]
    assert critique(none, mesh).check("memory").hard  # type: ignore[union-attr]
    assert not critique(none, mesh).ok
    # the same check with a proposal's settings: lighter remat on the 'full' run is judged with them
    lighter = settings_for_run(full).model_copy(update={"remat_policy": "none"})  # type: ignore[union-attr]
    assert not critique(full, mesh, settings=lighter).ok


def test_micro_batch_that_does_not_split_the_global_batch_fails_divisibility(tmp_path: Path) -> None:
    text = "model:\n  tensor_model_parallel_size: 1\n  micro_batch_size: 3\n  global_batch_size: 64\n"
    run = make_run(tmp_path, chip="h100", num_chips=8, config_text=text,
                   training={"global_batch": 64, "seq_len": 2048})
    result = critique(run, Mesh(ici={"data": 8}))
    div = result.check("divisibility")
    assert div is not None and not div.passed and "micro_batch 3" in div.reason
    fixed = settings_for_run(run).model_copy(update={"micro_batch": 4})  # type: ignore[union-attr]
    assert critique(run, Mesh(ici={"data": 8}), settings=fixed).check("divisibility").passed  # type: ignore[union-attr]
