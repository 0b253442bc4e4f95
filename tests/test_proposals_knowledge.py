"""Proposals stand on the playbooks and on history: every proposal on every sample run cites playbook
sections that exist, and an applied proposal's measured outcome flows back into the next answer."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
import yaml

from bot.analysis.analyze import analyze_run
from bot.configs.mesh import Mesh
from bot.proposals.engine import propose
from bot.proposals.models import ProposalSet
from bot.proposals.outcomes import record_run_outcome
from bot.runs.store import LocalRunStore
from knowledge.history import HistoryStore
from knowledge.history_sources.applied import record_applied
from knowledge.playbooks import slugify

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "examples" / "runs"
IDS = LocalRunStore(RUNS).list_ids()


def _anchors(path: Path) -> set[str]:
    """GitHub anchors of every heading in a markdown file, computed here independently of the reader."""
    out: set[str] = set()
    counts: dict[str, int] = {}
    fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            fence = not fence
            continue
        m = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if m and not fence:
            base = slugify(m.group(1))
            n = counts.get(base, 0)
            counts[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def assert_resolves(ref: str) -> None:
    file, _, anchor = ref.partition("#")
    path = REPO / file
    assert file.startswith("playbooks/") and path.is_file(), ref
    assert anchor and anchor in _anchors(path), ref


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh state dir: the index is built lazily by the first propose, from the playbooks alone."""
    root = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASAP_STATE_DIR", str(root))
        yield root


@cache
def _answer(rid: str) -> ProposalSet:
    run = LocalRunStore(RUNS).get(rid)
    return propose(run, analyze_run(run))


@pytest.mark.parametrize("rid", IDS)
def test_every_proposal_on_every_sample_run_cites_playbook_sections_that_exist(rid: str, state: Path) -> None:
    ps = _answer(rid)
    assert (state / "index" / "manifest.json").is_file()  # built lazily under ASAP_STATE_DIR
    assert not [n for n in ps.notes if "knowledge index" in n]
    assert ps.proposals
    for p in ps.proposals:
        play = [c for c in p.citations if c.kind == "playbook"]
        assert play, (rid, p.mesh_short)
        for c in p.citations:
            assert c.ref and c.title and c.why
            if c.kind == "playbook":
                assert_resolves(c.ref)
        refs = [c.ref for c in play]
        assert len(refs) == len(set(refs))
        # the section on the diagnosed bottleneck is always among them
        assert any(ps.bottleneck and ps.bottleneck.split("-")[0] in c.ref and "bound" in c.ref for c in play) or \
            any("host--input-bound" in r for r in refs), (rid, refs)
        if p.move is not None:
            assert p.move.citation and p.move.citation in refs  # the move's own section comes first
            assert refs[0] == p.move.citation
            assert_resolves(p.move.citation)
    for a in ps.advice:
        assert a.citation is not None
        assert_resolves(a.citation)


def test_proposals_grow_an_axis_cite_that_axis_section(state: Path) -> None:
    ps = _answer("311")  # tensor=16 -> fsdp: the FSDP section explains what FSDP sends and costs
    p = ps.proposals[0]
    assert "fsdp" in p.mesh_short and "playbooks/axes.md#fsdp-fully-sharded-data-parallelism" in [c.ref for c in p.citations]


def test_citations_survive_an_unusable_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("ASAP_STATE_DIR", str(blocker))
    run = LocalRunStore(RUNS).get("311")
    ps = propose(run, analyze_run(run))
    assert any("knowledge index" in n and "not available" in n for n in ps.notes)
    for p in ps.proposals:
        assert [c for c in p.citations if c.kind == "playbook"]
        for c in p.citations:
            assert_resolves(c.ref)


