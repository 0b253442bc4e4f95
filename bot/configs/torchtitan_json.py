"""torchtitan's JSON record of a run's configuration (torchtitan of March 2026 on), read as torchtitan wrote it.

Since pytorch/torchtitan #2386 (February 2026) a run's configuration is a Python function returning
``Trainer.Config`` (``torchtitan/models/<model>/config_registry.py``, ``torchtitan_recipes/``); there is no TOML
file any more. What a run leaves behind is the JSON torchtitan writes at start-up: ``Trainer.Config.maybe_log``
dumps ``Trainer.Config.to_dict()`` to ``<dump_folder>/<debug.save_config_file>`` (and logs it after "Running with
configs:" with ``debug.print_config``). That file is what ASAP reads (pytorch/torchtitan @ b5bcd76c,
``torchtitan/trainer.py``, ``torchtitan/config/configs.py``; BSD-3-Clause):

* ``parallelism.*_degree``: the degrees, named as in the TOML era (dp_shard -1: the rest);
* ``training.num_tokens_per_microbatch_per_dp_rank`` (token slots per data-parallel rank per forward),
  ``training.max_context_length`` (the sequence length), ``training.num_tokens_per_train_step`` (-1: one
  micro-batch x ``parallelism.num_pp_microbatches`` x the data-parallel degree, no accumulation);
* ``activation_checkpoint``: the policy's config serialised without its class, so the kind is told by its fields:
  ``null`` none, ``force_recompute_mm_shapes_by_fqns`` selective (per-op SAC), ``memory_budget`` memory-budget,
  only the base fields full;
* ``compile.enable`` / ``components`` / ``enable_async_tensor_parallel``;
* ``model_spec``: ``{name, flavor, model}`` with the model's whole config tree (dimensions per layer).

Quantization converters (Float8 / MXFP8 / NVFP4) replace ``Linear.Config`` by a subclass whose fields serialise
the same, so the dump does not say whether the linears ran in fp8: ASAP says so and leaves it unstated. The dump
records the configuration; torchtitan does not read it back, so a proposal is written as the Python assignments to
make in the config function rather than as an edit of the dump.
"""

from __future__ import annotations

import json
from typing import Any

from bot.configs.jsonspans import JsonDoc, load
from bot.configs.sharding import ConfigKey, Scalar, ShardingConfig
from bot.configs.torchtitan import AXIS_OF, KEYS
from bot.errors import ConfigError

DUMP = ("torchtitan of March 2026 on (a config function's Trainer.Config, as torchtitan dumps it to JSON: "
        "debug.save_config_file)")
# the same configuration read from the config function's own Python source (bot.configs.torchtitan_py)
FUNCTION_SOURCE = ("torchtitan of March 2026 on (a config function returning Trainer.Config, read from its Python "
                   "source without running it)")
_AC_BASE = {"preserve_rng_state", "determinism_check", "debug"}


def is_record(config: ShardingConfig) -> bool:
    """Whether ``config`` was read from such a record (not from a TOML file)."""
    return config.vintage == DUMP


def is_function_config(config: ShardingConfig) -> bool:
    """torchtitan of 2026: a config function's Trainer.Config, read from its JSON record or its Python source (its
    names and policies, e.g. per-op SelectiveAC only, not the TOML era's)."""
    return config.vintage in (DUMP, FUNCTION_SOURCE)


def looks_like(data: object) -> bool:
    """A Trainer.Config dump: a ``parallelism`` object with a degree and a ``training`` object with torchtitan's
    token-slot batch (``num_tokens_per_microbatch_per_dp_rank``)."""
    if not isinstance(data, dict):
        return False
    par, train = data.get("parallelism"), data.get("training")
    return (isinstance(par, dict) and any(k in par for k in KEYS) and isinstance(train, dict)
            and "num_tokens_per_microbatch_per_dp_rank" in train)


def read(doc: JsonDoc) -> ShardingConfig:
    """The dump's degrees and the settings the cost model reads, under the TOML era's names."""
    data, source = doc.data, doc.source
    keys = [_key(doc, name) for name in KEYS if name in data["parallelism"]]
    keys.sort(key=lambda k: k.line)
    settings, reading = settings_of(doc)
    return ShardingConfig(format="torchtitan", source=source, text=doc.text, keys=keys, settings=settings,
                          vintage=DUMP, reading=[f"read as {DUMP}", *reading])


