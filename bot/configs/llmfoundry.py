"""llm-foundry (MosaicML Composer) training YAML: the FSDP / TP layout, batch, precision and model it trains.

llm-foundry's ``scripts/train/train.py`` reads one YAML (``scripts/train/yamls/pretrain/mpt-7b.yaml`` and its
siblings; mosaicml/llm-foundry, Apache-2.0). What places the ranks:

* ``fsdp_config.sharding_strategy`` (PyTorch FSDP's ``ShardingStrategy``, Composer's default ``FULL_SHARD``):
  ``FULL_SHARD`` / ``SHARD_GRAD_OP`` shard over every GPU (the ``fsdp`` axis, inside a node and across nodes);
  ``HYBRID_SHARD`` / ``_HYBRID_SHARD_ZERO2`` shard inside a node and replicate across nodes (``fsdp`` in the node,
  ``data`` across); ``NO_SHARD``, or no ``fsdp_config`` at all, is plain data parallelism (DDP).
* ``tp_config.tensor_parallel_degree`` (llm-foundry's tensor parallelism, ``strategy: ffn``): a tensor axis inside
  the node, FSDP over the rest.

Settings read under ASAP's own names: ``device_train_microbatch_size`` (``micro_batch_size``; ``auto`` is unknown),
``global_train_batch_size`` (``global_batch_size``), ``max_seq_len`` (``seq_length``),
``fsdp_config.activation_checkpointing`` (``remat``: full / none), ``sharding_strategy``, ``precision``
(``amp_fp8``: fp8), ``model.attn_config.attn_impl`` (``attention``), ``model.loss_fn`` (``fused_crossentropy``,
MPT's default, is a fused kernel). OmegaConf references ``${variables.name}`` / ``${name}`` resolve against the file's
own ``variables:`` section and top-level keys (llm-foundry's two layouts); a recorded launch command's
``dotted.key=value`` overrides win over the file (:func:`apply_overrides`). The MPT model itself is read by
:mod:`bot.configs.model_dims`. A mesh change an edit may write is a ``sharding_strategy`` value; every other layout
(pipeline, sequence, expert parallelism) is not expressible in the file and is refused.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from bot.configs.common import Splice, args_after
from bot.configs.mesh import Axis, Mesh
from bot.configs.sharding import ConfigKey, Scalar, ShardingConfig
from bot.configs.yamlscan import describe, scalar
from bot.errors import ConfigError

BATCH_KEYS: tuple[str, ...] = ("global_train_batch_size", "device_train_microbatch_size")  # llm-foundry's own names
SETTINGS: tuple[str, ...] = ("micro_batch_size", "global_batch_size", "seq_length", "remat", "activation_checkpointing",
                             "sharding_strategy",
                             "precision", "fp8", "attention", "cross_entropy_loss_fusion", "model")
STRATEGIES: dict[str, str] = {"FULL_SHARD": "fsdp", "SHARD_GRAD_OP": "fsdp", "HYBRID_SHARD": "hybrid",
                              "_HYBRID_SHARD_ZERO2": "hybrid", "NO_SHARD": "data"}
COMPOSER_DEFAULT_STRATEGY = "FULL_SHARD"  # composer FSDPConfig.sharding_strategy
_REF = re.compile(r"\$\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}")
MAX_REF_DEPTH = 8


def looks_like(root: Node) -> bool:
    """A top-level mapping holding llm-foundry's own batch keys, or an ``fsdp_config`` beside a ``model:`` that names
    its class (Hugging Face Accelerate's config also has a top-level ``fsdp_config``, but no model); or a MosaicML
    platform run config (mcli: ``compute:`` and the train config inline under ``parameters:``)."""
    return _train_keys(root) or ("compute" in _children(root) and _train_keys(_mcli_parameters(root)))


def _train_keys(root: Node | None) -> bool:
    top = _children(root)
    if any(k in top for k in BATCH_KEYS):
        return True
    return "fsdp_config" in top and node_at(root, "model.name") is not None


def train_root(root: Node) -> Node | None:
    """The mapping that holds the train config: the file itself, or an mcli run config's ``parameters:``."""
    return root if _train_keys(root) else _mcli_parameters(root)


def _mcli_parameters(root: Node) -> Node | None:
    return node_at(root, "parameters")


_MCLI_TRAIN = re.compile(r"train(?:/train)?\.py\s+([\w./-]{1,200}\.ya?ml)")


def mcli_hint(root: Node) -> tuple[str, str] | None:
    """(message, hint) for an mcli run config without an inline train config: what it trains, if its command says."""
    top = _children(root)
    if "compute" not in top or "command" not in top:
        return None
    command = scalar(top["command"][1])
    found = _MCLI_TRAIN.search(command) if isinstance(command, str) else None
    if found is None:
        return ("a MosaicML platform run config (mcli) with no train config under parameters: and no "
                "'composer train.py <yaml>' in its command: nothing here places ranks, and ASAP does not read it as a "
                "config",
                "point ASAP at the llm-foundry train YAML the job runs")
    return (f"a MosaicML platform run config (mcli) whose command trains {found.group(1)}: the layout is in that "
            "YAML, and ASAP does not read it as a config",
            f"point ASAP at {found.group(1)} (run.yaml config:) and put the composer line in run.yaml command: its "
            "key=value overrides win over the YAML, as llm-foundry merges them")


def _mcli_gpus(root: MappingNode, source: str) -> int | None:
    """``compute.gpus`` of an mcli run config: the GPUs the run asks for."""
    hit = _children(node_at(root, "compute")).get("gpus")
    if hit is None:
        return None
    gpus = scalar(hit[1])
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ConfigError(f"must be a positive integer, got {describe(gpus)}", source=source, field="compute.gpus")
    return gpus


def overrides(command: str | None, source: str) -> dict[str, str]:
    """The ``dotted.key=value`` overrides of a recorded ``composer train/train.py <yaml> k=v ...`` command (OmegaConf's
    dotlist, which llm-foundry merges over the YAML); {} without a command or a YAML in it."""
    out: dict[str, str] = {}
    for w in args_after(command, source) or []:
        if w in ("&&", ";", "|", "||"):
            break
        key, eq, value = w.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
            out[key] = value
    return out


def apply_overrides(root: Node, command: str | None, source: str) -> set[str]:
    """Write the command's overrides into the composed tree (OmegaConf: the command wins over the file); the dotted
    paths it set, so that reading names them and an edit of the file refuses them."""
    done: set[str] = set()
    for path, value in overrides(command, source).items():
        try:
            node = yaml.compose(value or "null", Loader=yaml.SafeLoader)  # one scalar: no aliases, no documents
        except yaml.YAMLError:
            node = None
        if not isinstance(node, ScalarNode):
            raise ConfigError(f"override {path}={value!r}: expected a single value", source=source, field="command")
        node.start_mark = node.end_mark = None  # not a span of the file: reading says "on the launch command"
        _set_path(root, path.split("."), node)
        done.add(path)
    return done


def _set_path(root: Node, parts: list[str], value: ScalarNode) -> None:
    node = root
    for i, part in enumerate(parts):
        if not isinstance(node, MappingNode):
            return
        entry = next(((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == part), None)
        last = i == len(parts) - 1
        if entry is None:
            key = ScalarNode("tag:yaml.org,2002:str", part)
            child: Node = value if last else MappingNode("tag:yaml.org,2002:map", [])
            node.value.append((key, child))
            node = child
            continue
        if last:
            node.value[node.value.index(entry)] = (entry[0], value)
            return
        node = entry[1]


def read(root: MappingNode, text: str, source: str, command: str | None = None) -> ShardingConfig:
    """The layout, settings and their positions; ConfigError naming the key for values llm-foundry would refuse.
    An mcli run config is read through its ``parameters:`` (what ``composer train.py /mnt/config/parameters.yaml``
    trains), its ``compute.gpus`` as the launch's device count."""
    devices = None
    if not _train_keys(root):
        devices = _mcli_gpus(root, source)
        root = _mcli_parameters(root)  # type: ignore[assignment]
    on_command = apply_overrides(root, command, source)
    top = _children(root)
    values: dict[str, Scalar] = {}
    origins: dict[str, ConfigKey] = {}
    reading: list[str] = []
    fsdp = top.get("fsdp_config")
    fsdp_map = _children(fsdp[1]) if fsdp is not None and isinstance(fsdp[1], MappingNode) else None
    if fsdp is not None and fsdp_map is None and scalar(fsdp[1]) is not None:
        raise ConfigError(f"must be a mapping of FSDP settings, got {describe(scalar(fsdp[1]))}", source=source,
                          field="fsdp_config")
    _read_strategy(fsdp_map, values, origins, reading, text, source)
    _partial_checkpointing(root, values, reading)
    _read_batch(root, top, values, origins, reading, text, source)
    _read_model_settings(root, top, values, reading, source)
    keys = _tp_key(root, top, text, source)
    if devices is not None:
        reading.append(f"a MosaicML platform run config: the train config under parameters:, compute.gpus {devices}")
    for path in sorted(on_command):
        reading.append(f"{path} set on the launch command (it wins over the YAML)")
    for name, origin in list(origins.items()):
        if origin.path in on_command or any(origin.path.startswith(p + ".") for p in on_command):
            origins[name] = origin.model_copy(update={"start": -1, "end": -1, "via": "the recorded launch command"})
    return ShardingConfig(format="llmfoundry", source=source, text=text, keys=keys, settings=values, origins=origins,
                          reading=reading, devices=devices)


# ----------------------------------------------------------------------------------------------- reading
def _children(node: Node | None) -> dict[str, tuple[Node, Node]]:
    """key -> (key node, value node) of a mapping ({} for anything else)."""
    if not isinstance(node, MappingNode):
        return {}
    return {k.value: (k, v) for k, v in node.value if isinstance(k, ScalarNode)}


def resolve_value(root: MappingNode, node: Node, source: str, field: str) -> object:
    """A scalar's value with OmegaConf references to the file's own keys resolved (``${variables.max_seq_len}``,
    ``${max_seq_len}``); a reference the file does not hold, or one to an environment / resolver, is None."""
    value = scalar(node)
    for _ in range(MAX_REF_DEPTH):
        if not isinstance(value, str):
            return value
        m = _REF.fullmatch(value.strip())
        if m is None:
            return value
        target = node_at(root, m.group(1))
        if target is None:
            return None
        value = scalar(target)
    raise ConfigError(f"references nest deeper than {MAX_REF_DEPTH} levels (a cycle?)", source=source, field=field)


def node_at(root: Node | None, dotted: str) -> Node | None:
    """The value node at a dotted path of mappings (``model.attn_config.attn_impl``); None where any part is missing."""
    node = root
    for part in dotted.split("."):
        node = _children(node).get(part, (None, None))[1]
        if node is None:
            return None
    return node


def _origin(name: str, path: str, key_node: Node, value_node: Node, text: str) -> ConfigKey:
    if value_node.start_mark is None or key_node.start_mark is None:  # set on the launch command
        return ConfigKey(key=name, path=path, group="world", axis="data", value=0, raw="", line=0, column=0,
                         start=-1, end=-1, via="the recorded launch command")
    start, end = value_node.start_mark.index, value_node.end_mark.index
    return ConfigKey(key=name, path=path, group="world", axis="data", value=0, raw=text[start:end],
                     line=key_node.start_mark.line + 1, column=key_node.start_mark.column + 1, start=start, end=end)


def _at(node: Node) -> str:
    """Where a value is written, for messages: its line in the file, or the launch command."""
    return "on the launch command" if node.start_mark is None else f"line {node.start_mark.line + 1}"


def remat_values(policy: str) -> dict[str, bool]:
    """The YAML value a remat policy is written as: llm-foundry checkpoints every block or none."""
    return {"activation_checkpointing": policy != "none"}


def _read_strategy(fsdp: dict[str, tuple[Node, Node]] | None, values: dict[str, Scalar],
                   origins: dict[str, ConfigKey], reading: list[str], text: str, source: str) -> None:
    if fsdp is None:
        reading.append("no fsdp_config: Composer trains with DDP (data parallelism over every GPU)")
        return
    hit = fsdp.get("sharding_strategy")
    if hit is None:
        values["sharding_strategy"] = COMPOSER_DEFAULT_STRATEGY
        reading.append(f"fsdp_config.sharding_strategy not set: Composer's default {COMPOSER_DEFAULT_STRATEGY}")
        return
    strategy = scalar(hit[1])
    if not isinstance(strategy, str) or strategy.upper() not in STRATEGIES:
        raise ConfigError(f"must be one of {', '.join(STRATEGIES)}, got {describe(strategy)} "
                          f"({_at(hit[1])})", source=source, field="fsdp_config.sharding_strategy")
    values["sharding_strategy"] = strategy.upper()
    origins["sharding_strategy"] = _origin("sharding_strategy", "fsdp_config.sharding_strategy", hit[0], hit[1], text)
    ckpt = fsdp.get("activation_checkpointing")
    if ckpt is not None:
        on = scalar(ckpt[1])
        if not isinstance(on, bool):
            raise ConfigError(f"must be true or false, got {describe(on)}", source=source,
                              field="fsdp_config.activation_checkpointing")
        values["remat"] = "full" if on else "none"
        values["activation_checkpointing"] = on
        origins["activation_checkpointing"] = _origin("activation_checkpointing",
                                                      "fsdp_config.activation_checkpointing", ckpt[0], ckpt[1], text)


def _partial_checkpointing(root: Node, values: dict[str, Scalar], reading: list[str]) -> None:
    """``model.activation_checkpointing_target`` checkpoints only the modules / blocks it names (MPT's
    activation_checkpointing_fn): not a policy ASAP prices, so the remat policy is left unstated, and said."""
    target = node_at(root, "model.activation_checkpointing_target")
    if target is None or scalar(target) is None or not values.get("activation_checkpointing"):
        return
    values.pop("remat", None)
    reading.append("model.activation_checkpointing_target checkpoints only the modules / blocks it names: ASAP "
                   "cannot price that partial policy, so the remat policy is treated as not stated")


def _positive(root: MappingNode, hit: tuple[Node, Node], source: str, field: str, *, auto: bool) -> int | None:
    value = resolve_value(root, hit[1], source, field)
    if auto and isinstance(value, str) and value.strip().lower() == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        expected = "a positive integer" + (" or auto" if auto else "")
        raise ConfigError(f"must be {expected}, got {describe(value)} ({_at(hit[1])})",
                          source=source, field=field)
    return value


def _read_batch(root: MappingNode, top: dict[str, tuple[Node, Node]], values: dict[str, Scalar],
                origins: dict[str, ConfigKey], reading: list[str], text: str, source: str) -> None:
    for key, name, auto in (("device_train_microbatch_size", "micro_batch_size", True),
                            ("global_train_batch_size", "global_batch_size", False)):
        hit = top.get(key)
        if hit is None:
            continue
        value = _positive(root, hit, source, key, auto=auto)
        if value is None:
            reading.append(f"{key}: auto (Composer picks the largest micro-batch that fits at run time): unknown")
            continue
        values[name] = value
        if isinstance(scalar(hit[1]), int):  # a literal ASAP can rewrite in place
            origins[name] = _origin(name, key, hit[0], hit[1], text)
    seq = node_at(root, "max_seq_len") or node_at(root, "model.max_seq_len")
    if seq is not None:
        n = resolve_value(root, seq, source, "max_seq_len")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            values["seq_length"] = n
        else:
            reading.append(f"max_seq_len {describe(scalar(seq))} does not resolve to a length in this file: "
                           "the sequence length is unknown (run.yaml training.seq_len states it)")


def _read_model_settings(root: MappingNode, top: dict[str, tuple[Node, Node]], values: dict[str, Scalar],
                         reading: list[str], source: str) -> None:
    precision = top.get("precision")
    if precision is not None:
        p = resolve_value(root, precision[1], source, "precision") if isinstance(precision[1], ScalarNode) else []
        if p is not None and not isinstance(p, str):
            raise ConfigError(f"must be a precision name (amp_bf16, amp_fp8, fp32...), got {describe(p)} "
                              f"({_at(precision[1])})", source=source, field="precision")
        if isinstance(p, str):
            values["precision"] = p
            values["fp8"] = p.lower() == "amp_fp8"
    model = _children(node_at(root, "model"))
    name = model.get("name")
    if name is not None:
        values["model"] = str(scalar(name[1]))
    attn = node_at(root, "model.attn_config.attn_impl")
    if attn is not None:
        values["attention"] = str(resolve_value(root, attn, source, "model.attn_config.attn_impl"))
    loss = model.get("loss_fn")
    mpt = values.get("model") == "mpt_causal_lm"
    if loss is not None:
        values["cross_entropy_loss_fusion"] = str(scalar(loss[1])) == "fused_crossentropy"
    elif mpt:  # ComposerMPTCausalLM's default loss_fn (llmfoundry/models/mpt/modeling_mpt.py)
        values["cross_entropy_loss_fusion"] = True
        reading.append("model.loss_fn not set: MPT's default fused_crossentropy (flash-attn's fused kernel)")


def _tp_key(root: MappingNode, top: dict[str, tuple[Node, Node]], text: str, source: str) -> list[ConfigKey]:
    tp = _children(node_at(root, "tp_config")).get("tensor_parallel_degree")
    if tp is None:
        return []
    size = _positive(root, tp, source, "tp_config.tensor_parallel_degree", auto=False)
    at = _origin("tensor_parallel_degree", "tp_config.tensor_parallel_degree", tp[0], tp[1], text)
    return [at.model_copy(update={"axis": "tensor", "value": int(size or 1)})]


# -------------------------------------------------------------------------------------------------- mesh
def strategy_of(config: ShardingConfig) -> str:
    """The sharding strategy in force: the file's, Composer's default, or NO_SHARD (DDP) without fsdp_config."""
    s = config.settings.get("sharding_strategy")
    return str(s) if isinstance(s, str) else "NO_SHARD"


def _tensor(config: ShardingConfig) -> int:
    return next((k.value for k in config.keys if k.axis == "tensor"), 1)


def mesh(config: ShardingConfig, num_devices: int, num_slices: int) -> Mesh:
    """Tensor ranks inside the node, then the strategy's FSDP / replica layout over the rest."""
    per = num_devices // num_slices
    tp = _tensor(config)
    if per % tp:
        raise ConfigError(f"tp_config.tensor_parallel_degree {tp} does not divide the {per} GPUs of a node",
                          source=config.source, field="tp_config.tensor_parallel_degree")
    inner = per // tp
    kind = STRATEGIES[strategy_of(config)]
    ici: dict[Axis, int] = {"tensor": tp}
    dcn: dict[Axis, int] = {}
    if kind == "data":
        ici["data"], dcn["data"] = inner, num_slices
    elif kind == "fsdp":
        ici["fsdp"], dcn["fsdp"] = inner, num_slices
    else:
        ici["fsdp"], dcn["data"] = inner, num_slices
    return Mesh(ici={a: v for a, v in ici.items() if v > 1}, dcn={a: v for a, v in dcn.items() if v > 1})


def notes(config: ShardingConfig, num_devices: int, num_slices: int) -> list[str]:
    """How the file's strategy became the mesh, and what the file leaves to run time."""
    out = [f"sharding_strategy {strategy_of(config)}: "
           + {"fsdp": "parameters, gradients and optimizer state sharded over every GPU",
              "hybrid": "sharded inside each node, replicated across nodes",
              "data": "replicated on every GPU (DDP)"}[STRATEGIES[strategy_of(config)]]]
    if _tensor(config) > 1:
        out.append("llm-foundry's tensor parallelism (tp_config strategy ffn) shards the MLP only; ASAP prices "
                   "tensor parallelism over the attention projections too (optimistic for attention)")
    out.extend(r for r in config.reading if "auto" in r)
    return out


def allowed_axes(config: ShardingConfig) -> set[Axis]:
    """What the YAML can state: FSDP and replicas (the strategy), tensor ranks when it has a tp_config."""
    return {"data", "fsdp"} | ({"tensor"} if _tensor(config) > 1 else set())


# -------------------------------------------------------------------------------------------------- edits
def strategy_for(config: ShardingConfig, target: Mesh) -> str:
    """The sharding_strategy that gives ``target`` (same tensor size), or ConfigError naming what cannot."""
    sizes = {a: v for a, v in target.sizes().items() if v > 1}
    if sizes.get("tensor", 1) != _tensor(config) or any(a not in ("data", "fsdp", "tensor") for a in sizes):
        raise ConfigError(f"an llm-foundry YAML states FSDP / replica layouts over its tensor ranks, not "
                          f"{target.short()}", source=config.source, field="fsdp_config.sharding_strategy",
                          hint="pipeline, sequence and expert parallelism are not llm-foundry settings")
    ici_fsdp, ici_data = target.ici.get("fsdp", 1), target.ici.get("data", 1)
    dcn_fsdp, dcn_data = target.dcn.get("fsdp", 1), target.dcn.get("data", 1)
    current = strategy_of(config)
    if ici_data == 1 and dcn_data == 1:
        return current if STRATEGIES[current] == "fsdp" else "FULL_SHARD"
    if ici_fsdp == 1 and dcn_fsdp == 1:
        return "NO_SHARD"
    if ici_data == 1 and dcn_fsdp == 1:
        return current if STRATEGIES[current] == "hybrid" else "HYBRID_SHARD"
    raise ConfigError(f"{target.short()} mixes sharding and replicas inside a node; llm-foundry's strategies shard "
                      "over every GPU (FULL_SHARD), inside each node (HYBRID_SHARD) or nowhere (NO_SHARD)",
                      source=config.source, field="fsdp_config.sharding_strategy")


def plan(config: ShardingConfig, root: Any, target: Mesh) -> list[Splice]:
    """Rewrite ``fsdp_config.sharding_strategy`` for ``target``; a file without it (DDP, or Composer's default)
    is refused with the line to add, since where the block goes is the author's call."""
    want = strategy_for(config, target)
    if want == strategy_of(config):
        return []
    at = config.origins.get("sharding_strategy")
    if at is None:
        raise ConfigError(f"the file does not write fsdp_config.sharding_strategy; the layout needs {want}",
                          source=config.source, field="fsdp_config.sharding_strategy",
                          hint=f"add 'sharding_strategy: {want}' under fsdp_config")
    if at.start < 0:
        raise ConfigError(f"fsdp_config.sharding_strategy is set by {at.via}, which wins over the YAML; the layout "
                          f"needs {want}", source=config.source, field="fsdp_config.sharding_strategy",
                          hint=f"change it on the launch command: fsdp_config.sharding_strategy={want}")
    return [Splice(at.start, at.end, want)]
