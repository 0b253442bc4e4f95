"""Runs in a real MLflow tracking server (SQLite backend, local artifacts), started by the test on 127.0.0.1.

A run logged the way MaxText's config/metrics and jax.profiler output would be logged (params = MaxText
keys, metrics = perf/step_time_seconds history, artifacts = tensorboard/plugins/profile/<session>/) must
answer `asap why <run name>` exactly like the same run in a local folder; Lightning/NeMo-flattened
Megatron params must give the mesh; listing pages through the server; write-back is opt-in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from store_servers import MAXTEXT_CONFIG, STEP_TIMES_S, free_port, write_maxtext_output

import bot.cli.analyze  # noqa: F401  (registers the commands)
import bot.cli.proposals  # noqa: F401  (registers record-outcome)
from bot.cli import cli
from bot.configs.detect import load_config
from bot.errors import AsapError, RunNotFound
from bot.runs.mlflow_store import MlflowRunStore
from bot.runs.open import open_runs
from bot.runs.spec import parse_store
from knowledge.cost_settings import settings_from_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def logged(mlflow_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import mlflow

    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    local = tmp_path_factory.mktemp("mlflow-src") / "base"
    write_maxtext_output(local / "llama-cpu")
    mlflow.set_tracking_uri(mlflow_server)
    experiment = f"pretrain-{os.urandom(3).hex()}"
    mlflow.set_experiment(experiment)
    with mlflow.start_run(run_name="llama-cpu") as run:
        mlflow.log_params(MAXTEXT_CONFIG)
        mlflow.set_tags({"asap.chip": "cpu", "asap.num_chips": "8"})
        for step, seconds in enumerate(STEP_TIMES_S):
            mlflow.log_metric("perf/step_time_seconds", seconds, step=step)
            mlflow.log_metric("perf/per_device_tokens_per_sec", 256 / seconds, step=step)
        mlflow.log_artifacts(str(local / "llama-cpu" / "tensorboard"), artifact_path="tensorboard")
    # NeMo's Lightning MLflow logger flattens the config with "/": a pre-flight run (no profile yet)
    with mlflow.start_run(run_name="nemo-llama3-70b") as nemo:
        mlflow.log_params({"trainer/devices": 8, "trainer/num_nodes": 4, "model/tensor_model_parallel_size": 8,
                           "model/pipeline_model_parallel_size": 2, "model/context_parallel_size": 2,
                           "model/micro_batch_size": 1, "model/global_batch_size": 512, "model/num_layers": 80,
                           "model/hidden_size": 8192, "model/ffn_hidden_size": 28672,
                           "model/num_attention_heads": 64, "model/num_query_groups": 8,
                           "model/encoder_seq_length": 16384, "model/sequence_parallel": True,
                           "model/fp8": "hybrid", "model/fp8_recipe": "tensorwise"})
        mlflow.set_tags({"asap.chip": "h100", "asap.derived_from": "311:2"})
        mlflow.log_metric("train_step_timing in s", 14.2, step=1)
    with mlflow.start_run(run_name="no-hardware"):
        mlflow.log_param("ici_fsdp_parallelism", -1)
    return {"url": mlflow_server, "experiment": experiment, "run_id": run.info.run_id,
            "nemo_id": nemo.info.run_id, "local": str(local)}


def _spec(logged: dict[str, str]) -> str:
    return f"mlflow+{logged['url']}/{logged['experiment']}"


def _why(runs: str, query: str) -> dict:
    result = CliRunner().invoke(cli, ["--runs", runs, "why", query, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_mlflow_run_answers_like_the_local_folder(logged: dict[str, str]) -> None:
    assert _why(_spec(logged), "llama-cpu") == _why(logged["local"], "llama-cpu")


def test_lookup_by_name_words_or_run_id_and_record_fields(logged: dict[str, str]) -> None:
    store = open_runs(_spec(logged))
    by_id = store.get(logged["run_id"])
    by_words = store.get("job llama-cpu")
    assert by_id.record.id == by_words.record.id == "llama-cpu"
    rec = by_id.record
    assert rec.measured and rec.measured.step_time_ms == pytest.approx(249.35)  # median after the compile step
    assert rec.measured.tokens_per_second == pytest.approx(256 / 0.24935 * 8, rel=0.01)
    assert rec.model and rec.model.d_model == 256 and rec.training and rec.training.global_batch == 16
    assert by_id.where.endswith(f"run {logged['run_id']}")


def test_lightning_flattened_megatron_params_give_the_mesh(logged: dict[str, str]) -> None:
    run = open_runs(_spec(logged)).get("nemo-llama3-70b")
    rec = run.record
    assert (rec.chip, rec.num_chips, rec.framework) == ("h100", 32, "megatron")
    assert rec.measured and rec.measured.step_time_ms == pytest.approx(14200.0)
    assert rec.derived_from and (rec.derived_from.run, rec.derived_from.proposal) == ("311", 2)
    assert rec.training and (rec.training.global_batch, rec.training.micro_batch, rec.training.seq_len) == (512, 1, 16384)
    cfg = load_config(run.path(rec.config or "", field="config"))
    mesh = cfg.mesh(rec.num_chips, rec.num_slices)
    sizes = {**mesh.ici, **mesh.dcn}
    assert sizes.get("tensor") == 8 and sizes.get("pipeline") == 2
    assert settings_from_config(cfg).fp8_recipe == "tensorwise"  # how its fp8 tensors are scaled


def test_a_run_without_hardware_facts_says_which_to_log(logged: dict[str, str]) -> None:
    with pytest.raises(AsapError) as err:
        open_runs(_spec(logged)).get("no-hardware")
    assert "asap.chip" in err.value.render() and "asap.num_chips" in err.value.render()


def test_unknown_run_lists_nearest_without_loading_all(logged: dict[str, str]) -> None:
    with pytest.raises(RunNotFound) as err:
        open_runs(_spec(logged)).get("llama")
    assert "llama-cpu" in err.value.render()


def test_listing_pages_through_the_server(logged: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(logged["url"])
    experiment = client.create_experiment(f"many-{os.urandom(3).hex()}")
    for i in range(30):
        client.create_run(experiment, run_name=f"sweep-{i:03d}", tags={"asap.chip": "tpu-v5p", "asap.num_chips": "64"})
    store = MlflowRunStore(parse_store(f"mlflow+{logged['url']}/{experiment}"))
    asked: list[int] = []
    original = store.client.search_runs

    def spy(*args: object, **kwargs: object) -> object:
        asked.append(int(kwargs["max_results"]))  # type: ignore[arg-type]
        return original(*args, **kwargs)

    monkeypatch.setattr(store.client, "search_runs", spy)
    seen: list[str] = []
    token = None
    while True:
        rows, token = store.list_page(10, token)
        seen += [r["id"] for r in rows]
        if not token:
            break
    assert len(seen) == 30 and len(set(seen)) == 30
    assert max(asked) == 10  # never more than a page per request
    result = CliRunner().invoke(cli, ["--runs", f"mlflow+{logged['url']}/{experiment}", "runs", "--limit", "25", "--json"])
    page = json.loads(result.output)
    assert len(page["runs"]) == 25 and page["next_page_token"]
    assert page["runs"][0]["chip"] == "tpu-v5p"


def test_write_back_is_opt_in(logged: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    store = MlflowRunStore(parse_store(_spec(logged)))
    run = store.get("llama-cpu")
    monkeypatch.delenv("ASAP_MLFLOW_WRITE_BACK", raising=False)
    with pytest.raises(AsapError) as err:
        store.write_back(run, {"asap.bottleneck": "communication"}, "note")
    assert "ASAP_MLFLOW_WRITE_BACK" in err.value.render()
    monkeypatch.setenv("ASAP_MLFLOW_WRITE_BACK", "1")
    store.write_back(run, {"asap.bottleneck": "communication"}, "ASAP: communication-bound")
    tags = MlflowClient(logged["url"]).get_run(logged["run_id"]).data.tags
    assert tags["asap.bottleneck"] == "communication" and tags["mlflow.note.content"] == "ASAP: communication-bound"
    # the CLI's explicit step: asap why RUN --write-back records the computed diagnosis
    MlflowClient(logged["url"]).set_tag(logged["run_id"], "asap.bottleneck", "unknown")
    result = CliRunner().invoke(cli, ["--runs", _spec(logged), "why", "llama-cpu", "--write-back", "--json"])
    assert result.exit_code == 0, result.output
    tags = MlflowClient(logged["url"]).get_run(logged["run_id"]).data.tags
    assert tags["asap.bottleneck"] == json.loads(result.output)["diagnosis"]["bottleneck"] == "communication"
    assert tags["mlflow.note.content"].startswith("ASAP: ")


def test_a_server_that_is_down_is_named(tmp_path: Path) -> None:
    chain = open_runs(f"mlflow+http://127.0.0.1:{free_port()}/x")
    with pytest.raises(RunNotFound) as err:
        chain.get("llama-cpu")
    assert "unreachable" in err.value.render() and "mlflow+http://127.0.0.1" in err.value.render()


def test_outcome_of_an_mlflow_run_links_to_its_origin_in_another_store(logged: dict[str, str], tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """asap.derived_from=311:2 on an MLflow run names run 311 wherever the team keeps it (here: a folder store
    after the MLflow one); record-outcome finds it there and records predicted vs measured."""
    from store_servers import REPO

    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path / "state"))
    stores = f"{_spec(logged)},{REPO / 'examples' / 'runs'}"
    result = CliRunner().invoke(cli, ["--runs", stores, "record-outcome", "nemo-llama3-70b"])
    assert result.exit_code == 0, result.output
    assert "recorded: run nemo-llama3-70b applied proposal 2 of run 311" in " ".join(result.output.split())
    assert "14200 ms" in result.output  # the MLflow run's measured step (NeMo's train_step_timing in s)
