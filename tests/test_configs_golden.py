"""Golden-file tests of config editing: the edited file must match the expected file byte for byte,
every line not holding a changed mesh value must be identical to the input, and the edited text must
parse back to the requested mesh. Hypothesis then applies random valid meshes to every golden input.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh
from bot.configs.mesh import Mesh
from bot.configs.sharding import ShardingConfig

DATA = Path(__file__).parent / "data" / "configs"
CASES = yaml.safe_load((DATA / "cases.yaml").read_text())


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(i + 1 for i, ch in enumerate(text) if ch == "\n")
    return starts


def _key_start(text: str, key) -> int:  # noqa: ANN001
    return _line_starts(text)[key.line - 1] + key.column - 1


def masked(config: ShardingConfig, drop_paths: set[str] = frozenset(), new_mappings: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """The text with every mesh value replaced by a marker, and the keys in ``drop_paths`` removed
    (keys of a whole added ``ici_mesh``/``dcn_mesh`` mapping take their line with them).

    Two texts that differ only in mesh values (plus added keys) give the same masked text.
    """
    text = config.text
    cuts: list[tuple[int, int, str]] = []
    strip_final_break = False
    dropped_lines: set[int] = set()
    for k in config.keys:
        if k.path in drop_paths and k.path.split(".")[-2:-1] and k.path.split(".")[-2] in new_mappings:
            if k.line in dropped_lines:
                continue
            dropped_lines.add(k.line)
            start = _line_starts(text)[k.line - 1]
            nl = text.find("\n", start)
            cuts.append((start, nl + 1 if nl != -1 else len(text), ""))
            strip_final_break |= nl == -1
        elif k.path in drop_paths:
            start = _key_start(text, k)
            if text[start - 2 : start] == ", ":  # added inside a flow mapping
                cuts.append((start - 2, k.end, ""))
                continue
            line_start = text.rfind("\n", 0, start) + 1
            nl = text.find("\n", k.end)
            if nl == -1:  # added as the last line of a file without a final newline
                cuts.append((line_start, len(text), ""))
                strip_final_break = True
            else:  # added as its own line
                cuts.append((line_start, nl + 1, ""))
        else:
            cuts.append((k.start, k.end, "\x00"))
    out, pos = [], 0
    for start, end, new in sorted(cuts):
        out.append(text[pos:start])
        out.append(new)
        pos = end
    out.append(text[pos:])
    result = "".join(out)
    if strip_final_break:
        result = result[:-2] if result.endswith("\r\n") else result[:-1]
    return result


def assert_only_mesh_values_changed(old: ShardingConfig, new_text: str) -> ShardingConfig:
    """Every byte outside the mesh values is unchanged, apart from whole added keys; returns the reparse."""
    new = parse_config(new_text, old.source)
    old_paths = {k.path for k in old.keys}
    added = {k.path for k in new.keys} - old_paths
    assert old_paths <= {k.path for k in new.keys}, "an edit must never delete a mesh key"
    new_mappings = set(new.mappings) - set(old.mappings)
    assert masked(new, added, new_mappings) == masked(old), "a byte outside the mesh values changed"
    # and line by line: each changed line holds a mesh value, each added line is a mesh key
    old_lines, new_lines = old.text.split("\n"), new_text.split("\n")
    mesh_lines_old = {k.line for k in old.keys}
    unchanged = [line for i, line in enumerate(old_lines, 1) if i not in mesh_lines_old]
    remaining = iter(new_lines)
    for line in unchanged:  # untouched lines appear, in order, byte-identical
        assert any(candidate == line for candidate in remaining), f"line {line!r} changed or moved"
    return new


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_golden_edit(case: dict) -> None:
    config = load_config(DATA / case["input"])
    assert config.mesh(case["devices"], case["slices"]) == Mesh(**case["before"]).normalized()

    target = Mesh(**case["after"])
    new_text = apply_mesh(config, target)

    expected = (DATA / case["expected"]).read_bytes()
    assert new_text.encode("utf-8") == expected
    new = assert_only_mesh_values_changed(config, new_text)
    got = new.mesh(target.num_devices, target.num_slices)
    if config.format == "megatron":
        assert got.sizes() == target.sizes()
    else:
        assert got == target.normalized()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_applying_the_current_mesh_changes_nothing(case: dict) -> None:
    config = load_config(DATA / case["input"])
    current = config.mesh(case["devices"], case["slices"])
    assert apply_mesh(config, current) == config.text


def test_golden_inputs_cover_all_formats_crlf_quotes_flow_and_nesting() -> None:
    configs = {c["input"]: load_config(DATA / c["input"]) for c in CASES}
    formats = {c.format for c in configs.values()}
    assert formats == {"maxtext", "ici_mesh", "megatron"}
    texts = [c.text for c in configs.values()]
    assert any("\r\n" in t for t in texts)
    assert any(k.raw.startswith(('"', "'")) for c in configs.values() for k in c.keys)
    assert any("{" in k.raw or "{" in c.text.splitlines()[k.line - 1] for c in configs.values() for k in c.keys)
    assert any("." in k.path for c in configs.values() for k in c.keys if c.format == "megatron")


# ------------------------------------------------------------------------------------ round-trip fuzzing
POW2 = st.sampled_from([1, 1, 1, 2, 2, 4, 8])
AXIS_NAMES = ["data", "fsdp", "tensor", "sequence", "expert", "pipeline"]


@st.composite
def tpu_meshes(draw: st.DrawFn) -> Mesh:
    ici = {a: draw(POW2) for a in AXIS_NAMES}
    dcn = {a: draw(st.sampled_from([1, 1, 1, 1, 2, 4])) for a in AXIS_NAMES}
    return Mesh(ici={a: v for a, v in ici.items() if v != 1}, dcn={a: v for a, v in dcn.items() if v != 1})


@st.composite
def megatron_meshes(draw: st.DrawFn) -> Mesh:
    sizes = {a: draw(POW2) for a in ("data", "tensor", "sequence", "expert", "pipeline")}
    return Mesh(ici={a: v for a, v in sizes.items() if v != 1})


TPU_INPUTS = sorted({c["input"] for c in CASES if load_config(DATA / c["input"]).format != "megatron"})
GPU_INPUTS = sorted({c["input"] for c in CASES if load_config(DATA / c["input"]).format == "megatron"})


@pytest.mark.parametrize("name", TPU_INPUTS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=tpu_meshes())
def test_random_meshes_round_trip_tpu_formats(name: str, target: Mesh) -> None:
    config = load_config(DATA / name)
    new_text = apply_mesh(config, target)
    new = assert_only_mesh_values_changed(config, new_text)
    assert new.mesh(target.num_devices, target.num_slices) == target.normalized()
    # applying again is a no-op: the edit is idempotent
    assert apply_mesh(new, target) == new_text


@pytest.mark.parametrize("name", GPU_INPUTS)
@settings(max_examples=60, deadline=None)
@given(target=megatron_meshes(), nodes_log2=st.integers(0, 3))
def test_random_meshes_round_trip_megatron(name: str, target: Mesh, nodes_log2: int) -> None:
    config = load_config(DATA / name)
    new_text = apply_mesh(config, target)
    new = assert_only_mesh_values_changed(config, new_text)
    nodes = math.gcd(2**nodes_log2, target.num_devices)
    got = new.mesh(target.num_devices, nodes)
    assert got.sizes() == target.sizes()
    assert got.num_devices == target.num_devices


# ------------------------------------------------------------------------------------------------------
# Settings edits (micro-batch, remat policy, per-device batch, accumulation) use the same splicing: the
# edited file must equal its golden byte for byte, read back the requested values, and keep its mesh.

SETTINGS_GOLDEN = Path(__file__).parent / "data" / "proposals" / "settings"
SETTINGS_CASES = {
    # CRLF, tabs, trailing spaces, a quoted string value, and a float (2.0) that stays a float (4.0, issue 13)
    "maxtext_crlf_quoted.yml": {"remat_policy": "minimal", "per_device_batch_size": 4, "gradient_accumulation_steps": 1},
    # single-quoted value with a trailing comment
    "maxtext_llama3_8b_v5p.yml": {"remat_policy": "full"},
    # nested key, plus a key the file lacks: added inside the flow mapping holding the mesh keys
    "megatron_bridge_moe_flow.yml": {"micro_batch_size": 4, "recompute_granularity": "full"},
    "megatron_lm_gpt175b.yml": {"micro_batch_size": 2, "recompute_granularity": "selective"},
    "nemo_llama2_70b.yml": {"micro_batch_size": 2},
}


@pytest.mark.parametrize("name", sorted(SETTINGS_CASES))
def test_settings_edit_matches_golden_and_reads_back(name: str) -> None:
    from bot.configs.edit import apply_settings
    from knowledge.cost_settings import all_settings

    cfg = load_config(DATA / name)
    values = SETTINGS_CASES[name]
    new = apply_settings(cfg, values)
    assert new.encode() == (SETTINGS_GOLDEN / name.replace(".yml", ".expected.yml")).read_bytes()
    edited = parse_config(new, cfg.source)
    assert [(k.key, k.value) for k in edited.keys] == [(k.key, k.value) for k in cfg.keys]  # mesh untouched
    got = all_settings(edited)
    for key, want in values.items():
        assert [v for p, v in got.items() if p.rsplit(".", 1)[-1] == key] == [want]
    # every line without a changed setting is byte-identical (CRLF endings included)
    old_lines = cfg.text.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    changed = [ln for ln in new_lines if ln not in old_lines]
    assert all(any(k in ln for k in values) for ln in changed)


def test_settings_edit_with_mesh_change_together() -> None:
    from bot.configs.edit import apply_changes

    cfg = load_config(DATA / "maxtext_llama3_8b_v5p.yml")
    mesh = cfg.mesh(64, 1)
    target = Mesh(ici={"fsdp": mesh.size("fsdp") * mesh.size("tensor")}) if mesh.size("tensor") > 1 else mesh
    new = apply_changes(cfg, target, {"remat_policy": "minimal"})
    edited = parse_config(new, cfg.source)
    assert edited.mesh(64, 1) == target.normalized()
    assert edited.setting("remat_policy") == "minimal"


def test_settings_edit_refuses_a_key_an_ici_mesh_file_lacks() -> None:
    from bot.configs.edit import apply_settings
    from bot.errors import ConfigError

    cfg = load_config(DATA / "plain_ici_only.yml")
    with pytest.raises(ConfigError) as err:
        apply_settings(cfg, {"micro_batch_size": 4})
    assert "micro_batch_size" in err.value.message
