"""The BM25 knowledge index: labelled recall, filters, persistence, incremental updates, citations, CLI."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from bot.configs.mesh import Mesh
from bot.errors import AsapError
from knowledge.cite import MeshChange, RunFacts, evidence_for
from knowledge.history import HistoryRecord, HistoryStore
from knowledge.history_sources.applied import record_applied, record_outcome
from knowledge.index import Filters, KnowledgeIndex, open_index
from knowledge.playbooks import PLAYBOOKS_DIR, load_playbooks

QUERIES = Path(__file__).parent / "data" / "knowledge" / "queries.yaml"


def _records() -> list[HistoryRecord]:
    return [
        HistoryRecord(id="github:acme/llm#7:c.yml", source="github", title="Move tensor to FSDP on v5p",
                      summary="Communication-bound, step 900ms -> 700ms", kind="tensor->fsdp", outcome="improved",
                      chip="tpu-v5p", chip_family="tpu", chip_count=256, bottleneck="communication",
                      size_band="10-100b", pr_url="https://github.example/acme/llm/pull/7"),
        HistoryRecord(id="git:abc:m.yml", source="git", title="Megatron tensor parallel 8 to data parallel on H100",
                      kind="tensor->data", outcome="regressed", chip="h100-sxm", chip_family="gpu", chip_count=64,
                      bottleneck="communication", commit="abc", link="commit abc (m.yml)"),
    ]


@pytest.fixture
def index(tmp_path: Path) -> KnowledgeIndex:
    ix = KnowledgeIndex(tmp_path / "index")
    ix.update(history=_records())
    return ix


def test_labelled_queries_recall_at_5(index: KnowledgeIndex) -> None:
    queries = yaml.safe_load(QUERIES.read_text())["queries"]
    found = total = 0
    for q in queries:
        got = [h.citation for h in index.retrieve(q["q"], k=5)]
        found += sum(e in got for e in q["expect"])
        total += len(q["expect"])
    assert found / total >= 0.9, f"recall@5 {found}/{total}"


def test_every_playbook_hit_cites_an_existing_heading(index: KnowledgeIndex) -> None:
    refs = {s.ref for s in load_playbooks()}
    for q in ("tensor parallelism", "memory", "DCN", "input pipeline", "remat"):
        for h in index.retrieve(q, filters=Filters(kind="playbook"), k=5):
            assert h.citation in refs and h.file and h.anchor
            assert (PLAYBOOKS_DIR.parent / h.file).is_file()


def test_filters_restrict_by_metadata(index: KnowledgeIndex) -> None:
    tpu_only = "playbooks/bottlenecks.md#across-slices-dcn"
    q = "across slices DCN data parallelism"
    assert tpu_only in [h.citation for h in index.retrieve(q, k=10)]
    assert tpu_only not in [h.citation for h in index.retrieve(q, filters=Filters(chip_family="gpu"), k=10)]
    hist = index.retrieve("tensor parallel", filters=Filters(kind="history"), k=5)
    assert {h.citation for h in hist} == {"https://github.example/acme/llm/pull/7", "commit abc (m.yml)"}
    gpu = index.retrieve("tensor parallel", filters=Filters(kind="history", chip_family="gpu"), k=5)
    assert [h.citation for h in gpu] == ["commit abc (m.yml)"]
    big = index.retrieve("tensor", filters=Filters(kind="history", chip_count_min=128), k=5)
    assert [h.metadata["chip_count"] for h in big] == [256]
    assert index.retrieve("tensor", filters=Filters(kind="history", bottleneck="host"), k=5) == []
    with pytest.raises(ValueError):
        Filters(chip_family="fpga")  # type: ignore[arg-type]


def test_persisted_and_reopened(index: KnowledgeIndex) -> None:
    again = open_index(index.root)
    q = "pipeline bubble micro-batches"
    assert [h.citation for h in again.retrieve(q)] == [h.citation for h in index.retrieve(q)]
    assert len(again) == len(index)


def test_incremental_update_touches_only_changes(tmp_path: Path) -> None:
    books = tmp_path / "books"
    shutil.copytree(PLAYBOOKS_DIR, books, ignore=shutil.ignore_patterns("*.yaml"))
    ix = KnowledgeIndex(tmp_path / "index")
    first = ix.update(playbooks_dir=books, history=_records())
    assert first.rebuilt and first.added == first.documents
    mtime = (ix.root / "docstore.json").stat().st_mtime_ns
    same = KnowledgeIndex(ix.root).update(playbooks_dir=books, history=_records())
    assert (same.added, same.changed, same.removed, same.rebuilt) == (0, 0, 0, False)
    assert (ix.root / "docstore.json").stat().st_mtime_ns == mtime  # nothing rewritten
    text = (books / "axes.md").read_text().replace("## Expert parallelism", "## Expert parallelism\n\nZanzibar note.")
    (books / "axes.md").write_text(text)
    recs = _records()[:1] + [HistoryRecord(id="git:new:c.yml", source="git", title="Zanzibar mesh", outcome="oom")]
    upd = KnowledgeIndex(ix.root).update(playbooks_dir=books, history=recs)
    assert (upd.added, upd.changed, upd.removed, upd.rebuilt) == (1, 1, 1, True)
    hits = open_index(ix.root).retrieve("zanzibar", k=5)
    assert {h.citation for h in hits} == {"books/axes.md#expert-parallelism", "git:new:c.yml"}


def test_applied_outcome_shows_up_in_the_next_answer(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path)
    ix = KnowledgeIndex(tmp_path / "index")
    ix.update(history=store.load())
    before, after = Mesh(ici={"fsdp": 32, "tensor": 8}), Mesh(ici={"fsdp": 64, "tensor": 4})
    proposal = {"rank": 2, "mesh": {"ici": {"fsdp": 64, "tensor": 4}}, "kind": "tensor->fsdp",
                "rationale": "Halve tensor parallelism.", "predicted": {"step_time_ms": 650.0}}
    record_applied("424", proposal, baseline_mesh=before, baseline_run_id="423", baseline_step_time_ms=812.0,
                   chip="v5p", chip_count=256, bottleneck="communication", store=store,
                   link="https://github.example/acme/llm/pull/42")
    record_outcome("424", {"step_time_ms": 690.0}, store=store)
    ix.update(history=store.load())
    facts = RunFacts(chip="tpu-v5p", chip_family="tpu", num_chips=256, bottleneck="communication")
    hits = evidence_for(facts, "communication", MeshChange(before, after, rule_id="comm-tensor-to-fsdp"), index=ix)
    playbook = [h for h in hits if h.kind == "playbook"]
    history = [h for h in hits if h.kind == "history"]
    assert "playbooks/bottlenecks.md#tensor-parallelism-is-too-wide" in [h.citation for h in playbook]
    assert history and history[0].citation == "https://github.example/acme/llm/pull/42"
    assert "Predicted 650 ms, measured 690 ms" in history[0].text and history[0].metadata["outcome"] == "improved"


def test_query_errors(tmp_path: Path, index: KnowledgeIndex) -> None:
    with pytest.raises(AsapError, match="empty query"):
        index.retrieve("  ")
    with pytest.raises(AsapError, match="k must be at least 1"):
        index.retrieve("x", k=0)
    with pytest.raises(AsapError, match="no knowledge index yet") as err:
        KnowledgeIndex(tmp_path / "none").retrieve("tensor")
    assert "asap index" in str(err.value)


def test_cli_index_builds_from_a_git_repo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess

    import bot.cli.knowledge  # noqa: F401  (registers the command until bot/cli/__init__ does)
    from bot.cli import main

    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@e.com"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    for fsdp, tp, msg in ((8, 8, "start"), (16, 4, "Quokka shift: tensor to fsdp, run 9 step 500ms -> 400ms")):
        (repo / "c.yml").write_text(f"ici_fsdp_parallelism: {fsdp}\nici_tensor_parallelism: {tp}\n")
        subprocess.run(["git", "-C", str(repo), "add", "c.yml"], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", msg], check=True)
    state = tmp_path / "state"
    main(["index", "--repo", str(repo), "--state-dir", str(state)])
    out = capsys.readouterr().out
    assert "2 new or changed history records" in out and "rebuilt" in out
    main(["index", "--repo", str(repo), "--state-dir", str(state)])
    assert "0 new or changed" in capsys.readouterr().out
    hits = open_index(state / "index").retrieve("quokka", k=3)
    assert hits and hits[0].metadata["outcome"] == "improved" and hits[0].citation.startswith("commit ")
    with pytest.raises(SystemExit) as exc:
        main(["index", "--repo", str(tmp_path / "nope"), "--state-dir", str(state)])
    assert exc.value.code == 2
    assert "repository folder not found" in capsys.readouterr().err


def test_query_reader_returns_what_llamaindex_bm25_returns(index: KnowledgeIndex) -> None:
    """Queries are scored without importing LlamaIndex; the ranking must be the BM25Retriever's own."""
    from llama_index.retrievers.bm25 import BM25Retriever

    ref = BM25Retriever.from_persist_dir(str(index.root / "bm25"))
    queries = [q["q"] for q in yaml.safe_load(QUERIES.read_text())["queries"]]
    queries += ["Tensor-parallelism to FSDP on v5p, communication-bound!", "the and of", "zzzz qqqq"]
    for q in queries:
        ref.similarity_top_k = 8
        want = [(n.node.node_id, round(float(n.score), 4)) for n in ref.retrieve(q) if n.score and n.score > 0]
        got = [(h.doc_id, round(h.score, 4)) for h in index.retrieve(q, k=8)]
        assert [s for _, s in got] == [s for _, s in want], q
        cut = want[-1][1] if len(want) == 8 else -1.0  # documents tied at the cut may be either
        assert {d for d, s in got if s > cut} == {d for d, s in want if s > cut}, q