def _key(doc: JsonDoc, name: str) -> ConfigKey:
    """A degree, with its line; not editable (the dump is a record, not an input)."""
    dotted = f"parallelism.{name}"
    value = doc.data["parallelism"][name]
    shard = name == "data_parallel_shard_degree"
    span = doc.spans.get(dotted)
    if isinstance(value, bool) or not isinstance(value, int) or not (value >= 1 or (shard and value == -1)):
        where = f" (line {span.line})" if span else ""
        raise ConfigError(f"must be a positive integer{' or -1 (the rest)' if shard else ''}, got {value!r:.40}"
                          f"{where}", source=doc.source, field=dotted)
    if span is None:
        return ConfigKey(key=name, path=dotted, group="world", axis=AXIS_OF[name], value=value, raw=str(value),
                         line=0, column=0, start=-1, end=-1, via="a JSON value ASAP cannot locate")
    column = span.key_start - doc.text.rfind("\n", 0, span.key_start)
    return ConfigKey(key=name, path=dotted, group="world", axis=AXIS_OF[name], value=value,
                     raw=doc.text[span.start:span.end], line=span.line, column=column, start=span.start, end=span.end)


def _int(doc: JsonDoc, dotted: str, *, allow_minus_one: bool = False) -> int | None:
    """A positive integer at ``dotted`` (None when absent); ConfigError naming the field otherwise."""
    node = _get(doc.data, *dotted.split("."))
    if node is None:
        return None
    if isinstance(node, int) and not isinstance(node, bool) and (node > 0 or (allow_minus_one and node == -1)):
        return node
    raise ConfigError(f"must be a positive integer{' or -1' if allow_minus_one else ''}, got {node!r:.40}",
                      source=doc.source, field=dotted)


