"""torchtitan of March 2026 on: a run's configuration is a Python function, and what the run leaves behind is the
JSON record torchtitan writes of it (``Trainer.Config.maybe_log``; bot/configs/torchtitan_json.py).

tests/data/real/torchtitan/2026-dump holds two such records produced by torchtitan's own code at pytorch/torchtitan
@ b5bcd76c (see tests/data/real/README.md): ``llama3_70b`` (TP 8, full activation checkpointing, 8 x 8,192-token
sequences per data-parallel rank) and ``deepseek_v3_16b`` (EP 8, MLA, 64 routed experts of which 6 per token, 2 shared,
one leading dense layer, per-op selective checkpointing, compiled loss). Before this reader, ASAP read neither: the
JSON went to the DeepSpeed reader and was refused for having none of DeepSpeed's keys.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_settings, config_diff
from bot.configs.mesh import Mesh
from bot.configs.torchtitan_json import DUMP
from bot.configs.torchtitan_models import LLAMA3, ffn_hidden
from bot.errors import ConfigError
from bot.proposals.moves import SettingsMove
from bot.proposals.settings import expand
from bot.runs.record import RunRecord
from knowledge import costmodel
from knowledge.cost_settings import settings_from_config

DUMPS = Path(__file__).parent / "data" / "real" / "torchtitan" / "2026-dump"
LLAMA, DSV3 = DUMPS / "llama3_70b.json", DUMPS / "deepseek_v3_16b.json"


def test_the_record_reads_as_torchtitan_with_its_degrees_in_torchtitans_rank_order() -> None:
    cfg = load_config(LLAMA)
    assert cfg.format == "torchtitan" and cfg.vintage == DUMP
    assert cfg.mesh(64, 8) == Mesh(ici={"tensor": 8}, dcn={"fsdp": 8})  # tp innermost, dp_shard -1 the rest
    moe = load_config(DSV3)
    assert moe.mesh(8, 1) == Mesh(ici={"expert": 8})  # ep 8 carved out of dp_shard 8


def test_batch_sequence_and_checkpointing_are_what_torchtitan_runs() -> None:
    st = settings_from_config(load_config(LLAMA))
    # 65,536 token slots per data-parallel rank per forward over 8,192-token sequences: 8 sequences, no PP
    assert (st.seq_len, st.local_batch, st.micro_batch, st.global_batch) == (8192, 8, 8, None)
    assert st.remat_policy == "full"  # only the base policy's fields: FullAC
    moe = settings_from_config(load_config(DSV3))
    assert (moe.seq_len, moe.local_batch, moe.remat_policy) == (4096, 4, "selective_op")  # SelectiveAC's field
    assert moe.loss_compiled  # compile.enable with components ["loss"]


def test_the_model_is_read_from_the_record_and_agrees_with_torchtitans_own_table() -> None:
    dims = settings_from_config(load_config(LLAMA)).model_dims
    assert dims is not None
    dim, layers, heads, kv, mult, multiple = LLAMA3["70B"]  # torchtitan's llama3 args (TOML era), an independent source
    assert dims.stated() == {"layers": layers, "d_model": dim, "d_ff": ffn_hidden(dim, mult, multiple),
                                  "heads": heads, "kv_heads": kv, "head_dim": dim // heads, "vocab": 128256,
                                  "mlp_matrices": 3, "seq_len": 8192, "tied_embeddings": False}
    moe = settings_from_config(load_config(DSV3)).model_dims
    assert moe is not None
    # DeepSeek-MoE 16B as torchtitan builds it: 27 layers, the first dense (10,944 wide), 64 routed experts of 1,408
    # with 6 per token and 2 shared (2,816 = 2 x 1,408), MLA with a 512 KV latent
    assert {k: v for k, v in moe.stated().items() if k in (
        "layers", "d_model", "experts", "experts_per_token", "d_ff", "shared_experts", "dense_layers", "dense_d_ff",
        "kv_lora_rank", "qk_rope_head_dim", "vocab")} == {
        "layers": 27, "d_model": 2048, "experts": 64, "experts_per_token": 6, "d_ff": 1408, "shared_experts": 2,
        "dense_layers": 1, "dense_d_ff": 10944, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "vocab": 102400}


def _record(chips: int, slices: int) -> RunRecord:
    return RunRecord.model_validate({"id": "tt", "framework": "other", "tags": ["torchtitan"], "chip": "h100",
                                     "num_chips": chips, "num_slices": slices})


def test_torchtitan_shards_the_dense_weights_over_the_expert_ranks_too() -> None:
    """dp_shard 8 holds the 8 expert ranks: FSDP2 shards attention, embeddings and the dense layer 8 ways. Pricing
    them replicated over the expert ranks called this 8-GPU config out of memory (89 GB per GPU)."""
    cfg = load_config(DSV3)
    st = settings_from_config(cfg)
    pred = costmodel.predict(_record(8, 1), cfg.mesh(8, 1), settings=st)
    assert pred.fits_memory and pred.memory_per_chip_bytes < 75e9
    # fp32 master weights of 15.7B parameters over all 8 GPUs (7.9 GB) plus two gathered layers; replicated dense
    # weights made it 12.4 GB
    assert 7.9e9 < pred.memory_breakdown_bytes["weights"] < 8.5e9


def test_a_mesh_proposal_edits_exactly_the_degrees_and_reads_back() -> None:
    cfg = load_config(LLAMA)
    target = Mesh(ici={"tensor": 4, "sequence": 2}, dcn={"fsdp": 8})
    diff = config_diff(cfg, target, None, "llama3_70b.json")
    changed = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ['-    "tensor_parallel_degree": 8,', '+    "tensor_parallel_degree": 4,',
                       '-    "context_parallel_degree": 1,', '+    "context_parallel_degree": 2,']


def test_settings_land_in_the_records_fields_and_a_policy_change_names_the_python_to_write() -> None:
    cfg = load_config(LLAMA)
    text = apply_settings(cfg, {"parallelism.enable_async_tensor_parallel": True, "compile.enable": True,
                                "training.global_batch_size": 64})
    compile_ = json.loads(text)["compile"]
    assert compile_["enable"] is True and compile_["enable_async_tensor_parallel"] is True
    assert json.loads(text)["training"]["num_tokens_per_train_step"] == 64 * 8192
    again = settings_from_config(parse_config(text, "llama3_70b.json"))
    assert again.tp_comm_overlap and again.global_batch == 64
    with pytest.raises(ConfigError, match=r"config\.activation_checkpoint = SelectiveAC\.Config\(\)") as err:
        apply_settings(cfg, {"activation_checkpoint.mode": "selective", "activation_checkpoint.selective_ac_option": "op"})
    assert "does not read" in err.value.message and err.value.field == "activation_checkpoint.mode"


@pytest.mark.parametrize(("edit", "field", "words"), [
    (lambda d: d["parallelism"].__setitem__("tensor_parallel_degree", "8"), "parallelism.tensor_parallel_degree",
     "must be a positive integer"),
    (lambda d: d["training"].__setitem__("max_context_length", 0), "training.max_context_length",
     "must be a positive integer"),
    (lambda d: d.__setitem__("activation_checkpoint", {"mode": "full"}), "activation_checkpoint",
     "fields no torchtitan policy has"),
])
def test_a_bad_record_is_one_error_naming_the_field(edit, field: str, words: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(LLAMA.read_text())
    edit(data)
    with pytest.raises(ConfigError, match=words) as err:
        parse_config(json.dumps(data, indent=2), "config.json")
    assert err.value.field == field and err.value.source == "config.json"


def test_a_run_with_only_the_record_is_answered(tmp_path: Path) -> None:
    run = tmp_path / "tt70"
    run.mkdir()
    shutil.copy(LLAMA, run / "config.json")
    (run / "run.yaml").write_text("id: tt70\nframework: other\ntags: [torchtitan]\nchip: h100\nnum_chips: 64\n"
                                  "num_slices: 8\nconfig: config.json\n")
    result = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "propose", "tt70"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "current mesh tensor=8 | dcn fsdp=8" in result.output
    assert "torchtitan does not read this record back" in result.output
    assert '"tensor_parallel_degree"' in result.output or "enable_async_tensor_parallel" in result.output


def test_apply_names_the_assignments_instead_of_opening_a_pull_request_on_the_record(tmp_path: Path) -> None:
    """A pull request editing the record would change nothing: torchtitan writes it, never reads it."""
    import subprocess

    from bot.apply import apply_proposal
    from bot.errors import AsapError
    from bot.runs.store import LocalRunStore
    from integrations.codehost.localgit import LocalGitHost

    runs = tmp_path / "runs"
    (runs / "tt70").mkdir(parents=True)
    shutil.copy(LLAMA, runs / "tt70" / "config.json")
    (runs / "tt70" / "run.yaml").write_text("id: tt70\nframework: other\ntags: [torchtitan]\nchip: h100\n"
                                            "num_chips: 64\nnum_slices: 8\nconfig: config.json\n")
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    shutil.copy(LLAMA, repo / "config.json")
    for args in (["add", "."], ["-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    with pytest.raises(AsapError, match=r"does not read back.*config\.parallelism\.\w+_degree = \d") as err:
        apply_proposal("tt70", 1, None, LocalGitHost(repo), config_path="config.json", runs=LocalRunStore(runs))
    assert err.value.field == "config_path"
    branches = subprocess.run(["git", "-C", str(repo), "branch"], check=True, capture_output=True, text=True).stdout
    assert "asap/" not in branches  # nothing was pushed


def test_the_toml_eras_moe_flavors_give_the_model_the_record_holds() -> None:
    """Two independent readings of DeepSeek-V3 16B agree field for field: torchtitan's last TOML
    (tests/data/real/torchtitan/2026/deepseek_v3_16b.toml @ 238fa99, ``name = "deepseek_v3"``, ``flavor = "16B"``,
    looked up in ASAP's copy of torchtitan's ``deepseekv3_args``) and the record torchtitan writes at b5bcd76c."""
    toml = settings_from_config(load_config(DUMPS.parent / "2026" / "deepseek_v3_16b.toml")).model_dims
    record = settings_from_config(load_config(DSV3)).model_dims
    assert toml is not None and record is not None and not toml.problems
    assert toml.stated() == record.stated()
    assert toml.stated()["experts"] == 64 and toml.stated()["dense_layers"] == 1


def test_checkpointing_proposals_name_only_the_policies_torchtitan_2026_has() -> None:
    """The 2026 SelectiveAC is per-op only (torchtitan/distributed/activation_checkpoint.py @ b5bcd76c): a record's
    run is never offered the TOML era's every-k-th-layer policy."""
    cfg = load_config(LLAMA)  # FullAC: every lighter policy is a candidate
    settings = settings_from_config(cfg)
    changes = expand(SettingsMove(change="remat", direction="lighter"), settings=settings, config=cfg,
                     framework="other", runyaml_remat=None, runyaml_micro_batch=None, global_batch=None,
                     data_parallel=8)
    names = {c.as_dict().get("remat") for c in changes}
    assert names == {"selective_op", "none"}  # the TOML era also offered selective_layer_2
