"""Hypothesis fuzzing of the config reader: any text, and any YAML-able mapping built from the real key
names and hostile values, gives a ShardingConfig or a ConfigError, never another exception; and any
config that parses either resolves to a valid mesh or explains why not with a ConfigError.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.configs import maxtext, megatron, plainmesh
from bot.configs.detect import parse_config
from bot.configs.edit import apply_mesh
from bot.configs.mesh import Mesh
from bot.configs.sharding import ShardingConfig
from bot.errors import ConfigError

KEY_NAMES = list(maxtext.KEYS + megatron.KEYS + plainmesh.KEYS + tuple(plainmesh.AXIS_OF)) + [
    "model", "micro_batch_size", "remat_policy", "sequence_parallel", "<<", "other"
]
SCALARS = st.one_of(
    st.integers(-3, 70),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["-1", "4", " 8", "0x10", "1_000", "~", "null", "yes"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(KEY_NAMES), inner, max_size=4),
    ),
    max_leaves=12,
)
DOCS = st.dictionaries(st.one_of(st.sampled_from(KEY_NAMES), st.text(max_size=6)), VALUES, max_size=8)


def check(text: str) -> ShardingConfig | None:
    try:
        return parse_config(text, "fuzz.yml")
    except ConfigError as exc:
        assert exc.message and exc.source == "fuzz.yml"
        return None


def resolve_everywhere(config: ShardingConfig, devices: int, slices: int) -> None:
    try:
        m = config.mesh(devices, slices)
    except ConfigError:
        return
    assert m.num_devices == devices
    assert all(v >= 1 for v in list(m.ici.values()) + list(m.dcn.values()))
    config.notes(devices, slices)  # notes never fail once the mesh resolves
    # and re-applying the resolved mesh is a no-op edit
    assert apply_mesh(config, m) == config.text


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text: str) -> None:
    check(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ici_mesh_dcn_parallelism{}[]:,-1248 \n\r\t#'\"&*!<>|")), max_size=200))
def test_yaml_like_text_never_crashes(text: str) -> None:
    check(text)


@settings(max_examples=300, deadline=None)
@given(DOCS, st.sampled_from([1, 8, 16, 64, 256]), st.sampled_from([1, 2, 4]), st.booleans(), st.booleans())
def test_yaml_dicts_parse_or_explain(doc: dict, devices: int, slices: int, flow: bool, crlf: bool) -> None:
    try:
        text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True)
    except yaml.YAMLError:
        return
    if crlf:
        text = text.replace("\n", "\r\n")
    config = check(text)
    if config is not None and devices % slices == 0:
        resolve_everywhere(config, devices, slices)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(maxtext.KEYS), st.sampled_from([-1, 1, 1, 2, 4, 8]), min_size=1, max_size=6),
    st.sampled_from([8, 16, 64]),
    st.sampled_from([1, 2]),
)
def test_valid_looking_maxtext_configs_resolve_or_explain(keys: dict, devices: int, slices: int) -> None:
    text = "".join(f"{k}: {v}\n" for k, v in keys.items())
    config = parse_config(text, "fuzz.yml")
    resolve_everywhere(config, devices, slices)


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    assert check("a: " + "[" * 5000 + "]" * 5000 + "\n") is None  # a ConfigError, not a RecursionError
    assert check("[" * 100_000) is None


def test_recursive_alias_does_not_loop() -> None:
    config = check("a: &x [*x]\nici_fsdp_parallelism: 4\n")
    assert config is not None and config.mesh(4) == Mesh(ici={"fsdp": 4})


AXES = ["data", "fsdp", "tensor", "sequence", "expert", "pipeline"]


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(maxtext.KEYS), st.sampled_from([-1, 1, 2, 4]), min_size=1, max_size=8),
    st.dictionaries(st.sampled_from(AXES), st.sampled_from([1, 2, 4]), max_size=4),
    st.dictionaries(st.sampled_from(AXES), st.sampled_from([1, 2]), max_size=2),
    st.booleans(),
)
def test_random_maxtext_files_take_random_meshes(keys: dict, ici: dict, dcn: dict, crlf: bool) -> None:
    """Any MaxText file (valid or not before) edited to any mesh parses back to exactly that mesh."""
    eol = "\r\n" if crlf else "\n"
    text = "# header" + eol + "".join(f"{k}: {v}  # note{eol}" for k, v in keys.items())
    config = parse_config(text, "fuzz.yml")
    target = Mesh(ici=ici, dcn=dcn)
    new_text = apply_mesh(config, target)
    assert parse_config(new_text, "fuzz.yml").mesh(target.num_devices, target.num_slices) == target.normalized()
    assert new_text.split(eol)[0] == "# header" and ("\r\n" in new_text) == crlf


# ------------------------------------------------------------------------------------------ launch scripts
SHELL_BITS = st.sampled_from([
    "TP=8\n", "export A=${1:-4}\n", "ARGS=(--tensor-model-parallel-size $TP --micro-batch-size 2)\n",
    "if [ $X = y ]; then\nTP=2\nelse\nTP=4\nfi\n", "for i in 1 2; do echo $i; done\n", "case $A in 4) B=1;; esac\n",
    "f() { echo; }\nf a b\n", "torchrun --nproc_per_node 8 pretrain_gpt.py \"${ARGS[@]}\" --global-batch-size 64\n",
    "python3 -m MaxText.train MaxText/configs/base.yml ici_tensor_parallelism=$TP\n", "eval \"$CMD\"\n",
    "echo 'x\n", "$((1+))\n", "\\\n", "\"${A[@]}\"\n", "}\n", "fi\n", "(( i++ ))\n", "<<EOF\nbody\nEOF\n",
    "${X%%y}\n", "`date`\n", "done\n", "while true; do :; done\n",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(SHELL_BITS, st.text(max_size=12)), max_size=12))
def test_random_launch_scripts_parse_or_explain(bits: list[str]) -> None:
    """Any script text is read or refused with a ConfigError naming the file: never another exception."""
    text = "#!/bin/bash\n" + "".join(bits)
    try:
        cfg = parse_config(text, "fuzz.sh")
    except ConfigError as exc:
        assert exc.message and exc.source is not None
        return
    assert cfg.format in ("maxtext", "megatron")


def test_nested_loops_are_bounded() -> None:
    loops = "".join(f"for v{i} in " + " ".join(str(n) for n in range(60)) + "; do\n" for i in range(4))
    text = "#!/bin/bash\n" + loops + "X=1\n" + "done\n" * 4 + "torchrun pretrain_gpt.py --tensor-model-parallel-size 2\n"
    with pytest.raises(ConfigError, match="too complex to read"):
        parse_config(text, "loops.sh")