def settings_of(doc: JsonDoc, *, record: bool = True) -> tuple[dict[str, Scalar], list[str]]:
    """Batch, sequence, remat, compile and model name in the names :mod:`knowledge.cost_settings_titan` reads
    (``record``: ``doc`` is the JSON record, not the function's source: the notes on what a record lacks)."""
    data = doc.data
    out: dict[str, Scalar] = {}
    notes: list[str] = []
    tokens = _int(doc, "training.num_tokens_per_microbatch_per_dp_rank")
    seq = _int(doc, "training.max_context_length")
    step = _int(doc, "training.num_tokens_per_train_step", allow_minus_one=True)
    pp_mb = _int(doc, "parallelism.num_pp_microbatches") or 1
    pp = _int(doc, "parallelism.pipeline_parallel_degree") or 1
    if seq:
        out["training.seq_len"] = seq
    if tokens and seq:
        per_mb = max(tokens // seq, 1)
        out["parallelism.pipeline_parallel_microbatch_size"] = per_mb
        out["training.local_batch_size"] = per_mb * (pp_mb if pp > 1 else 1)
        notes.append(f"batch: {tokens:,} token slots per data-parallel rank per forward over sequences of {seq:,}: "
                     f"{per_mb} sequence(s) per micro-batch" + (f", {pp_mb} pipeline micro-batches" if pp > 1 else ""))
        if tokens % seq:
            notes.append(f"num_tokens_per_microbatch_per_dp_rank {tokens:,} is not a multiple of max_context_length "
                         f"{seq:,}: priced as {per_mb} whole sequence(s)")
    if step and step > 0 and seq:
        out["training.global_batch_size"] = max(step // seq, 1)
    ac = _activation_checkpoint(doc)
    if ac is not None:
        out["activation_checkpoint.mode"] = ac[0]
        if ac[1] is not None:
            out["activation_checkpoint.selective_ac_option"] = ac[1]
        notes.append(ac[2])
    comp = data.get("compile")
    if isinstance(comp, dict):
        components = comp.get("components") if isinstance(comp.get("components"), list) else []
        out["compile.enable"] = comp.get("enable") is True
        out["parallelism.enable_async_tensor_parallel"] = comp.get("enable_async_tensor_parallel") is True
        if comp.get("enable") is True and "model" not in components:
            notes.append(f"compile.enable with components {components}: only those are compiled")
    spec = data.get("model_spec")
    if isinstance(spec, dict):
        for field in ("name", "flavor"):
            if isinstance(spec.get(field), str):
                out[f"model.{field}"] = spec[field]
    if record:
        notes.append("torchtitan does not read this record back: a proposal is shown as an edit of it, to be made as "
                     "the same assignments in the config function that built it (config.parallelism.<degree> = ...)")
        notes.append("the dump does not record quantization converters (Float8 / MXFP8 / NVFP4 linears serialise like "
                     "bf16 ones): state training.dtype in run.yaml if the run trains in fp8")
    else:
        notes.append("a proposal is written as assignments in this function before it returns "
                     "(config.parallelism.<degree> = ...); its base functions are left as they are")
    return out, notes


def _activation_checkpoint(doc: JsonDoc) -> tuple[str, str | None, str] | None:
    """(mode, selective option, reading note) from the policy config's fields; None when the dump has none."""
    if "activation_checkpoint" not in doc.data:
        return None
    ac = doc.data["activation_checkpoint"]
    if ac is None:
        return "none", None, "activation checkpointing: none (activation_checkpoint is null)"
    if not isinstance(ac, dict):
        raise ConfigError(f"expected an object or null, got {ac!r:.40}", source=doc.source,
                          field="activation_checkpoint")
    if "memory_budget" in ac:
        return ("memory_budget", None, "activation checkpointing: memory-budget (its fields name MemoryBudgetAC): "
                "what it recomputes is decided at compile time, left unstated")
    if "force_recompute_mm_shapes_by_fqns" in ac:
        return ("selective", "op", "activation checkpointing: selective, per op (its fields name SelectiveAC: "
                "force_recompute_mm_shapes_by_fqns)")
    if set(ac) <= _AC_BASE:
        return "full", None, "activation checkpointing: full (only the base policy's fields: FullAC)"
    raise ConfigError(f"activation_checkpoint has fields no torchtitan policy has: {sorted(set(ac) - _AC_BASE)}",
                      source=doc.source, field="activation_checkpoint",
                      hint="a custom policy: state training.remat in run.yaml")


def parse(text: str, source: str) -> ShardingConfig | None:
    """The dump read, or None when the JSON is not a Trainer.Config dump (another reader's)."""
    doc = load(text, source)
    return read(doc) if looks_like(doc.data) else None


# activation_checkpoint.mode (the TOML era's name a remat proposal writes) -> the policy config to assign
_AC_CLASS = {"full": "FullAC.Config()", "selective": "SelectiveAC.Config()", "none": "None",
             "memory_budget": "MemoryBudgetAC.Config()"}


def python_assignments(values: dict[str, object]) -> str:
    """``config.parallelism.tensor_parallel_degree = 4; ...``: what to set in the config function."""
    out = []
    for path, value in values.items():
        if path == "activation_checkpoint.mode":
            out.append(f"config.activation_checkpoint = {_AC_CLASS.get(str(value), repr(value))}")
        elif path != "activation_checkpoint.selective_ac_option":
            out.append(f"config.{path} = {value!r}")
    return "; ".join(out)


def refuse_edit(config: ShardingConfig, values: dict[str, object]) -> ConfigError:
    """The error for a change the record cannot carry: torchtitan does not read it back; the assignment to make in
    the config function instead (an activation-checkpointing policy is a class, not a value in the record). The
    (A config function's own Python source is edited instead: bot.configs.torchtitan_py_edit.)"""
    return ConfigError(f"{config.source} is torchtitan's record of a config function, which torchtitan does not read "
                       f"back; in that function set {python_assignments(values)}", source=config.source,
                       field=next(iter(values), "mesh"))


def _get(node: object, *path: str) -> object:
    """The value at ``path`` under ``node`` (None when any step is missing or not an object)."""
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _pos(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def model_fields(config: ShardingConfig) -> tuple[dict[str, int | bool], list[str]]:
    """(run.yaml model fields, problems) from the dump's ``model_spec.model`` tree: the per-layer configs hold every
    size torchtitan built (``dim``, ``vocab_size``, each layer's attention, feed_forward / moe). The text was
    validated when the config was read."""
    model = _get(json.loads(config.text), "model_spec", "model")
    layers = _get(model, "layers")
    if not isinstance(model, dict) or not isinstance(layers, list) or not layers:
        return {}, ["the dump has no model_spec.model.layers; give the model in run.yaml"]
    out: dict[str, int | bool] = {"layers": len(layers)}
    for field, key in (("d_model", "dim"), ("vocab", "vocab_size")):
        if _pos(model.get(key)):
            out[field] = model[key]
    if isinstance(model.get("enable_weight_tying"), bool):
        out["tied_embeddings"] = model["enable_weight_tying"]
    last = layers[-1]
    out.update(_attention(_get(last, "attention")))
    dense = [i for i, layer in enumerate(layers) if _get(layer, "moe") is None]
    moe = _get(last, "moe")
    if isinstance(moe, dict):
        out.update(_moe(moe))
        lead = len(dense)
        if dense != list(range(lead)):
            return out, ["dense and MoE layers interleave; ASAP's MoE shape has leading dense layers only"]
        if lead:
            out["dense_layers"] = lead
            width = _pos(_get(layers[0], "feed_forward", "w1", "out_features"))
            if width:
                out["dense_d_ff"] = width
    else:
        width = _pos(_get(last, "feed_forward", "w1", "out_features"))
        if width:
            out["d_ff"] = width
            out["mlp_matrices"] = 3 if isinstance(_get(last, "feed_forward", "w3"), dict) else 2
    mtp = model.get("mtp_layers")
    if isinstance(mtp, list) and mtp:
        out["mtp_layers"] = len(mtp)
    return out, []


def _attention(att: object) -> dict[str, int | bool]:
    """Heads and head sizes; MLA's latent ranks and head split where the layer has them (DeepSeek-V3)."""
    out: dict[str, int | bool] = {}
    heads = _pos(_get(att, "n_heads"))
    if heads:
        out["heads"] = heads
    kv = _pos(_get(att, "n_kv_heads")) or _pos(_get(att, "qkv_linear", "n_kv_heads"))
    head_dim = _pos(_get(att, "head_dim")) or _pos(_get(att, "qkv_linear", "head_dim"))
    if _pos(_get(att, "kv_lora_rank")):
        for field in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if _pos(_get(att, field)):
                out[field] = _get(att, field)  # type: ignore[assignment]
        q_rank = _get(att, "q_lora_rank")
        if _pos(q_rank):
            out["q_lora_rank"] = q_rank  # type: ignore[assignment]
        if heads:
            out["kv_heads"] = heads
        return out
    if kv:
        out["kv_heads"] = kv
    if head_dim:
        out["head_dim"] = head_dim
    return out


def _moe(moe: dict[str, Any]) -> dict[str, int | bool]:
    """Routed experts (count, top-k, width) and shared experts (as many expert-widths as their MLP spans)."""
    out: dict[str, int | bool] = {"mlp_matrices": 3}
    experts = _pos(moe.get("num_experts"))
    top_k = _pos(_get(moe, "router", "top_k"))
    width = _pos(_get(moe, "routed_experts", "inner_experts", "hidden_dim"))
    if experts:
        out["experts"] = experts
    if top_k:
        out["experts_per_token"] = top_k
    if width:
        out["d_ff"] = width
        shared = _pos(_get(moe, "shared_experts", "w1", "out_features"))
        if shared:
            out["shared_experts"] = max(round(shared / width), 1)
    return out


# TOML-era setting names (what the proposals write) -> the dump's field
_FIELD = {"parallelism.enable_async_tensor_parallel": "compile.enable_async_tensor_parallel",
          "compile.enable": "compile.enable"}
_TOKENS = "training.num_tokens_per_microbatch_per_dp_rank"


def function_fields(values: dict[str, object], seq: int, pp: int, pp_microbatches: int) -> tuple[dict[str, object],
                                                                                        dict[str, object]]:
    """``values`` (the TOML era's setting names a proposal writes) under the config function's own fields, and the
    ones with no such field: a batch in token slots (``seq`` tokens per sequence; under pipelining, ``pp`` > 1, a
    rank's batch is ``pp_microbatches`` micro-batches), async TP under compile."""
    out: dict[str, object] = {}
    rest: dict[str, object] = {}
    for name, value in values.items():
        if name in _FIELD:
            out[_FIELD[name]] = bool(value)
        elif name == "training.global_batch_size" and seq:
            out["training.num_tokens_per_train_step"] = int(value) * seq  # type: ignore[call-overload]
        elif name in ("parallelism.pipeline_parallel_microbatch_size", "training.local_batch_size") and seq:
            per = pp_microbatches if pp > 1 and name == "training.local_batch_size" else 1
            out[_TOKENS] = int(value) // per * seq  # type: ignore[call-overload]
        else:
            rest[name] = value
    return out, rest


def apply_settings(config: ShardingConfig, values: dict[str, object]) -> str:
    """The dump with ``values`` written where torchtitan records them; ConfigError (with the Python assignments to
    make instead) for a change the record has no single value for (an activation-checkpointing policy is a class)."""
    from bot.configs.common import Splice, apply_splices

    doc = load(config.text, config.source)
    wanted, rest = function_fields(values, _int(doc, "training.max_context_length") or 0,
                                   _int(doc, "parallelism.pipeline_parallel_degree") or 1,
                                   _int(doc, "parallelism.num_pp_microbatches") or 1)
    if rest:
        raise refuse_edit(config, dict([next(iter(rest.items()))]))
    splices = []
    for path, value in wanted.items():
        span = doc.spans.get(path)
        if span is None:
            raise refuse_edit(config, wanted)
        splices.append(Splice(span.start, span.end, json.dumps(value)))
    return apply_splices(config.text, splices)


def changed_assignments(old: str, new: str) -> str:
    """The config-function assignments that turn record ``old`` into record ``new`` (parallelism, training,
    compile fields), e.g. ``config.parallelism.tensor_parallel_degree = 4``."""
    a, b = json.loads(old), json.loads(new)
    changed: dict[str, object] = {}
    for section in ("parallelism", "training", "compile"):
        before, after = a.get(section) or {}, b.get(section) or {}
        changed.update({f"{section}.{k}": v for k, v in after.items() if before.get(k) != v})
    return python_assignments(changed)