def _derived_run(runs: Path, origin: str, new: str, mesh_lines: dict[str, int], step_ms: float) -> None:
    """Run ``new``: ``origin``'s job re-run with the proposed mesh, its own measured step, derived_from origin p1."""
    shutil.copytree(RUNS / origin, runs / new)
    folder = runs / new
    cfg = (folder / "maxtext.yml").read_text()
    for key, value in mesh_lines.items():
        cfg, n = re.subn(rf"^{key}: \d+$", f"{key}: {value}", cfg, flags=re.M)
        assert n == 1
    (folder / "maxtext.yml").write_text(cfg)
    for name in ("overview_page.json", "roofline_model.json"):
        (folder / name).unlink()  # no profile step time: the measured one counts
    record = yaml.safe_load((folder / "run.yaml").read_text())
    record.update(id=new, profile=["hlo_stats.json"], derived_from={"run": origin, "proposal": 1},
                  links={"pr": f"https://github.example/acme/llm/pull/{new}"})
    record["measured"] = {"step_time_ms": step_ms}
    (folder / "run.yaml").write_text(yaml.safe_dump(record))


@pytest.fixture
def loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, LocalRunStore, HistoryStore]:
    state = tmp_path / "state"
    monkeypatch.setenv("ASAP_STATE_DIR", str(state))
    runs = tmp_path / "runs"
    shutil.copytree(RUNS / "311", runs / "311")
    _derived_run(runs, "311", "312", {"ici_fsdp_parallelism": 256, "ici_tensor_parallelism": 1}, 5100.0)
    return state, LocalRunStore(runs), HistoryStore(state)


def test_applied_outcome_flows_back_into_the_next_answer(loop: tuple[Path, LocalRunStore, HistoryStore]) -> None:
    state, store, history = loop
    a = store.get("311")
    first = propose(a, analyze_run(a))
    p1 = first.proposals[0]
    assert p1.mesh_short == "fsdp=256" and p1.kind == "tensor->fsdp"
    assert not [c for c in p1.citations if c.kind != "playbook"]  # no history yet
    # `asap apply` (or a person) records that run 312 uses proposal 1
    record_applied("312", p1, baseline_mesh=first.baseline.mesh, baseline_run_id="311",
                   baseline_step_time_ms=first.baseline.measured_step_ms, chip="tpu-v5e", chip_count=256,
                   bottleneck=first.bottleneck, link="https://github.example/acme/llm/pull/312", store=history)
    assert history.get("applied:312").outcome == "pending"  # type: ignore[union-attr]

    b = store.get("312")
    report_b = analyze_run(b)  # reading the run that used the proposal writes nothing ...
    assert history.get("applied:312").outcome == "pending"  # type: ignore[union-attr]
    assert any("asap record-outcome 312" in w for w in report_b.warnings)
    assert record_run_outcome(b, report_b, store=history) == []  # ... recording is the explicit step
    rec = history.get("applied:312")
    assert rec is not None and rec.outcome == "improved"
    assert rec.after_metrics and rec.after_metrics.step_time_ms == 5100.0
    pred = p1.predicted.step_time_ms  # type: ignore[union-attr]
    assert f"Predicted {pred:g} ms, measured 5100 ms" in rec.summary
    mtime = (state / "history.jsonl").stat().st_mtime_ns
    record_run_outcome(b, analyze_run(b), store=history)  # idempotent: the same measurement is not recorded twice
    assert (state / "history.jsonl").stat().st_mtime_ns == mtime
    assert rec.summary.count("measured 5100 ms") == 1

    again = propose(a, analyze_run(a))  # the index sees the changed history and updates lazily
    q1 = again.proposals[0]
    assert q1.mesh_short == p1.mesh_short
    hist = [c for c in q1.citations if c.kind == "history"]
    assert [c.ref for c in hist] == ["https://github.example/acme/llm/pull/312"]
    assert f"predicted {pred:g} ms, measured 5100 ms" in hist[0].why and "confidence +0.05" in hist[0].why
    effect = [r for r in q1.confidence_reasons if r.startswith("+0.05: a similar change")]
    assert effect and "helped" in effect[0] and "measured 5100 ms" in effect[0]
    assert q1.confidence == pytest.approx(min(0.95, p1.confidence + 0.05), abs=0.011)


