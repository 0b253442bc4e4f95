"""Playbooks: every move block parses, cites an existing heading, and matches the engine's rule schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import AsapError
from knowledge.playbooks import (
    PLAYBOOKS_DIR,
    load_moves_from_playbooks,
    load_playbooks,
    move_citations,
    moves_document,
    slugify,
)


def test_every_move_parses_and_its_citation_resolves_to_a_heading() -> None:
    sections = load_playbooks()
    anchors = {(s.file, s.anchor) for s in sections}
    moves = load_moves_from_playbooks()
    assert len(moves) >= 10
    for m in moves:
        cit = m["citation"]
        assert (cit.file, cit.anchor) in anchors, f"{m['id']} cites {cit.ref}, which is no heading"
        assert (PLAYBOOKS_DIR.parent / cit.file).is_file()
        owner = next(s for s in sections if (s.file, s.anchor) == (cit.file, cit.anchor))
        assert m["id"] in owner.move_ids
        assert m["id"] in owner.text  # the move is rendered into the searchable text of its section


def test_moves_validate_against_the_proposal_engine_schema() -> None:
    moves_mod = pytest.importorskip("bot.proposals.moves")
    pb = moves_mod.Playbook.model_validate(moves_document())
    assert {r.id for r in pb.rules} == set(move_citations())


def test_one_source_the_yaml_file_is_gone_and_readme_examples_are_no_moves() -> None:
    """The engine's moves come only from the playbook markdown; the README documents the block format with
    examples that must never become moves or citable sections."""
    assert not list(PLAYBOOKS_DIR.glob("*.yaml")) and not list(PLAYBOOKS_DIR.glob("*.yml"))
    readme = (PLAYBOOKS_DIR / "README.md").read_text(encoding="utf-8")
    assert "asap-move" in readme and "id: comm-tensor-to-fsdp" in readme and "settings:" in readme
    assert all(not s.file.endswith("README.md") for s in load_playbooks())
    cit = move_citations()["comm-tensor-to-fsdp"]
    assert cit.file == "playbooks/bottlenecks.md"  # the real block, not the README example
    from bot.proposals.moves import load_playbook

    assert {r.id: r.citation for r in load_playbook().rules} == {k: v.ref for k, v in move_citations().items()}


def test_a_readme_in_any_playbooks_folder_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Format\n```yaml asap-move\nid: example\n```\n", encoding="utf-8")
    (tmp_path / "p.md").write_text("# A\n```yaml asap-move\nid: real\n```\n", encoding="utf-8")
    assert [m["id"] for m in load_moves_from_playbooks(tmp_path)] == ["real"]


def test_sections_carry_metadata_and_unique_anchors() -> None:
    sections = load_playbooks()
    refs = [s.ref for s in sections]
    assert len(refs) == len(set(refs))
    dcn = next(s for s in sections if s.anchor == "across-slices-dcn")
    assert dcn.metadata == {"bottleneck": "communication", "chip_family": "tpu", "slices": "multi"}  # inherited + own
    fsdp = next(s for s in sections if s.anchor == "fsdp-fully-sharded-data-parallelism")
    assert fsdp.metadata == {"axis": "fsdp"}
    assert dcn.heading_path == ("Sharding by bottleneck", "Communication-bound", "Across slices (DCN)")


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [("Host / input-bound", "host--input-bound"), ("Across slices (DCN)", "across-slices-dcn"),
     ("FSDP (fully sharded data parallelism)", "fsdp-fully-sharded-data-parallelism"), ("`remat_policy` & you", "remat_policy--you")],
)
def test_slugify_matches_github_anchors(heading: str, anchor: str) -> None:
    assert slugify(heading) == anchor


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "p.md").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# A\n```yaml asap-move\nid: [unclosed\n```\n", "malformed YAML in move block at line"),
        ("```yaml asap-move\nid: x\n```\n# A\n", "not under any heading"),
        ("# A\n```yaml asap-move\n- just a list\n```\n", "must be a YAML mapping with an 'id'"),
        ("# A\n```yaml asap-move\nid: x\n```\n# B\n```yaml asap-move\nid: x\n```\n", "duplicate move id 'x'"),
        ("# A\n<!-- asap: colour=red -->\n", "playbook metadata 'colour=red' not understood"),
        ("# A\n<!-- asap: bottleneck=disk -->\n", "bottleneck='disk'"),
        ("# A\n```yaml asap-move\nid: x\n", "never closed"),
        ("# A\n```yaml asap-move\nid: x\ncitation: here\n```\n", "derived from the heading"),
    ],
)
def test_bad_playbooks_name_file_and_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(AsapError) as err:
        load_moves_from_playbooks(_write(tmp_path, text))
    assert message in str(err.value)
    assert "p.md" in str(err.value)


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AsapError, match="playbooks folder not found"):
        load_playbooks(tmp_path / "nope")
