"""History: extraction from messages, a real git repository, merged PRs via PyGithub, applied outcomes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.configs.mesh import Mesh
from bot.errors import AsapError
from knowledge.cite import MeshChange, RunFacts, confidence_adjustment
from knowledge.history import HistoryRecord, HistoryStore, bottleneck_in, metrics_in, outcome_of, run_ids_in
from knowledge.history_sources.applied import prediction_error, record_applied, record_outcome
from knowledge.history_sources.git import git_history
from knowledge.history_sources.github import github_history, make_client
from tests.doubles.github_double import PR, GitHubDouble, PRFile

CFG = "# llama2-70b on v5p\nmodel_name: llama2-70b\nici_fsdp_parallelism: {fsdp}\nici_tensor_parallelism: {tp}\nremat_policy: full\n"


def test_run_ids_metrics_and_outcomes_from_messages() -> None:
    msg = "Shift TP to FSDP (run 123 -> job-456, not run out of time): step 812ms -> 640ms, MFU 38% -> 47%"
    assert run_ids_in(msg) == ["123", "456"]
    before, after = metrics_in(msg)
    assert before is not None and after is not None
    assert (before.step_time_ms, after.step_time_ms, after.mfu_percent) == (812, 640, 47)
    assert outcome_of(msg, before, after) == "improved"
    assert outcome_of("step 1.0s -> 1.2s", *metrics_in("step 1.0s -> 1.2s")) == "regressed"
    assert outcome_of("step 100ms -> 101ms", *metrics_in("step 100ms -> 101ms")) == "neutral"
    assert outcome_of("Revert fsdp=512: OOM on job 77 (RESOURCE_EXHAUSTED)", None, None) == "oom"
    assert outcome_of("tensor=3 does not divide 64 heads", None, None) == "invalid"
    assert bottleneck_in("the run was comm-bound on DCN") == "communication"
    assert bottleneck_in("nothing to see") is None


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
        _git(repo, "add", name)
    _git(repo, "commit", "-q", "-m", message)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


@pytest.fixture
def config_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    shas = {
        "add": _commit(repo, {"configs/llama.yml": CFG.format(fsdp=32, tp=8)}, "Add llama2-70b config for v5p"),
        "docs": _commit(repo, {"ci.yml": "steps: [lint]\n"}, "CI config (no sharding keys)"),
        "shift": _commit(
            repo, {"configs/llama.yml": CFG.format(fsdp=64, tp=4)},
            "Halve tensor parallelism, double FSDP\n\nrun 123 was comm-bound on v5p; run 124: step 812ms -> 640ms",
        ),
        "oom": _commit(repo, {"configs/llama.yml": CFG.format(fsdp=256, tp=1)}, "Try pure FSDP (job-125)"),
        "revert": _commit(
            repo, {"configs/llama.yml": CFG.format(fsdp=64, tp=4)},
            "Revert pure FSDP: job-125 ran out of memory (RESOURCE_EXHAUSTED) on v5p",
        ),
    }
    return repo, shas


def test_git_history_from_a_real_repository(config_repo: tuple[Path, dict[str, str]]) -> None:
    repo, shas = config_repo
    recs = {r.commit: r for r in git_history(repo)}
    assert shas["docs"] not in recs  # a YAML file without sharding keys is not history
    assert set(recs) == {shas["add"], shas["shift"], shas["oom"], shas["revert"]}
    shift = recs[shas["shift"]]
    assert shift.before is not None and shift.after is not None
    assert shift.before.mesh == Mesh(ici={"fsdp": 32, "tensor": 8})
    assert shift.after.mesh == Mesh(ici={"fsdp": 64, "tensor": 4})
    assert shift.kind == "tensor->fsdp"
    assert shift.run_ids == ["123", "124"]
    assert shift.outcome == "improved" and shift.bottleneck == "communication"
    assert (shift.chip, shift.chip_family, shift.chip_count, shift.size_band) == ("tpu-v5p", "tpu", 256, "10-100b")
    assert shift.id == f"git:{shas['shift']}:configs/llama.yml"
    assert recs[shas["revert"]].outcome == "oom"
    assert recs[shas["add"]].before is None  # file added: no before
    # incremental: known commits are skipped
    again = list(git_history(repo, skip_commits={shas["add"], shas["shift"], shas["oom"]}))
    assert [r.commit for r in again] == [shas["revert"]]


def test_git_history_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(AsapError, match="not a git repository"):
        list(git_history(tmp_path))
    with pytest.raises(AsapError, match="repository folder not found"):
        list(git_history(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    assert list(git_history(empty)) == []


def _prs() -> list[PR]:
    return [
        PR(7, "Move tensor to FSDP for llama 8B on v5p (run 300 -> run 301)",
           "Communication-bound. step 900ms -> 700ms on 64 chips.",
           files=[PRFile("configs/l8b.yml", CFG.format(fsdp=16, tp=4), CFG.format(fsdp=32, tp=2)),
                  PRFile("README.md", "old", "new")], updated_at="2024-05-03T00:00:00Z"),
        PR(8, "Try dcn fsdp", "OOM on job 302", merged=False,
           files=[PRFile("configs/l8b.yml", CFG.format(fsdp=32, tp=2), CFG.format(fsdp=64, tp=1))],
           updated_at="2024-05-04T00:00:00Z"),
        PR(9, "Add megatron config for H100 nodes", "tp=8 inside the node",
           files=[PRFile("megatron/gpt.yaml", None, "tensor_model_parallel_size: 8\npipeline_model_parallel_size: 2\n")],
           updated_at="2024-05-02T00:00:00Z"),
    ]


def test_github_history_through_pygithub(tmp_path: Path) -> None:
    with GitHubDouble({"acme/llm": _prs()}, per_page=2) as gh:
        client = make_client(None, gh.base_url, retry=False)
        recs = list(github_history("acme/llm", client=client))
        assert {r.id for r in recs} == {"github:acme/llm#7:configs/l8b.yml", "github:acme/llm#9:megatron/gpt.yaml"}
        pr7 = next(r for r in recs if r.id.endswith("#7:configs/l8b.yml"))
        assert pr7.pr_url == "https://github.example/acme/llm/pull/7"
        assert pr7.before and pr7.before.mesh == Mesh(ici={"fsdp": 16, "tensor": 4})
        assert pr7.after and pr7.after.mesh == Mesh(ici={"fsdp": 32, "tensor": 2})
        assert pr7.run_ids == ["300", "301"] and pr7.outcome == "improved" and pr7.kind == "tensor->fsdp"
        pr9 = next(r for r in recs if "#9" in r.id)
        assert pr9.before is None and pr9.after and pr9.after.keys["tensor_model_parallel_size"] == 8
        assert pr9.chip_family == "gpu"
        # the unmerged PR's files were never fetched; known PRs are skipped on the next update
        assert not any("/pulls/8/files" in p for p in gh.requests)
        gh.requests.clear()
        assert list(github_history("acme/llm", client=client, skip_numbers={7, 9})) == []
        assert not any("/files" in p for p in gh.requests)


def test_github_history_errors() -> None:
    with GitHubDouble({"acme/llm": []}) as gh:
        client = make_client(None, gh.base_url, retry=False)
        with pytest.raises(AsapError, match="GitHub answered 404"):
            list(github_history("acme/missing", client=client))
    with pytest.raises(AsapError, match="cannot reach GitHub"):
        list(github_history("acme/llm", client=make_client(None, "http://127.0.0.1:9", retry=False)))
    with pytest.raises(AsapError, match="not a repository name"):
        list(github_history("just-a-name", client=object()))


def test_history_store_round_trip_and_bad_line(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    rec = HistoryRecord(id="git:abc:c.yml", source="git", title="t", outcome="oom")
    assert store.upsert([rec]) == 1
    assert store.upsert([rec]) == 0  # unchanged: not rewritten
    assert HistoryStore(tmp_path).load() == [rec]
    (tmp_path / "history.jsonl").write_text('{"id": "x", "source": "svn", "title": "t"}\n')
    with pytest.raises(AsapError, match="line 1") as err:
        store.load()
    assert "history.jsonl" in str(err.value) and "source" in str(err.value)


def _proposal() -> dict[str, object]:
    return {"rank": 1, "mesh": {"ici": {"fsdp": 64, "tensor": 4}, "dcn": {}}, "mesh_short": "fsdp=64 tensor=4",
            "kind": "tensor->fsdp", "rationale": "Halve tensor parallelism.",
            "predicted": {"step_time_ms": 650.0, "memory_per_chip_bytes": 4.0e10},
            "move": {"id": "comm-tensor-to-fsdp", "rationale": "r", "tradeoffs": "t", "source": "s"}}


def test_applied_proposal_outcome_round_trip(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    rec = record_applied("124", _proposal(), baseline_mesh=Mesh(ici={"fsdp": 32, "tensor": 8}), baseline_run_id="123",
                         baseline_step_time_ms=812.0, chip="v5p", chip_count=256, params=7e10,
                         bottleneck="communication", store=store)
    assert rec.outcome == "pending" and rec.rule_id == "comm-tensor-to-fsdp" and rec.chip == "tpu-v5p"
    assert record_outcome("999", {"step_time_ms": 1.0}, store=store) is None  # no proposal applied to that run
    done = record_outcome("124", {"step_time_ms": 700.0}, store=store)
    assert done is not None and done.outcome == "improved"
    assert prediction_error(done) == pytest.approx(700 / 650 - 1)
    assert "Predicted 650 ms, measured 700 ms (+7.7% vs prediction)" in done.summary
    reloaded = HistoryStore(tmp_path).get("applied:124")
    assert reloaded == done
    # an OOM outcome of the same mesh lowers confidence for proposing it again, with the reason
    record_applied("125", _proposal(), baseline_mesh=Mesh(ici={"fsdp": 32, "tensor": 8}), chip="v5p",
                   chip_count=256, store=store)
    record_outcome("125", None, oom=True, store=store)
    adj = confidence_adjustment(
        MeshChange(Mesh(ici={"fsdp": 32, "tensor": 8}), Mesh(ici={"fsdp": 64, "tensor": 4})),
        RunFacts(chip="tpu-v5p", chip_family="tpu", num_chips=256), store.load(),
    )
    assert adj.delta == pytest.approx(0.05 - 0.30)
    assert any("this same mesh" in r and "ran out of memory" in r for r in adj.reasons)
    assert any("helped" in r and "-14%" in r for r in adj.reasons)


def test_similar_change_on_other_hardware_does_not_count(tmp_path: Path) -> None:
    gpu_win = HistoryRecord(id="g", source="github", title="tp->dp", kind="tensor->fsdp", outcome="improved",
                            chip_family="gpu", pr_url="https://github.example/a/b/pull/1")
    adj = confidence_adjustment(MeshChange(Mesh(ici={"tensor": 8}), Mesh(ici={"fsdp": 8})),
                                RunFacts(chip_family="tpu", num_chips=8), [gpu_win])
    assert adj.delta == 0 and adj.reasons == []
    adj = confidence_adjustment(MeshChange(Mesh(ici={"tensor": 8}), Mesh(ici={"fsdp": 8})),
                                RunFacts(chip_family="gpu", num_chips=8), [gpu_win])
    assert adj.delta == pytest.approx(0.05) and adj.citations == ["https://github.example/a/b/pull/1"]


def test_applied_bad_inputs(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    with pytest.raises(AsapError, match="needs an ID"):
        record_applied(" ", _proposal(), baseline_mesh=Mesh(ici={"fsdp": 8}), store=store)
    with pytest.raises(AsapError, match="expected a mesh"):
        record_applied("1", {"mesh": "fsdp=8"}, baseline_mesh=Mesh(ici={"fsdp": 8}), store=store)
    with pytest.raises(AsapError):
        record_applied("1", _proposal(), baseline_mesh=Mesh(ici={"fsdp": 8}), chip="tpu-v99", store=store)
