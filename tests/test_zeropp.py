"""DeepSpeed ZeRO++ on its own tutorial config: hpZ's second weight copy and in-node backward gathers, qwZ's int8
gathers.

Fixture: ``tests/data/real/deepspeed/zeropp_tutorial_ds_config.json``, the JSON block of DeepSpeed's ZeRO++ tutorial
(docs/_tutorials/zeropp.md @ edaa7221): ZeRO-3 with ``zero_quantized_weights``, ``zero_hpz_partition_size`` 16 and
``zero_quantized_gradients``. The tutorial's model: an 18B GPT-2 (40 layers, hidden 6144, 32 heads, sequence 512,
micro-batch 1) on 4 nodes. Its nodes hold 16 V100s, which the catalog lacks; the runs here are 8-GPU A100 nodes, so
the tutorial's ``16`` spans two nodes and ``8`` (one node, "ideal is number of ranks (gpus) per node") is tested too.

ZeRO++ (Wang et al. 2023, arXiv:2306.10209): qwZ halves the weight all-gathers (int8 blocks); hpZ keeps a second copy
of the weights sharded inside each group so the backward all-gather never leaves it, at weights / group extra memory
per GPU; qgZ's quantized gradient reduction is not priced and the answer says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.configs.detect import load_config
from bot.proposals.engine import baseline_mesh
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_settings import settings_for_run

REAL = Path(__file__).resolve().parent / "data" / "real" / "deepspeed"
TUTORIAL = REAL / "zeropp_tutorial_ds_config.json"
GPT2_18B = "{name: gpt2-18b, layers: 40, d_model: 6144, d_ff: 24576, heads: 32, kv_heads: 32, vocab: 50257, mlp_matrices: 2}"
GB = 1e9


def _run(root: Path, name: str, zero: dict[str, object] | None = None):  # noqa: ANN202 - a bot.runs.store.Run
    """The tutorial's config (``zero`` overriding keys of its zero_optimization) on 4 nodes of 8 A100-80GB."""
    doc = json.loads(TUTORIAL.read_text())
    doc["zero_optimization"].update(zero or {})
    doc["zero_optimization"] = {k: v for k, v in doc["zero_optimization"].items() if v is not None}
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "ds_config.json").write_text(json.dumps(doc))
    (folder / "run.yaml").write_text(
        f"id: {name}\nchip: a100-80gb\nnum_chips: 32\nnum_slices: 4\nconfig: ds_config.json\nmodel: {GPT2_18B}\n"
        "training: {global_batch: 32, seq_len: 512, micro_batch: 1, remat: full}\n")
    return LocalRunStore(root).get(name)


def _predict(run):  # type: ignore[no-untyped-def]
    mesh, _ = baseline_mesh(run, None)
    return costmodel.predict(run.record, mesh, settings=settings_for_run(run))


def test_the_tutorial_config_is_read() -> None:
    cfg = load_config(TUTORIAL)
    assert cfg.settings["zero_stage"] == 3
    assert cfg.settings["zero_hpz_partition_size"] == 16
    assert cfg.settings["zero_quantized_weights"] is True and cfg.settings["zero_quantized_gradients"] is True


def test_hpz_adds_one_group_share_of_the_weights_per_gpu(tmp_path: Path) -> None:
    """hpZ's second copy: bf16 weights / group size more per GPU; a group twice as large holds half as much."""
    plain = _predict(_run(tmp_path, "plain", {"zero_hpz_partition_size": None}))
    node = _predict(_run(tmp_path, "node", {"zero_hpz_partition_size": 8}))
    two_nodes = _predict(_run(tmp_path, "two", {}))  # the tutorial's 16
    extra_8 = node.memory_breakdown_bytes["weights"] - plain.memory_breakdown_bytes["weights"]
    extra_16 = two_nodes.memory_breakdown_bytes["weights"] - plain.memory_breakdown_bytes["weights"]
    # 40 x 12 x 6144^2 + 2 x 50257 x 6144 = 18.7B parameters, 2 bytes each, over 8 ranks
    assert extra_8 == pytest.approx(2.0 * 18.74e9 / 8, rel=0.02)
    assert extra_16 == pytest.approx(extra_8 / 2.0, rel=1e-6)


def test_hpz_keeps_the_backward_gather_in_the_node(tmp_path: Path) -> None:
    """Without qwZ, to see hpZ alone: a group of one node's 8 GPUs gathers in backward over NVLink only; the
    tutorial's 16 (two A100 nodes) still crosses InfiniBand for half of it; no hpZ crosses it for all."""
    comm = {name: _predict(_run(tmp_path, name, {"zero_quantized_weights": False, "zero_hpz_partition_size": h}))
            .breakdown_ms["comm.fsdp"] for name, h in (("none", None), ("sixteen", 16), ("eight", 8))}
    assert comm["eight"] < comm["sixteen"] < comm["none"]
    # per micro-batch: forward gather + backward gather + reduce-scatter, each mostly over InfiniBand; a node's group
    # takes the backward gather off it: about a third of the traffic, and of what compute does not hide at least a fifth
    assert comm["eight"] <= comm["none"] * 0.8


def test_qwz_halves_the_weight_gathers(tmp_path: Path) -> None:
    bf16 = _predict(_run(tmp_path, "bf16", {"zero_quantized_weights": False, "zero_hpz_partition_size": None}))
    int8 = _predict(_run(tmp_path, "int8", {"zero_hpz_partition_size": None}))
    # two of the three passes (the weight gathers) halve and the gradient reduce-scatter does not: 2/3 of the raw
    # traffic; what compute does not hide (the breakdown) shrinks at least as much
    assert int8.breakdown_ms["comm.fsdp"] <= bf16.breakdown_ms["comm.fsdp"] * 2.0 / 3.0 + 1e-6
    assert int8.breakdown_ms["comm.fsdp"] > 0.0
    assert any("qwZ" in a and "int8" in a for a in int8.assumptions)


def test_the_answer_names_what_is_and_is_not_priced(tmp_path: Path) -> None:
    run = _run(tmp_path, "tutorial")
    notes = _predict(run).assumptions
    assert any("ZeRO++ hpZ (zero_hpz_partition_size=16)" in a for a in notes), notes
    from bot.configs.deepspeed import notes as config_notes  # what the config reader says about the file

    said = config_notes(load_config(TUTORIAL), 32, 4)
    assert any("qgZ" in n and "not priced" in n for n in said), said


def test_zeropp_below_stage_3_is_said_to_change_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path, "z2", {"stage": 2})
    pred = _predict(run)
    assert any("at ZeRO stage 2 they change nothing" in a for a in pred.assumptions), pred.assumptions
    assert pred.breakdown_ms.get("comm.fsdp", 0.0) == 0.0
