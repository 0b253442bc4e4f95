"""MaxText's ``remat_policy: custom``: each named tensor says remat, device (kept in HBM) or offload (host memory).

MaxText's tuned recipes use it (benchmarks/maxtext_trillium_model_configs.py @ 92e59fdf, ``llama3_1_70b_8192``:
``remat_policy: custom`` with ``decoder_layer_input``, ``query_proj``, ``key_proj`` and ``value_proj`` offloaded;
base.yml: every tensor ``remat`` but ``decoder_layer_input: device``). ASAP used to read every custom policy as
``minimal``; it now reads the per-tensor keys, from a YAML or from the launch line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config
from knowledge.cost_remat import named_policy
from knowledge.cost_settings import settings_from_config
from tests.published_cases import predict_case

# The v6e recipe's overrides as a launch line (maxtext_trillium_model_configs.py @ 92e59fdf, llama3_1_70b_8192)
TRILLIUM_70B = ("python3 -m MaxText.train MaxText/configs/base.yml run_name=llama3_1_70b_8192 model_name=llama3.1-70b "
                "per_device_batch_size=5 ici_fsdp_parallelism=-1 remat_policy=custom decoder_layer_input=offload "
                "query_proj=offload key_proj=offload value_proj=offload max_target_length=8192 attention=flash\n")


def _spec(tmp_path: Path, name: str, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(text)
    s = settings_from_config(load_config(path))
    return s, named_policy(s.remat_policy or "none", source="test", tensors=s.remat_tensors)


def test_the_trillium_recipe_offloads_qkv_and_the_layer_input(tmp_path: Path) -> None:
    settings, spec = _spec(tmp_path, "run.sh", TRILLIUM_70B)
    assert settings.remat_policy == "custom"
    assert spec.offloaded == {"q", "k", "v"} and not spec.saved and spec.input_offloaded
    assert any("decoder_layer_input is offloaded" in n for n in spec.notes)


def test_an_offloaded_layer_input_leaves_hbm() -> None:
    """Llama 3.1 70B on 256 v6e at 5 x 8,192 tokens per chip (tpu-recipes' llama3_1_70b_8192, which ran on the
    32 GB chips): with every layer's input in HBM the inputs alone would be ~54 GB per chip; offloaded, the run may
    fit (not out of memory), and the activation memory drops by about the 80 layers' inputs."""
    case = "tpu-recipes-v6e-llama3.1-70b-256"
    tensors = "decoder_layer_input=offload,query_proj=offload,key_proj=offload,value_proj=offload"
    offloaded = predict_case(case)
    in_hbm = predict_case(case, remat_tensors=tensors.replace("decoder_layer_input=offload", "decoder_layer_input=device"))
    # the band's low edge (XLA fusing the loss: bf16 logits only) fits the 32 GB chip offloaded, and not in HBM
    assert offloaded.memory_low_bytes < offloaded.memory_capacity_bytes < in_hbm.memory_low_bytes
    saved = in_hbm.memory_breakdown_bytes["activations"] - offloaded.memory_breakdown_bytes["activations"]
    layer_inputs = 80 * 5 * 8192 * 8192 * 2  # layers x tokens per chip x d_model x bf16 (FSDP does not split them)
    assert saved == pytest.approx(layer_inputs * 79 / 80, rel=0.1)


def test_a_yaml_custom_policy_with_device_tensors_saves_them(tmp_path: Path) -> None:
    _, spec = _spec(tmp_path, "maxtext.yml", "ici_fsdp_parallelism: -1\nremat_policy: custom\ncontext: device\nmlpwi_0: device\n"
                                                  "mlpwi_1: device\nout_proj: offload\n")
    assert spec.saved == {"context", "mlpwi"} and spec.offloaded == {"o"} and spec.exact


def test_a_choice_maxtext_does_not_have_is_named(tmp_path: Path) -> None:
    _, spec = _spec(tmp_path, "maxtext.yml", "ici_fsdp_parallelism: -1\nremat_policy: custom\nquery_proj: hbm\n")
    assert not spec.exact and any("query_proj: 'hbm' is not remat / device / offload" in n for n in spec.notes)


@pytest.mark.parametrize(("tensors", "named"), [
    (None, "full"),  # base.yml: every named tensor rematerialized
    ("query_proj=device,key_proj=device,value_proj=device", "save_qkv_proj"),
    ("query_proj=offload,key_proj=offload,value_proj=offload", "qkv_proj_offloaded"),
])
def test_custom_prices_like_the_named_policy_it_equals(tensors: str | None, named: str) -> None:
    """On a published MaxText row (v5p 128B, fsdp 16 x tensor 8): a custom policy costs what the named policy with
    the same saved / offloaded tensors costs, in step time and memory; 'minimal' (the old reading) differs."""
    custom = predict_case("maxtext-v5p-128b-1x256", remat_policy="custom", remat_tensors=tensors)
    same = predict_case("maxtext-v5p-128b-1x256", remat_policy=named)
    assert custom.step_time_ms == pytest.approx(same.step_time_ms, rel=1e-9)
    assert custom.memory_per_chip_bytes == pytest.approx(same.memory_per_chip_bytes, rel=1e-9)
    minimal = predict_case("maxtext-v5p-128b-1x256", remat_policy="minimal")
    assert minimal.memory_per_chip_bytes != pytest.approx(custom.memory_per_chip_bytes, rel=1e-3)


def test_every_custom_key_maxtext_reads_has_a_residual_name() -> None:
    """The keys the MaxText reader collects (bot.configs.maxtext) are the ones the policy maps to ASAP's residuals,
    plus the layer input, which remat restarts from."""
    from bot.configs.maxtext import REMAT_TENSOR_KEYS
    from knowledge.cost_remat import MAXTEXT_CUSTOM_TENSORS

    assert set(REMAT_TENSOR_KEYS) == {*MAXTEXT_CUSTOM_TENSORS, "decoder_layer_input"}