def test_outcome_recorded_from_derived_from_alone_and_a_regression_lowers_confidence(
    loop: tuple[Path, LocalRunStore, HistoryStore], tmp_path: Path
) -> None:
    state, store, history = loop
    runs = store.root
    _derived_run(runs, "311", "313", {"ici_fsdp_parallelism": 256, "ici_tensor_parallelism": 1}, 9900.0)
    run = store.get("313")
    warnings = record_run_outcome(run, analyze_run(run), store=history)  # nobody called record_applied
    rec = history.get("applied:313")
    assert rec is not None and rec.outcome == "regressed" and rec.run_ids == ["311", "313"]
    assert rec.predicted and rec.predicted.step_time_ms < 9900.0
    assert rec.after and rec.after.mesh == Mesh(ici={"fsdp": 256})
    assert warnings == []
    a = store.get("311")
    q1 = propose(a, analyze_run(a)).proposals[0]
    assert q1.mesh_short == "fsdp=256"
    hist = [c for c in q1.citations if c.kind == "history"]
    assert hist and "outcome regressed" in hist[0].why and "confidence -0.10" in hist[0].why
    assert any(r.startswith("-0.10: a similar change") and "made it slower" in r for r in q1.confidence_reasons)


def test_derived_from_a_missing_run_or_proposal_is_a_warning_not_a_crash(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path / "state"))
    runs = tmp_path / "runs"
    shutil.copytree(RUNS / "311", runs / "311")
    _derived_run(runs, "311", "314", {"ici_fsdp_parallelism": 256, "ici_tensor_parallelism": 1}, 5000.0)
    path = runs / "314" / "run.yaml"
    rec = yaml.safe_load(path.read_text())
    rec["derived_from"] = {"run": "999", "proposal": 1}
    path.write_text(yaml.safe_dump(rec))
    run = LocalRunStore(runs).get("314")
    warnings = record_run_outcome(run, analyze_run(run))
    assert any("derived_from" in w and "999" in w and "not recorded" in w for w in warnings)
    shutil.copytree(RUNS / "204", runs / "204")  # a run with three proposals
    rec["derived_from"] = {"run": "204", "proposal": 11}  # more than `asap propose -k` can ever show
    path.write_text(yaml.safe_dump(rec))
    run = LocalRunStore(runs).get("314")
    warnings = record_run_outcome(run, analyze_run(run))
    assert any("not a proposal 11" in w and "not recorded" in w for w in warnings), warnings
    assert HistoryStore(tmp_path / "state").load() == []
    rec["derived_from"] = {"run": "311", "proposal": 0}
    path.write_text(yaml.safe_dump(rec))
    from bot.errors import AsapError

    with pytest.raises(AsapError) as err:
        LocalRunStore(runs).get("314")
    assert "derived_from" in str(err.value)


def test_cli_shows_citations_and_json_carries_them(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from bot.cli import main

    main(["propose", "311", "--no-diff"])
    out = capsys.readouterr().out
    assert "cites (playbook): playbooks/bottlenecks.md#communication-bound" in out
    main(["propose", "311", "--json"])
    data = json.loads(capsys.readouterr().out)
    first = data["proposals"][0]
    assert first["move"]["citation"] == first["citations"][0]["ref"]
    assert {c["kind"] for p in data["proposals"] for c in p["citations"]} <= {"playbook", "history", "pr", "commit"}


def test_asap_why_never_writes_history_and_record_outcome_is_the_explicit_step(
    loop: tuple[Path, LocalRunStore, HistoryStore], capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli import main

    state, store, history = loop
    main(["--runs-dir", str(store.root), "why", "312"])  # derived_from run 311 proposal 1, nothing recorded yet
    assert "asap record-outcome 312" in " ".join(capsys.readouterr().out.split())
    assert not (state / "history.jsonl").exists()  # reading wrote nothing
    main(["--runs-dir", str(store.root), "record-outcome", "312"])
    out = capsys.readouterr().out
    assert "recorded: run 312 applied proposal 1 of run 311: outcome improved" in out
    rec = history.get("applied:312")
    assert rec is not None and rec.outcome == "improved"
    with pytest.raises(SystemExit) as exc:  # a run that applied nothing has nothing to record: a clear error
        main(["--runs-dir", str(store.root), "record-outcome", "311"])
    assert exc.value.code == 2
    assert "has no derived_from" in capsys.readouterr().err
