"""Playbook moves as data (the asap-move blocks of playbooks/*.md): the bundled playbooks validate, moves transform meshes, bad rules name id and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.mesh import Mesh
from bot.errors import AsapError
from bot.proposals.kinds import distance, kind_of
from bot.proposals.moves import load_playbook, matching_rules, move_candidates


def test_bundled_playbook_validates_and_covers_every_bottleneck() -> None:
    pb = load_playbook()
    covered = {b for r in pb.rules for b in r.when.bottleneck}
    assert covered == {"compute", "hbm", "communication", "host"}
    assert all(r.source.strip() for r in pb.rules)
    host = [r for r in pb.rules if "host" in r.when.bottleneck]
    assert host and all(r.move is None for r in host)  # no mesh move for a host-bound run


def test_communication_moves_shrink_tensor_and_keep_heavy_axes_off_dcn() -> None:
    pb = load_playbook()
    base = Mesh(ici={"fsdp": 8, "tensor": 8}, dcn={"tensor": 2})
    rules = matching_rules(pb, bottleneck="communication", mesh=base, chip_family="tpu", num_slices=2, moe=False)
    cands = {c.rule.id: c.mesh for c in move_candidates(rules, base)}
    assert cands["comm-tensor-to-fsdp"] == Mesh(ici={"fsdp": 16, "tensor": 4}, dcn={"tensor": 2})
    assert cands["comm-tensor-to-fsdp-all"] == Mesh(ici={"fsdp": 64}, dcn={"tensor": 2})
    # swap: the DCN tensor factor moves onto ICI; FSDP gives up the same factor and crosses slices instead
    assert cands["comm-dcn-tensor-to-ici-fsdp"] == Mesh(ici={"fsdp": 4, "tensor": 16}, dcn={"fsdp": 2})
    assert "comm-dcn-tensor-to-ici" not in cands  # no ICI data axis to trade: the rule does not apply
    for m in cands.values():
        assert m.num_devices == base.num_devices and m.num_slices == base.num_slices
    # GPU-only rule does not match a TPU
    assert all("gpu" not in (r.when.chip_family or []) for r in rules)


def test_rules_match_on_mesh_conditions_and_chip_family() -> None:
    pb = load_playbook()
    no_tensor = Mesh(ici={"fsdp": 64})
    rules = matching_rules(pb, bottleneck="communication", mesh=no_tensor, chip_family="gpu", num_slices=1, moe=False)
    assert not move_candidates(rules, no_tensor)
    gpu = Mesh(ici={"data": 2, "tensor": 4})
    ids = {r.id for r in matching_rules(pb, bottleneck="communication", mesh=gpu, chip_family="gpu", num_slices=1, moe=False)}
    assert "comm-tensor-to-data-gpu" in ids
    assert not matching_rules(pb, bottleneck=None, mesh=gpu, chip_family="gpu", num_slices=1, moe=False)


def _write(tmp_path: Path, body: str) -> Path:
    """A playbooks folder with one playbook whose move blocks are ``body``."""
    (tmp_path / "moves.md").write_text(body, encoding="utf-8")
    return tmp_path


RULE = """# Communication

Prose that explains the moves.

```yaml asap-move
id: ok-rule
when: {bottleneck: [communication], mesh: ["tensor > 1"]}
move: {shift: {from: tensor, to: fsdp}}
rationale: r
tradeoffs: t
source: s
```

## Broken

