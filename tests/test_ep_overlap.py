"""Megatron-Core's expert all-to-all overlap is proposed where it is off and Megatron-Core would accept it, and refused
where Megatron-Core would not start.

Published case: Megatron-Bridge 26.04.01's Qwen3 30B-A3B row on 16 H100s (examples/eval, EP 16 over two nodes, flex
dispatcher with HybridEP, no recompute; the overlap off). Megatron-Bridge's performance skill card
(skills/nemo-mbridge-perf-moe-comm-overlap/card.yaml @ 067f987df0) measured the same model with HybridEP on 16 H100s:
-15.1% step time from ``overlap_moe_expert_parallel_comm``. Megatron-Core asserts, in
megatron/core/transformer/transformer_config.py @ d98e8a64dd: expert parallelism, the alltoall or flex dispatcher, no
full recompute / recompute_method / 'moe' in recompute_modules, at most one MTP layer, and interleaved stages with
pipelining.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_settings
from bot.configs.mesh import Mesh
from bot.proposals.critic import check_divisibility, ep_overlap_problems
from bot.proposals.moves import SettingsMove
from bot.proposals.settings import apply, expand
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_settings import settings_for_run, settings_from_config

EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"
QWEN = "mbridge-26.04.01-h100-qwen3-30b-a3b-16gpu"
DEEPSEEK = "mbridge-26.08-gb200-deepseek-v3-256gpu-mxfp8"
MOVE = SettingsMove(change="ep_overlap", direction="enable")


def _changes(cfg, settings):  # type: ignore[no-untyped-def]
    return expand(MOVE, settings=settings, config=cfg, framework="megatron", runyaml_remat=None,
                  runyaml_micro_batch=None, global_batch=None, data_parallel=1)


def test_the_overlap_is_offered_written_and_priced_on_the_published_qwen3_row() -> None:
    run = LocalRunStore(EVAL).get(QWEN)
    cfg = load_config(EVAL / QWEN / "megatron.yaml")
    settings = settings_for_run(run)
    assert settings is not None and not settings.ep_comm_overlap
    [change] = _changes(cfg, settings)
    assert change.kind == "ep-overlap" and change.needs_axis == "expert"
    assert change.config_values == {"overlap_moe_expert_parallel_comm": True}
    assert any("-15% step time on Qwen3 30B-A3B" in t for t in change.tradeoffs)
    edited = settings_from_config(parse_config(apply_settings(cfg, change.config_values), cfg.source))
    assert edited.ep_comm_overlap is True
    # the same mesh with the overlap: only the expert all-to-all moves, and it moves down
    mesh = Mesh(ici={"expert": 8}, dcn={"expert": 2})
    before = costmodel.predict(run.record, mesh, settings=settings)
    after = costmodel.predict(run.record, mesh, settings=apply(settings, change, framework="megatron"))
    assert after.breakdown_ms["comm.expert"] < 0.5 * before.breakdown_ms["comm.expert"]
    assert after.breakdown_ms["compute"] == pytest.approx(before.breakdown_ms["compute"])
    assert after.step_time_ms < before.step_time_ms


@pytest.mark.parametrize("extra", [
    "  recompute_granularity: full\n",
    "  recompute_granularity: selective\n  recompute_modules: [moe]\n",
    "  moe_token_dispatcher_type: allgather\n",
    "  overlap_moe_expert_parallel_comm: true\n",
])
def test_not_offered_where_megatron_core_would_refuse_it_or_it_is_on(extra: str) -> None:
    text = (EVAL / QWEN / "megatron.yaml").read_text()
    text = text.replace("  recompute_granularity: null\n", "").replace("  moe_token_dispatcher_type: flex\n", "")
    cfg = parse_config(text.replace("model:\n", "model:\n" + extra, 1), "megatron.yaml")
    assert _changes(cfg, settings_from_config(cfg)) == []


def test_the_critic_refuses_meshes_megatron_core_refuses_under_the_overlap() -> None:
    """Megatron-Bridge 26.08's DeepSeek-V3 GB200 recipe has the overlap on, PP 4 and a 16-stage layout."""
    run = LocalRunStore(EVAL).get(DEEPSEEK)
    settings = settings_for_run(run)
    assert settings is not None and settings.ep_comm_overlap
    record = run.record
    assert ep_overlap_problems(Mesh(ici={"expert": 64}, dcn={"pipeline": 4}), settings) == []  # the recipe's mesh
    no_ep = check_divisibility(record, Mesh(ici={"data": 64}, dcn={"pipeline": 4}), settings)
    assert not no_ep.passed and no_ep.hard and "without expert parallelism" in no_ep.reason
    # 16 stages over pipeline 16 leaves one virtual stage: no interleaving, which the overlap requires
    flat = check_divisibility(record, Mesh(ici={"expert": 16, "pipeline": 4}, dcn={"pipeline": 4}), settings)
    assert not flat.passed and flat.hard and "requires virtual_pipeline_model_parallel_size" in flat.reason
