"""LatentMoE (Nemotron 3 Super / Ultra): routed experts that run in a projected latent width.

Real material: Megatron-LM's model-argument files for NVIDIA-Nemotron-3-Super-120B-A12B and
NVIDIA-Nemotron-3-Ultra-550B-A55B (examples/post_training/modelopt/conf/nvidia/, tests/data/real/megatron/, commits
in tests/data/real/README.md), sourced by a launch line as Megatron-LM's post-training scripts do. The models' names
state their published size: 120B parameters with 12B active, and 550B with 55B active. Their vocabulary (131072) is
not in the files (the tokenizer is the checkpoint's); it is the Hugging Face config's, given here as run.yaml would.
Megatron-Core's LatentMoE (and Megatron-Bridge's flop_utils moe_layer_flops): the router reads d_model, fc1_latent_proj
projects the token to the latent, the routed experts run there, fc2_latent_proj projects back; shared experts see
d_model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.configs.detect import load_config
from bot.configs.model_dims import read_model_dims
from bot.runs.record import ModelSpec, RunRecord
from knowledge import costmodel
from knowledge.meshsearch import Mesh

REAL = Path(__file__).resolve().parent / "data" / "real" / "megatron"
VOCAB = 131072  # the Hugging Face configs' vocab_size (not in the Megatron argument files)


def _dims(tmp_path: Path, model: str) -> dict:  # type: ignore[type-arg]
    """The model arguments as a launch that sources the real file reads them."""
    args = f"NVIDIA-Nemotron-3-{model}-BF16.sh"
    (tmp_path / args).write_bytes((REAL / args).read_bytes())
    launch = tmp_path / "launch.sh"
    launch.write_text(f"#!/bin/bash\nsource {args}\ntorchrun --nproc-per-node 8 pretrain_hybrid.py ${{MODEL_ARGS}} "
                      "--tensor-model-parallel-size 1 --expert-model-parallel-size 8 --global-batch-size 64\n")
    dims = read_model_dims(load_config(launch))
    assert dims is not None and not dims.problems
    stated = dims.stated()
    stated.pop("seq_len")
    return stated


@pytest.mark.parametrize("model, latent, total, active", [
    ("Super-120B-A12B", 1024, (119e9, 122e9), (12.0e9, 13.0e9)),
    ("Ultra-550B-A55B", 2048, (545e9, 555e9), (54.5e9, 56.5e9)),
])
def test_nemotron_3_counts_the_parameters_its_name_states(tmp_path: Path, model: str, latent: int,
                                                          total: tuple[float, float],
                                                          active: tuple[float, float]) -> None:
    stated = _dims(tmp_path, model)
    assert stated["moe_latent_size"] == latent and stated["mlp_matrices"] == 2  # --squared-relu: no gate
    m = ModelSpec(**stated, vocab=VOCAB)
    assert total[0] < m.derived_params() < total[1]
    assert active[0] < m.active_params() < active[1]
    # priced at d_model instead, the same model would count several times its published size
    flat = m.model_copy(update={"moe_latent_size": None})
    assert flat.derived_params() > 3 * total[1]


def _super_run(tmp_path: Path, latent: int | None) -> RunRecord:
    spec = ModelSpec(**{**_dims(tmp_path, "Super-120B-A12B"), "moe_latent_size": latent}, vocab=VOCAB)
    return RunRecord(id="super", chip="h100", num_chips=256, num_slices=32, framework="megatron", model=spec,
                     training={"global_batch": 512, "seq_len": 8192, "micro_batch": 1})


def test_latent_tokens_are_dispatched_at_the_latent_width_and_the_answer_says_so(tmp_path: Path) -> None:
    mesh = Mesh(ici={"expert": 8}, dcn={"expert": 32})
    latent = costmodel.predict(_super_run(tmp_path, 1024), mesh)
    flat = costmodel.predict(_super_run(tmp_path, None), mesh)
    # the all-to-all carries 22 copies of a 1024-wide token instead of a 4096-wide one
    ratio = latent.breakdown_ms["comm.expert"] / flat.breakdown_ms["comm.expert"]
    assert ratio == pytest.approx(1024 / 4096, rel=0.05)
    # the experts' matmuls are a quarter as wide; the projections and shared experts stay dense
    assert latent.breakdown_ms["compute"] < 0.6 * flat.breakdown_ms["compute"]
    assert any("LatentMoE" in a and "1024-wide latent" in a for a in latent.assumptions)


def test_a_latent_size_without_experts_is_refused_by_name() -> None:
    with pytest.raises(ValidationError) as err:
        ModelSpec(layers=4, d_model=1024, d_ff=4096, heads=8, moe_latent_size=256)
    assert "moe_latent_size 256 is a MoE setting, but experts is not given" in str(err.value)