```yaml asap-move
id: broken-rule
when: {bottleneck: [communication]%s}
move: %s
rationale: r
tradeoffs: t
source: s
```
"""


@pytest.mark.parametrize(
    ("when_extra", "move", "field_part", "msg_part"),
    [
        ("", "{shift: {from: tensor, to: fsdp}, colour: red}", "move.colour", "Extra inputs"),
        ("", "{shift: {from: tensr, to: fsdp}}", "move.shift.from", "not an axis"),
        ("", "{shift: {from: dcn.tensor, to: fsdp}}", "move.shift", "same network"),
        ("", "{shift: {from: tensor, to: fsdp, factor: 1}}", "move.shift.factor", ">= 2"),
        (', mesh: ["tensor >> 1"]', "{shift: {from: tensor, to: fsdp}}", "when.mesh", "not understood"),
        ("", "{}", "move", "exactly one"),
    ],
)
def test_bad_rule_errors_name_the_file_line_rule_id_and_field(
    tmp_path: Path, when_extra: str, move: str, field_part: str, msg_part: str
) -> None:
    folder = _write(tmp_path, RULE % (when_extra, move))
    with pytest.raises(AsapError) as exc:
        load_playbook(folder)
    assert "broken-rule" in (exc.value.field or "")
    assert field_part in (exc.value.field or "")
    assert msg_part in exc.value.message
    assert exc.value.source is not None and exc.value.source.endswith("moves.md line 16")  # the block's opening fence


def test_duplicate_ids_malformed_yaml_and_missing_folder_are_refused(tmp_path: Path) -> None:
    dup = (RULE % ("", "{shift: {from: tensor, to: fsdp}}")).replace("broken-rule", "ok-rule")
    with pytest.raises(AsapError, match="duplicate move id"):
        load_playbook(_write(tmp_path, dup))
    with pytest.raises(AsapError, match="malformed YAML"):
        load_playbook(_write(tmp_path, "# A\n```yaml asap-move\nrules: [\n```\n"))
    with pytest.raises(AsapError, match="playbooks folder not found"):
        load_playbook(tmp_path / "nope")


def test_each_rule_carries_the_citation_of_the_heading_that_explains_it(tmp_path: Path) -> None:
    pb = load_playbook(_write(tmp_path, RULE % ("", "{shift: {from: sequence, to: fsdp}}")))
    assert [(r.id, r.citation) for r in pb.rules] == [
        ("ok-rule", f"{tmp_path.name}/moves.md#communication"),
        ("broken-rule", f"{tmp_path.name}/moves.md#broken"),
    ]
    bundled = load_playbook()
    assert all(r.citation and r.citation.startswith("playbooks/") and "#" in r.citation for r in bundled.rules)


def test_editing_a_playbook_changes_the_moves_the_engine_reads(tmp_path: Path) -> None:
    folder = _write(tmp_path, RULE % ("", "{shift: {from: tensor, to: fsdp}}"))
    assert load_playbook(folder).rules[1].move.shift.to == "fsdp"  # type: ignore[union-attr]
    text = RULE % ("", "{shift: {from: tensor, to: data, factor: 4}}")
    (folder / "moves.md").write_text(text + "\n")  # size changes: the cache sees it
    assert load_playbook(folder).rules[1].move.shift.to == "data"  # type: ignore[union-attr]


def test_kind_is_the_dominant_change_and_distance_counts_factors_of_two() -> None:
    base = Mesh(ici={"fsdp": 8, "tensor": 8})
    full = Mesh(ici={"fsdp": 64})
    hybrid = Mesh(ici={"data": 2, "fsdp": 32})
    data = Mesh(ici={"data": 8, "fsdp": 8})
    assert kind_of(base, full) == kind_of(base, hybrid) == "tensor->fsdp"
    assert kind_of(base, data) == "tensor->data"
    assert kind_of(base, base) == "unchanged"
    assert kind_of(Mesh(ici={"fsdp": 64}, dcn={"fsdp": 2}), Mesh(ici={"fsdp": 64}, dcn={"data": 2})) == "dcn.fsdp->dcn.data"
    assert distance(base, full, hybrid) == pytest.approx(2.0)
    assert distance(base, full, full) == 0.0


@pytest.mark.parametrize("recipe", ["tensorwise", "delayed", "mxfp8", "blockwise", "rowwise"])
def test_a_rule_can_name_every_fp8_recipe_the_cost_model_knows(recipe: str) -> None:
    # the playbook sections' fp8_recipe tag (knowledge.playbooks.META_KEYS) and a rule's when.fp8_recipe take the same
    # words: a section tagged rowwise whose move could not say rowwise would be refused at load
    from bot.proposals.moves import When
    from knowledge.cost_fp8_recipe import RECIPES
    from knowledge.playbooks import META_KEYS

    assert recipe in RECIPES and recipe in META_KEYS["fp8_recipe"]
    assert When(bottleneck=["compute"], fp8_recipe=[recipe]).fp8_recipe == [recipe]
    with pytest.raises(ValueError):
        When(bottleneck=["compute"], fp8_recipe=["per-row"])  # type: ignore[list-item]