def test_ensure_index_builds_lazily_reuses_warm_and_updates_when_history_changes(tmp_path: Path) -> None:
    from knowledge.index import ensure_index

    state = tmp_path / "state"
    ix = ensure_index(state)
    assert (state / "index" / "manifest.json").is_file()
    assert ix.retrieve("pipeline bubble", k=1)[0].citation == "playbooks/axes.md#pipeline-parallelism"
    mtime = (state / "index" / "manifest.json").stat().st_mtime_ns
    assert ensure_index(state) is ix  # warm: same object, nothing rebuilt
    assert (state / "index" / "manifest.json").stat().st_mtime_ns == mtime
    HistoryStore(state).upsert([HistoryRecord(id="git:z:c.yml", source="git", title="Wombat reshard", outcome="oom",
                                              commit="z")])
    again = ensure_index(state)
    assert [h.citation for h in again.retrieve("wombat", k=3)] == ["commit z"]
    fresh_process_view = KnowledgeIndex(state / "index").load()  # another process opens what was persisted
    assert [h.citation for h in fresh_process_view.retrieve("wombat", k=3)] == ["commit z"]


def test_a_corrupt_index_is_rebuilt_by_ensure_index_and_named_by_load(tmp_path: Path) -> None:
    from knowledge.index import _OPEN, ensure_index

    state = tmp_path / "state"
    ensure_index(state)
    (state / "index" / "manifest.json").write_text("{not json")
    with pytest.raises(AsapError, match="manifest cannot be read") as err:
        KnowledgeIndex(state / "index").load()
    assert "manifest.json" in str(err.value)
    _OPEN.clear()  # as in a new process
    assert ensure_index(state).retrieve("remat", k=1)
