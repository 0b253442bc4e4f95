"""Megatron activation offloading is read and priced: the offloaded layers' saved activations leave HBM
(knowledge/cost_act_offload.py).

Megatron-Bridge's performance recipes for Llama 3 70B with Megatron FSDP on 64 GPUs, MBS 2, 8,192 tokens
(scripts/performance/configs/llama/llama3_workload_base_configs.py @ 00b7660be0 and 21d102f5e, Apache-2.0) offload the
activations of 40 of the 80 layers on GB200 (186 GB) and 20 on GB300 (288 GB). Both rows ran (25.11 table: 4,312 and
4,520 tokens/s/GPU). Without offloading the stored activations alone are ~300 GiB per GPU.
"""

from __future__ import annotations

from pathlib import Path

from tests.published_cases import megatron_yaml_settings, predict_case

GB200 = "mbridge-25.11-gb200-llama3-70b-64gpu"
GB300 = "mbridge-25.11-gb300-llama3-70b-64gpu"


def test_megatron_cpu_offloading_settings_are_read(tmp_path: Path) -> None:
    on = "  cpu_offloading: true\n  cpu_offloading_num_layers: 40\n"
    assert megatron_yaml_settings(tmp_path, on).activation_offload_layers == 40
    assert megatron_yaml_settings(tmp_path, on + "  cpu_offloading_activations: false\n").activation_offload_layers == 0
    assert megatron_yaml_settings(tmp_path, "  cpu_offloading: false\n  cpu_offloading_num_layers: 40\n").activation_offload_layers == 0
    assert megatron_yaml_settings(tmp_path, "").activation_offload_layers is None


def test_the_recipes_offload_is_what_brings_the_70b_fsdp_rows_near_their_hbm() -> None:
    for case, layers, hbm_gib in ((GB200, 40, 173.2), (GB300, 20, 268.2)):
        with_offload = predict_case(case)
        without = predict_case(case, activation_offload_layers=0)
        # without offloading both are far beyond HBM; with the recipe's layers they land within 5% of it (the
        # recipes chose the fewest layers that fit, so the run used nearly all of HBM)
        assert without.memory_per_chip_bytes / 2**30 > 1.15 * hbm_gib
        assert abs(with_offload.memory_per_chip_bytes / 2**30 / hbm_gib - 1.0) < 0.08
        kept = (80 - layers) / 80
        ratio = with_offload.memory_breakdown_bytes["activations"] / without.memory_breakdown_bytes["activations"]
        assert abs(ratio - kept) < 0.03
        assert any(f"saved activations of {layers} layer(s)" in a and "450 GB/s" in a
                   for a in with_offload.assumptions)


def test_copies_over_nvlink_c2c_hide_behind_compute_but_not_over_a_narrow_link() -> None:
    fast = predict_case(GB200)
    assert fast.step_time_ms == predict_case(GB200, activation_offload_layers=0).step_time_ms
    from knowledge.cost_act_offload import offload_copy_seconds

    # the same copies over a PCIe-class link (50 GB/s) outlast a short compute window and are exposed
    assert offload_copy_seconds(3.0e9, 80.0, 40, 64, 5.0e10, 1.0) > 0.0
    assert offload_copy_seconds(3.0e9, 80.0, 40, 64, None, 1.0) == 0.0


def test_the_critic_refuses_what_megatron_core_refuses_beside_activation_offloading() -> None:
    """Megatron-Core's TransformerConfig (transformer_config.py @ d98e8a64dd) raises ValueError for cpu_offloading with
    pipeline parallelism and with activation recomputation. The GB200 row offloads 40 layers on FSDP 64."""
    from bot.configs.mesh import Mesh
    from bot.proposals.critic import check_divisibility, offload_problems
    from bot.runs.store import LocalRunStore
    from knowledge.cost_settings import TrainingSettings, unknown_settings
    from tests.published_cases import EVAL

    record = LocalRunStore(EVAL).get(GB200).record
    assert offload_problems(record, Mesh(ici={"fsdp": 64}), None) == []
    piped = check_divisibility(record, Mesh(ici={"fsdp": 32, "pipeline": 2}), None)
    assert not piped.passed and "refuses CPU offloading with pipeline parallelism" in piped.reason
    recompute = TrainingSettings(format="megatron", remat_policy="full", remat_key="recompute_granularity")
    assert any("recomputation" in p for p in offload_problems(record, Mesh(ici={"fsdp": 64}), recompute))
    # so recompute is not an unknown that could make a candidate fit: with offloading on it is off
    names = {u.name for u in unknown_settings(TrainingSettings(format="megatron"), "megatron", None, 40)}
    assert "remat" not in names and "remat" in {u.name for u in unknown_settings(
        TrainingSettings(format="megatron"), "megatron", None, 0)}
