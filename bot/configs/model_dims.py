"""The model a run's own config states: layers, widths, heads, vocabulary, experts, MLP kind, and where each came from.

A Megatron launch or a MaxText recipe already names the model it trains, so run.yaml need not repeat it.
:func:`read_model_dims` reads a parsed :class:`~bot.configs.sharding.ShardingConfig` (the same reading the
mesh comes from, launch overrides and ``base_config`` chains included) and returns :class:`ModelDims`:
the dimensions in run.yaml's ``model:`` terms, each with the key that stated it, plus plain sentences for
every framework default it took and every value it could not know.

* Megatron-LM launch flags and Megatron / NeMo YAML (flat, nested under ``model:``, NeMo 2 dotted
  ``model.config.*``): ``num_layers``, ``hidden_size``, ``ffn_hidden_size`` (Megatron-LM arguments.py
  default: ``4 x hidden_size``, or ``int(8 x hidden_size / 3 / 64) x 64`` with ``--swiglu``),
  ``num_attention_heads``, ``num_query_groups`` (read by Megatron-LM only with ``--group-query-attention``),
  ``kv_channels``, ``--swiglu`` / ``activation`` / ``gated_linear_unit`` (gated MLP: 3 matrices; else
  Megatron's default GeLU: 2), vocabulary (``padded_vocab_size``, or ``vocab_size`` padded to
  ``make_vocab_size_divisible_by x tensor_model_parallel_size``), ``num_experts``, ``moe_router_topk``
  (default 2), ``seq_length``.
* torchtitan TOML: ``[model] name`` + ``flavor`` select torchtitan's own model args
  (:mod:`bot.configs.torchtitan_models`, llama3 8B / 70B / 405B / debugmodel, cited there).
* MaxText: ``model_name`` selects MaxText's own ``models/<name>.yml`` (the run's checkout, else ASAP's
  bundled copy in ``bot/configs/data/maxtext_models``); MaxText's pyconfig merges base.yml chain < model file <
  command-line overrides; ``global_parameter_scale`` scales the result as pyconfig's ``get_individual_scales``.

Formats layer: reads files, imports nothing from the cost model.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from bot.configs.common import as_bool, find_by_name, positive_int, trained_seq_length
from bot.configs.common import settings as read_settings
from bot.configs.sharding import Scalar, ShardingConfig
from bot.configs.yamlscan import compose, scalar

FIELDS: tuple[str, ...] = ("layers", "d_model", "d_ff", "heads", "kv_heads", "head_dim", "vocab", "mlp_matrices",
                           "experts", "experts_per_token", "seq_len", "tied_embeddings", "sliding_window",
                           "global_every", "shared_experts", "dense_layers", "dense_d_ff", "moe_latent_size",
                           "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "layer_pattern",
                           "mamba_heads", "mamba_head_dim", "mamba_state_dim", "mamba_groups", "mtp_layers")
GATED = ("swiglu", "fast-swiglu", "fast_swiglu", "geglu", "fast-geglu", "fast_geglu", "reglu", "fast-reglu")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class ModelDims(BaseModel):
    """Model dimensions a config states (``None``: it does not), with the key each came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str = Field(description="the config file read")
    layers: int | None = None
    d_model: int | None = None
    d_ff: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    vocab: int | None = None
    mlp_matrices: int | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    seq_len: int | None = None
    tied_embeddings: bool | None = None
    sliding_window: int | None = None
    global_every: int | None = None
    shared_experts: int | None = None  # DeepSeek-V3-style MoE and MLA (bot.runs.record.ModelSpec)
    dense_layers: int | None = None
    dense_d_ff: int | None = None
    moe_latent_size: int | None = None  # LatentMoE (Nemotron 3 Super / Ultra)
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    layer_pattern: str | None = None  # Megatron hybrid stacks (bot.runs.layer_pattern)
    mamba_heads: int | None = None
    mamba_head_dim: int | None = None
    mamba_state_dim: int | None = None
    mamba_groups: int | None = None
    mtp_layers: int | None = None  # multi-token-prediction modules (bot.runs.record.ModelSpec.mtp_layers)
    origin: dict[str, str] = Field(default_factory=dict, description="field -> the key / file / default it came from")
    notes: list[str] = Field(default_factory=list, description="defaults taken and values not knowable")
    problems: list[str] = Field(default_factory=list, description="what stops the model being read (e.g. an "
                                "unknown MaxText model_name)")
    defaulted: tuple[str, ...] = Field(default=(), description="fields the config leaves unstated, filled with the "
                                       "framework's default: they fill gaps but never contradict run.yaml")

    def stated(self) -> dict[str, int | str]:
        """Every field the config gives (run.yaml ``model:`` names, plus seq_len)."""
        return {f: getattr(self, f) for f in FIELDS if getattr(self, f) is not None}

    def describe(self, fields: list[str] | None = None) -> str:
        """``layers 96 (--num-layers), d_model 12288 (--hidden-size), ...`` for ``fields`` (default: all stated)."""
        stated = self.stated()
        names = [f for f in (fields or list(stated)) if f in stated and f != "seq_len"]
        return ", ".join(f"{f} {stated[f]} ({self.origin.get(f, 'the config')})" for f in names)


class _Dims:
    """Accumulates fields with their origin while a reader works."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.values: dict[str, Any] = {}
        self.origin: dict[str, str] = {}
        self.notes: list[str] = []
        self.problems: list[str] = []
        self.defaulted: list[str] = []

    def set(self, field: str, value: int | None, where: str) -> None:
        if value is not None and value > 0:
            self.values[field] = value
            self.origin[field] = where

    def text(self, field: str, value: str, where: str) -> None:
        """A text field (``set`` keeps positive numbers only)."""
        self.values[field] = value
        self.origin[field] = where

    def flag(self, field: str, value: bool | None, where: str) -> None:
        """A yes/no field (``set`` keeps positive numbers only)."""
        if value is not None:
            self.values[field] = bool(value)
            self.origin[field] = where

    def fill(self, fields: dict[str, int | bool], where: str) -> None:
        """Several fields from one place (numbers through ``set``, yes/no through ``flag``)."""
        for field, value in fields.items():
            if isinstance(value, bool):
                self.flag(field, value, where)
            else:
                self.set(field, value, where)

    def default(self, field: str, value: int, where: str) -> None:
        """A field the config leaves unstated, at the framework's default: it fills a gap but states nothing."""
        self.set(field, value, where)
        self.defaulted.append(field)

    def build(self) -> ModelDims:
        return ModelDims(source=self.source, origin=self.origin, notes=self.notes, problems=self.problems,
                         defaulted=tuple(self.defaulted), **self.values)


def read_model_dims(config: ShardingConfig) -> ModelDims | None:
    """The model the config states; None for formats that carry no model keys ASAP knows (plain ``ici_mesh``)."""
    if config.format == "megatron":
        return _megatron(config)
    if config.format == "maxtext":
        return _maxtext(config)
    if config.format == "torchtitan":
        return _torchtitan(config)
    if config.format == "llmfoundry":
        return _llmfoundry(config)
    return None


# MPTConfig defaults (llmfoundry/models/mpt/configuration_mpt.py @ 495218376): what an MPT YAML may leave out
MPT_DEFAULTS = {"d_model": 2048, "n_heads": 16, "n_layers": 24, "expansion_ratio": 4, "max_seq_len": 2048,
                "vocab_size": 50368}


def _llmfoundry(config: ShardingConfig) -> ModelDims:
    """An llm-foundry YAML's ``model:`` section: MPT's own sizes (``d_model``, ``n_heads``, ``n_layers``,
    ``expansion_ratio``, ``vocab_size``, ``attn_config.kv_n_heads``, ``ffn_config.ffn_type``; MPTConfig's defaults for
    what it leaves out; tied input / output embeddings, MPT's default); a Hugging Face model
    (``hf_causal_lm``) is named, not sized, in the file."""
    from bot.configs.llmfoundry import apply_overrides, node_at, resolve_value, train_root

    d = _Dims(config.source)
    root = train_root(compose(config.text, config.source))
    apply_overrides(root, config.command, config.source)  # key=value on the launch command win over the file
    name = config.settings.get("model")
    if name != "mpt_causal_lm":
        checkpoint = node_at(root, "model.pretrained_model_name_or_path")
        what = f" ({resolve_value(root, checkpoint, config.source, 'model.pretrained_model_name_or_path')})" \
            if checkpoint is not None else ""
        d.problems.append(f"model.name {name!r}{what}: its sizes live in the checkpoint's config, not in this YAML; "
                          "give the model dimensions in run.yaml")
        return d.build()

    def value(key: str, node: Any = None, *, ratio: bool = False) -> float | None:
        """A stated size (a ratio may be fractional); None when unstated; a problem when stated but not one."""
        node = node_at(root, f"model.{key}") if node is None else node
        if node is None:
            return None
        got = resolve_value(root, node, config.source, f"model.{key}")
        number = isinstance(got, int | float) if ratio else isinstance(got, int)
        if got is None or isinstance(got, bool) or not number or got <= 0:
            d.problems.append(f"model.{key}: expected a positive {'number' if ratio else 'integer'}, got "
                              f"{got!r}" + (" (a reference ASAP cannot resolve)" if got is None else ""))
            return None
        return got

    sizes: dict[str, float] = {}
    for key, default in MPT_DEFAULTS.items():
        node = node_at(root, f"model.{key}")
        got = value(key, ratio=key == "expansion_ratio")
        if node is None:
            d.notes.append(f"model.{key} not set: MPTConfig's default {default}")
        sizes[key] = got or default
    if d.problems:
        return d.build()
    ffn_hidden = value("ffn_hidden_size", node_at(root, "model.ffn_config.ffn_hidden_size"))
    where = "model.{} (llm-foundry YAML)"
    d_model, heads = int(sizes["d_model"]), int(sizes["n_heads"])
    d.set("layers", int(sizes["n_layers"]), where.format("n_layers"))
    d.set("d_model", d_model, where.format("d_model"))
    if ffn_hidden:  # MPT's resolve_ffn_hidden_size: ffn_config.ffn_hidden_size wins, else int(d_model x ratio)
        d.set("d_ff", int(ffn_hidden), "model.ffn_config.ffn_hidden_size")
    else:
        d.set("d_ff", int(d_model * sizes["expansion_ratio"]), "model.d_model x model.expansion_ratio")
    d.set("heads", heads, where.format("n_heads"))
    d.set("head_dim", d_model // heads, "model.d_model / model.n_heads")
    kv = value("kv_n_heads", node_at(root, "model.attn_config.kv_n_heads"))
    d.set("kv_heads", kv or sizes["n_heads"], "model.attn_config.kv_n_heads" if kv else "MPT's multi-head attention")
    d.set("vocab", int(sizes["vocab_size"]), where.format("vocab_size"))
    d.set("seq_len", int(sizes["max_seq_len"]), where.format("max_seq_len"))
    ffn = node_at(root, "model.ffn_config.ffn_type")
    gated = ffn is not None and str(scalar(ffn)) in ("mptglu", "mptgeglu")
    d.set("mlp_matrices", 3 if gated else 2, "model.ffn_config.ffn_type" if ffn is not None else "MPT's mptmlp (GELU)")
    tied = node_at(root, "model.tie_word_embeddings")
    d.flag("tied_embeddings", bool(scalar(tied)) if tied is not None else True,
           "model.tie_word_embeddings" if tied is not None else "MPTConfig's default tie_word_embeddings true")
    return d.build()


def _torchtitan(config: ShardingConfig) -> ModelDims:
    """torchtitan's ``[model] name`` + ``flavor`` looked up in its own model args (bot.configs.torchtitan_models);
    ``[training] seq_len`` (torchtitan's default 2048 when unset)."""
    from bot.configs.torchtitan import LEGACY
    from bot.configs.torchtitan_json import is_record
    from bot.configs.torchtitan_models import llama3, moe_model

    if is_record(config):
        return _torchtitan_dump(config)
    d = _Dims(config.source)
    name, flavor = config.settings.get("model.name"), config.settings.get("model.flavor")
    legacy = config.vintage == LEGACY
    seq = _int(config.settings.get("training.seq_len"))
    d.set("seq_len", seq or 2048, "training.seq_len" if seq else "torchtitan default training.seq_len 2048")
    if name is None or flavor is None:
        d.problems.append("the TOML names no model.name and model.flavor (torchtitan's defaults are the llama3 "
                          "debugmodel); give the model in run.yaml")
        return d.build()
    other = moe_model(str(name), str(flavor)) if name != "llama3" else None
    if other is not None:
        fields, where = other
        d.fill(fields, f"model.flavor {flavor} of {name}")
        d.notes.append(f"torchtitan's {name} {flavor} model args ({where})")
        return d.build()
    got = llama3(str(flavor), legacy) if name == "llama3" else None
    if got is None:
        from bot.configs.torchtitan_models import UNPRICED

        why = f" ({UNPRICED[str(name)]})" if str(name) in UNPRICED else ""
        d.problems.append(f"torchtitan model {name!r} flavor {flavor!r}{why} is not in ASAP's table of torchtitan models "
                          "(llama3 8B, 70B, 405B, debugmodel; qwen3 0.6B-32B, 30B-A3B, 235B-A22B; deepseek_v3 16B, 236B, 671B; "
                          "gpt_oss 20b, 120b; kimi_k2_7 moonlight-16B-A3B); "
                          "give the model dimensions in run.yaml")
        return d.build()
    fields, where, notes = got
    for field, value in fields.items():
        d.set(field, value, f"model.flavor {flavor} of {name}")
    d.notes.append(f"torchtitan's {name} {flavor} model args ({where}); d_ff {fields['d_ff']} by torchtitan's "
                   "FeedForward rule (2/3 x 4 x dim, x ffn_dim_multiplier, rounded up to multiple_of)")
    d.notes.extend(notes)
    return d.build()


def _torchtitan_dump(config: ShardingConfig) -> ModelDims:
    """The sizes torchtitan built, from the dump's model tree (bot.configs.torchtitan_json.model_fields)."""
    from bot.configs.torchtitan_json import model_fields

    d = _Dims(config.source)
    seq = _int(config.settings.get("training.seq_len"))
    if seq:
        d.set("seq_len", seq, "training.max_context_length")
    fields, problems = model_fields(config)
    name = f"{config.settings.get('model.name', '?')} {config.settings.get('model.flavor', '')}".strip()
    d.fill(fields, f"model_spec.model ({name})")
    d.problems.extend(problems)
    return d.build()


# ------------------------------------------------------------------------------------------------- values
_int = positive_int
_bool = as_bool


def _values(config: ShardingConfig, names: tuple[str, ...]) -> dict[str, Scalar]:
    """Every key of ``names`` the config states, dotted path -> value (as :func:`knowledge` reads settings)."""
    out: dict[str, Scalar] = {}
    if not (config.launch or config.files):  # a YAML file: every key it holds, wherever it sits
        root = compose(config.text, config.source)
        if root is not None:
            out.update(read_settings(root, names, normalize=config.format == "megatron"))
    if config.command:  # a recorded launch command's flags win over the YAML's keys (argparse: the last wins)
        flags = {p for p in config.settings if "." not in p}
        out = {p: v for p, v in out.items() if p.rsplit(".", 1)[-1] not in flags}
    out.update(config.settings)
    return out


def _find(values: dict[str, Scalar], *names: str) -> tuple[str | None, Scalar]:
    return find_by_name(values, *names)  # type: ignore[return-value]


_MULTIPLY = re.compile(r"\$\{multiply:\s*(\d+)\s*,\s*\$\{\.?([A-Za-z_]\w*)\}\s*\}")


def _number(values: dict[str, Scalar], value: Scalar, notes: list[str], path: str) -> int | None:
    """An integer value, evaluating NeMo's ``${multiply:4, ${.hidden_size}}``; other expressions are named."""
    n = _int(value)
    if n is not None or not isinstance(value, str):
        return n
    m = _MULTIPLY.fullmatch(value.strip())
    if m:
        other = _int(_find(values, m.group(2))[1])
        return int(m.group(1)) * other if other else None
    if "${" in value or "$" in value:
        notes.append(f"{path} is an expression ASAP does not evaluate ({value})")
    return None


# ------------------------------------------------------------------------------------------------ Megatron
MEGATRON_NAMES: tuple[str, ...] = (
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
    "group_query_attention", "kv_channels", "swiglu", "activation", "activation_func", "gated_linear_unit",
    "squared_relu", "vocab_size", "padded_vocab_size", "make_vocab_size_divisible_by", "num_experts", "num_moe_experts",
    "moe_router_topk", "seq_length", "sequence_length", "encoder_seq_length", "tokenizer_type", "tokenizer_model", "vocab_file",
    "tensor_model_parallel_size", "type", "library", "untie_embeddings_and_output_weights",
    "share_embeddings_and_output_weights", "window_size", "window_attn_skip_freq",
    # DeepSeek-V3-style MoE and MLA (Megatron-LM arguments.py _add_moe_args / _add_mla_args; Megatron-Core
    # TransformerConfig / MLATransformerConfig field names in YAML)
    "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_layer_freq", "moe_latent_size",
    "multi_latent_attention",
    "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
    # hybrid Mamba stacks (Megatron-LM --hybrid-layer-pattern / deprecated --hybrid-override-pattern; Megatron-Core
    # TransformerConfig mamba_* fields; Megatron-Bridge HybridModelProvider)
    "hybrid_layer_pattern", "hybrid_override_pattern", "mamba_num_heads", "mamba_head_dim", "mamba_state_dim",
    "mamba_num_groups",
    # multi-token prediction (Megatron-LM --mtp-num-layers; TransformerConfig.mtp_num_layers)
    "mtp_num_layers", "mtp_hybrid_override_pattern", "mtp_hybrid_layer_pattern",
)


def _megatron(config: ShardingConfig) -> ModelDims:
    v = _values(config, MEGATRON_NAMES)
    d = _Dims(config.source)
    launch = config.launch is not None
    name = Path(config.source).name

    def where(path: str | None) -> str:
        flag = "--" + path.rsplit(".", 1)[-1].replace("_", "-") if launch and path else path
        return f"{flag} in {name}"

    for field, keys in (("layers", ("num_layers",)), ("d_model", ("hidden_size",)),
                        ("heads", ("num_attention_heads",)), ("head_dim", ("kv_channels",)),
                        ("experts", ("num_moe_experts", "num_experts"))):
        path, value = _find(v, *keys)
        if path is not None:
            d.set(field, _number(v, value, d.notes, path), where(path))
    path, value, differs = trained_seq_length(v, "seq_length", "encoder_seq_length")
    if path is not None:
        d.set("seq_len", _number(v, value, d.notes, path), where(path))
    d.notes.extend([differs] if differs else [])
    gated = _megatron_gated(v, d, where, launch)
    _megatron_ffn(v, d, where, gated)
    _megatron_kv(v, d, where, launch)
    _megatron_vocab(v, d, where)
    _megatron_tied(v, d, where, launch)
    _megatron_window(v, d, where)
    if d.values.get("experts", 1) > 1:
        path, k = _find(v, "moe_router_topk")
        if _int(k):
            d.set("experts_per_token", _int(k), where(path))
        else:
            d.set("experts_per_token", 2, "Megatron default --moe-router-topk 2")
            d.notes.append("moe_router_topk not stated: Megatron's default top-2 routing")
        _megatron_moe_layout(v, d, where)
    _megatron_mla(v, d, where, launch)
    _megatron_hybrid(v, d, where)
    path, mtp = _find(v, "mtp_num_layers")
    if _int(mtp) and "layer_pattern" in d.values:
        _hybrid_mtp(v, d, where, path, _int(mtp))  # type: ignore[arg-type]
    elif _int(mtp):
        d.set("mtp_layers", _int(mtp), where(path))
    return d.build()


def _hybrid_mtp(v: dict[str, Scalar], d: _Dims, where: Any, path: str | None, modules: int) -> None:
    """A hybrid stack's MTP modules. Megatron-LM writes them into the pattern after '/' (``.../*E/*E``);
    Megatron-Bridge gives the module's own pattern (``mtp_hybrid_override_pattern``, Nemotron 3: ``*E``) and
    ``mtp_num_layers`` modules, which ASAP appends to the pattern the same way."""
    from bot.runs.layer_pattern import parse_layer_pattern

    pattern = str(d.values["layer_pattern"])
    have = parse_layer_pattern(pattern).mtp_modules
    if have:
        if have != modules:
            d.notes.append(f"{where(path)} {modules} disagrees with the layer pattern's {have} MTP module(s) after "
                           "'/': the pattern's are priced")
        return
    mpath, module = _find(v, "mtp_hybrid_override_pattern", "mtp_hybrid_layer_pattern")
    text = str(module).strip().strip("'\"") if module not in (None, "") else ""
    if not text:
        d.notes.append(f"{where(path)} {modules}: the hybrid stack's MTP module pattern is not stated "
                       "(mtp_hybrid_override_pattern), so its MTP layers are not priced")
        return
    d.text("layer_pattern", pattern + ("/" + text) * modules,
           f"{d.origin.get('layer_pattern', 'the config')} + {modules} x {where(mpath)} ({text}, {where(path)})")


MAMBA_KEYS: dict[str, str] = {"mamba_num_heads": "mamba_heads", "mamba_head_dim": "mamba_head_dim",
                              "mamba_state_dim": "mamba_state_dim", "mamba_num_groups": "mamba_groups"}


def _megatron_hybrid(v: dict[str, Scalar], d: _Dims, where: Any) -> None:
    """A hybrid Mamba stack: ``hybrid_layer_pattern`` (or the deprecated ``hybrid_override_pattern``) and the
    ``mamba_*`` sizes. Megatron-LM ignores ``--num-layers`` when a pattern is given (arguments.py), so the
    pattern's layer count replaces it; a pattern ASAP cannot price is named in the problems."""
    from bot.runs.layer_pattern import parse_layer_pattern

    path, value = _find(v, "hybrid_layer_pattern", "hybrid_override_pattern")
    if path is None or value in (None, ""):
        return
    pattern = str(value).strip().strip("'\"")
    try:
        counts = parse_layer_pattern(pattern)
    except ValueError as exc:
        d.problems.append(f"{where(path)}: {exc}")
        return
    d.text("layer_pattern", pattern, where(path))
    stated = d.values.get("layers")
    if stated and stated != counts.layers:
        d.notes.append(f"num_layers {stated} is ignored with a hybrid layer pattern (Megatron-LM arguments.py): the "
                       f"pattern holds {counts.layers} layers")
    d.set("layers", counts.layers, where(path) + " (its length)")
    for key, field in MAMBA_KEYS.items():
        kpath, n = _find(v, key)
        if _int(n):
            d.set(field, _int(n), where(kpath))
    left = [k for k, f in MAMBA_KEYS.items() if f not in d.values and k != "mamba_num_heads"]
    if counts.mamba and left:
        d.notes.append(f"{', '.join(left)} not stated: Megatron-Core's defaults (mamba_state_dim 128, mamba_head_dim "
                       "64, mamba_num_groups 8)" + ("" if "mamba_heads" in d.values else
                                                    "; mamba_num_heads not stated: 2 x hidden_size / mamba_head_dim"))


def _megatron_window(v: dict[str, Scalar], d: _Dims, where: Any) -> None:
    """Megatron ``--window-size (left, right)`` turns on sliding-window attention (the left extent is the window);
    ``--window-attn-skip-freq N`` makes one layer in N global (arguments.py: "(N-1):1 ratio"); a list pattern is
    not read."""
    path, value = _find(v, "window_size")
    if path is None or value is None:
        return
    m = re.match(r"\s*[\(\[]?\s*(\d+)", str(value))
    if not m or int(m.group(1)) <= 0:
        d.notes.append(f"{path} {value!r} is not read as a window size")
        return
    d.set("sliding_window", int(m.group(1)), where(path))
    freq_path, freq = _find(v, "window_attn_skip_freq")
    if _int(freq):
        d.set("global_every", _int(freq), where(freq_path))
    elif freq_path is not None:
        d.notes.append(f"{freq_path} {freq!r} (a layer pattern) is not read: every layer priced as local")


def _megatron_moe_layout(v: dict[str, Scalar], d: _Dims, where: Any) -> None:
    """Expert width, shared experts and dense layers (DeepSeek-V3 style) from Megatron's MoE flags.

    ``--moe-ffn-hidden-size`` is each expert's width (then ``--ffn-hidden-size`` is the dense layers'); the shared
    experts' total width ``--moe-shared-expert-intermediate-size`` counts as that many experts of the routed width;
    ``--moe-layer-freq`` (an int N: one MoE layer in N; or a list such as ``([0]*3+[1]*58)``, 0 = dense) gives the
    dense layers, which ASAP prices by count (its model puts them first, as DeepSeek-V3 does).
    """
    path, value = _find(v, "moe_ffn_hidden_size")
    expert = _int(value)
    if expert:
        dense = d.values.get("d_ff")
        if dense and dense != expert:
            d.set("dense_d_ff", dense, d.origin["d_ff"])
        d.set("d_ff", expert, where(path))
    path, value = _find(v, "moe_shared_expert_intermediate_size")
    width, per = _int(value), d.values.get("d_ff")
    if width and per:
        n = max(1, round(width / per))
        d.set("shared_experts", n, where(path) + (f" ({width} / expert width {per})" if n != 1 else ""))
        if n * per != width:
            d.notes.append(f"shared-expert width {width} is not a multiple of the expert width {per}: priced as {n}")
    path, value = _find(v, "moe_latent_size")  # LatentMoE (Megatron-Core TransformerConfig.moe_latent_size)
    if _int(value):
        d.set("moe_latent_size", _int(value), where(path))
    path, value = _find(v, "moe_layer_freq")
    layers = d.values.get("layers")
    if path is None or not layers:
        return
    pattern = moe_layer_pattern(value, layers)
    if pattern is None:
        d.notes.append(f"{where(path)} ({value}) not understood: every layer priced as a MoE layer")
        return
    dense = pattern.count(0)
    if dense:
        d.set("dense_layers", dense, where(path))
        if pattern[:dense] != [0] * dense:
            d.notes.append(f"{where(path)}: the {dense} dense layers are not all first; priced by count")


def moe_layer_pattern(value: Scalar, layers: int) -> list[int] | None:
    """Megatron's ``moe_freq_type``: an int N means layer i is MoE when i % N == 0; a string is a Python list
    expression of 0/1 built from list literals, ``+`` and ``*`` (read without eval). None when unreadable or
    not ``layers`` long."""
    import ast

    n = _int(value)
    if n:
        return [1 if i % n == 0 else 0 for i in range(layers)]
    if isinstance(value, list):
        out = value
    elif isinstance(value, str):
        def ev(node: ast.AST) -> Any:
            if isinstance(node, ast.Expression):
                return ev(node.body)
            if isinstance(node, ast.List):
                return [ev(e) for e in node.elts]
            if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
                return node.value
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
                a, b = ev(node.left), ev(node.right)
                if isinstance(node.op, ast.Mult) and isinstance(a, list) and isinstance(b, int) and b <= 10_000:
                    return a * b
                if isinstance(node.op, ast.Add) and isinstance(a, list) and isinstance(b, list):
                    return a + b
            raise ValueError("unsupported")
        try:
            out = ev(ast.parse(value.strip().strip("'\""), mode="eval"))
        except (SyntaxError, ValueError, RecursionError):
            return None
    else:
        return None
    if not isinstance(out, list) or len(out) != layers or any(x not in (0, 1) for x in out):
        return None
    return [int(x) for x in out]


# Megatron-LM arguments.py _add_mla_args defaults, taken when --multi-latent-attention leaves a size out.
MLA_DEFAULTS: dict[str, int | None] = {"q_lora_rank": None, "kv_lora_rank": 32, "qk_head_dim": 128,
                                       "qk_pos_emb_head_dim": 64, "v_head_dim": 128}
MLA_FIELDS: dict[str, str] = {"q_lora_rank": "q_lora_rank", "kv_lora_rank": "kv_lora_rank",
                              "qk_head_dim": "qk_nope_head_dim", "qk_pos_emb_head_dim": "qk_rope_head_dim",
                              "v_head_dim": "v_head_dim"}


def _megatron_mla(v: dict[str, Scalar], d: _Dims, where: Any, launch: bool) -> None:
    """Multi-head latent attention: ``--multi-latent-attention`` with ``--q-lora-rank`` (None: full-rank query),
    ``--kv-lora-rank``, ``--qk-head-dim`` (the part without rotary embedding), ``--qk-pos-emb-head-dim`` and
    ``--v-head-dim``; a size left out takes Megatron-LM's argparse default (named in the notes)."""
    path, on = _find(v, "multi_latent_attention")
    if not _bool(on):
        return
    for key, field in MLA_FIELDS.items():
        kpath, value = _find(v, key)
        if _int(value):
            d.set(field, _int(value), where(kpath))
        elif MLA_DEFAULTS[key] is not None:
            d.set(field, MLA_DEFAULTS[key], f"Megatron default --{key.replace('_', '-')} {MLA_DEFAULTS[key]}")
            d.notes.append(f"{key} not stated with multi_latent_attention: Megatron's default {MLA_DEFAULTS[key]}")


def _megatron_tied(v: dict[str, Scalar], d: _Dims, where: Any, launch: bool) -> None:
    """Megatron shares the word embedding with the output layer unless --untie-embeddings-and-output-weights
    (arguments.py: a store_true flag; NeMo: share_embeddings_and_output_weights). A YAML that says neither: unknown."""
    path, untie = _find(v, "untie_embeddings_and_output_weights")
    if _bool(untie) is not None:
        d.flag("tied_embeddings", not _bool(untie), where(path))
        return
    path, share = _find(v, "share_embeddings_and_output_weights")
    if _bool(share) is not None:
        d.flag("tied_embeddings", bool(_bool(share)), where(path))
    elif launch:
        d.flag("tied_embeddings", True, "Megatron default (no --untie-embeddings-and-output-weights)")


def _megatron_gated(v: dict[str, Scalar], d: _Dims, where: Any, launch: bool) -> bool | None:
    """Whether the MLP is gated (3 matrices); Megatron's default is GeLU (2) when the config says nothing."""
    path, swiglu = _find(v, "swiglu")
    if _bool(swiglu) is not None:
        d.set("mlp_matrices", 3 if _bool(swiglu) else 2, where(path))
        return bool(_bool(swiglu))
    path, relu2 = _find(v, "squared_relu")
    if _bool(relu2):  # Megatron-LM --squared-relu (Nemotron-H, Nemotron 3): ReLU^2, no gate
        d.set("mlp_matrices", 2, where(path))
        return False
    path, act = _find(v, "activation", "activation_func")
    if isinstance(act, str) and act.strip():
        gated = act.strip().lower() in GATED or "glu" in act.strip().lower()
        d.set("mlp_matrices", 3 if gated else 2, f"{where(path)} ({act})")
        path2, glu = _find(v, "gated_linear_unit")
        if _bool(glu) is not None:  # Megatron-Core: activation_func + gated_linear_unit
            gated = bool(_bool(glu))
            d.set("mlp_matrices", 3 if gated else 2, where(path2))
        return gated
    path, glu = _find(v, "gated_linear_unit")
    if _bool(glu) is not None:
        d.set("mlp_matrices", 3 if _bool(glu) else 2, where(path))
        return bool(_bool(glu))
    if not launch and any(".config." in p or p.startswith("config.") for p in v):
        d.notes.append("the MLP activation is not stated (a NeMo 2 recipe's overrides; its base model is not read): "
                       "gated or plain MLP unknown")
        return None
    what = "no --swiglu flag" if launch else "no activation / swiglu key"
    d.default("mlp_matrices", 2, f"Megatron default GeLU MLP ({what})")
    d.notes.append(f"MLP activation not stated ({what}): Megatron's default GeLU, 2 weight matrices per MLP")
    return False


def _megatron_ffn(v: dict[str, Scalar], d: _Dims, where: Any, gated: bool | None) -> None:
    path, value = _find(v, "ffn_hidden_size")
    ffn = _number(v, value, d.notes, path) if path is not None else None
    if ffn:
        d.set("d_ff", ffn, where(path) + (f" ({value})" if isinstance(value, str) else ""))
        return
    h = d.values.get("d_model")
    if not h or gated is None:
        return
    ffn = int((4 * h * 2 / 3) / 64) * 64 if gated else 4 * h
    rule = "int(8 x hidden_size / 3 / 64) x 64 with --swiglu" if gated else "4 x hidden_size"
    d.set("d_ff", ffn, f"Megatron default ffn_hidden_size = {rule}")
    d.notes.append(f"ffn_hidden_size not stated: Megatron's default {rule} = {ffn}")


def _megatron_kv(v: dict[str, Scalar], d: _Dims, where: Any, launch: bool) -> None:
    heads = d.values.get("heads")
    path, groups = _find(v, "num_query_groups")
    gqa_path, gqa = _find(v, "group_query_attention")
    n = _int(groups)
    if n and (not launch or _bool(gqa) is True):
        d.set("kv_heads", n, where(path))
    elif n and launch:
        d.notes.append(f"--num-query-groups {n} is ignored without --group-query-attention (Megatron-LM): "
                       "one key/value head per query head")
        if heads:
            d.set("kv_heads", heads, "Megatron: no --group-query-attention")
    elif heads and (launch or path is not None or gqa_path is not None):
        d.set("kv_heads", heads, "no grouped-query attention stated (num_query_groups = heads)")


# Megatron ``--tokenizer-type`` values whose vocabulary is fixed by the tokenizer itself (any other type loads a
# model file ASAP does not read): the size before Megatron pads it to make_vocab_size_divisible_by x TP.
TOKENIZER_VOCAB: dict[str, tuple[int, str]] = {
    "GPT2BPETokenizer": (50257, "GPT-2's byte-level BPE, Hugging Face gpt2 config.json vocab_size"),
    "Llama2Tokenizer": (32000, "Llama 2's SentencePiece model, Hugging Face meta-llama/Llama-2-7b-hf config.json "
                               "vocab_size"),
}


def _megatron_vocab(v: dict[str, Scalar], d: _Dims, where: Any) -> None:
    path, padded = _find(v, "padded_vocab_size")
    if _int(padded):
        d.set("vocab", _int(padded), where(path))
        return
    path, size = _find(v, "vocab_size")
    if _int(size):
        _, div = _find(v, "make_vocab_size_divisible_by")
        _, tp = _find(v, "tensor_model_parallel_size")
        multiple = (_int(div) or 128) * (_int(tp) or 1)
        vocab = -(-_int(size) // multiple) * multiple  # type: ignore[operator]
        d.set("vocab", vocab, where(path) + (f", padded to a multiple of {multiple}" if vocab != _int(size) else ""))
        return
    path, kind = _find(v, "tokenizer_type")
    known = TOKENIZER_VOCAB.get(str(kind)) if kind not in (None, "") else None
    if known is not None:
        size_, source_ = known
        _, div = _find(v, "make_vocab_size_divisible_by")
        _, tp = _find(v, "tensor_model_parallel_size")
        multiple = (_int(div) or 128) * (_int(tp) or 1)
        vocab = -(-size_ // multiple) * multiple
        d.set("vocab", vocab, f"{where(path)}: {kind} has {size_:,} tokens ({source_})"
              + (f", padded to a multiple of {multiple} as Megatron pads it" if vocab != size_ else ""))
        return
    named = [f"{p.rsplit('.', 1)[-1]} {val}" for p, val in v.items()
             if val not in (None, "") and (p.rsplit(".", 1)[-1] in ("tokenizer_type", "tokenizer_model", "vocab_file")
                                           or ("tokenizer" in p and p.rsplit(".", 1)[-1] in ("type", "library")))]
    if named:
        d.notes.append(f"vocabulary size not stated: the config names only its tokenizer ({', '.join(named[:2])}), "
                       "whose vocabulary ASAP does not read")
    else:
        d.notes.append("vocabulary size not stated in the config")


# ------------------------------------------------------------------------------------------------- MaxText
MAXTEXT_KEYS: dict[str, str] = {
    "layers": "base_num_decoder_layers", "d_model": "base_emb_dim", "heads": "base_num_query_heads",
    "kv_heads": "base_num_kv_heads", "d_ff": "base_mlp_dim", "head_dim": "head_dim", "vocab": "vocab_size",
    "experts": "num_experts", "experts_per_token": "num_experts_per_tok", "mtp_layers": "mtp_num_layers",
}
MAXTEXT_MODEL_KEYS = (*MAXTEXT_KEYS.values(), "base_moe_mlp_dim", "mlp_activations", "global_parameter_scale",
                      "decoder_block", "logits_via_embedding", "sliding_window_size", "first_num_dense_layers",
                      "interleave_moe_layer_step", "shared_experts", "attention_type", "q_lora_rank", "kv_lora_rank",
                      "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# MaxText's MLA sizes (models/deepseek3-671b.yml) under the names bot.runs.record.ModelSpec uses.
MAXTEXT_MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# MaxText decoder blocks that use sliding_window_size on their local layers, and one global layer in how many
# (models/gemma2.py: local then global in each merged layer; models/gemma3.py GEMMA3_ATTENTION_PATTERN, 5 local + 1
# global; models/gpt_oss.py GPT_OSS_ATTENTION_PATTERN, local then global). Other blocks ignore the setting.
GLOBAL_EVERY: dict[str, int] = {"gemma2": 2, "gemma3": 6, "gpt_oss": 2}
# MaxText decoder blocks whose one scanned "layer" holds several transformer layers: Gemma 2 merges
# [local_attention, global_attention] into one (models/gemma2-*.yml: base_num_decoder_layers is "half of the real
# number of layers"; models/gemma2.py Gemma2DecoderLayer runs self_attention_local then self_attention_global).
LAYERS_PER_DECODER_LAYER: dict[str, int] = {"gemma2": 2}


MAXTEXT_BASE_SEQ_LEN = 2048  # base.yml max_target_length (MaxText tpu-recipes-v0.1.2 line 454; HEAD line 880)


def _maxtext(config: ShardingConfig) -> ModelDims:
    """MaxText pyconfig's merge: base.yml chain < ``models/<model_name>.yml`` < command-line overrides."""
    d = _Dims(config.source)
    s = config.settings
    seq = _int(s.get("max_target_length"))
    if seq is None:  # pyconfig fills in base.yml's value: 2048 at every MaxText tag and commit this repo reads
        d.set("seq_len", MAXTEXT_BASE_SEQ_LEN, "max_target_length not set: MaxText base.yml's default 2048")
    else:
        d.set("seq_len", seq, f"max_target_length in {_where(config, 'max_target_length')}")
    name = s.get("model_name")
    model: dict[str, Any] = {}
    model_where = ""
    if isinstance(name, str) and name and name != "default":
        name = name.replace("-Instruct", "")  # pyconfig: -Instruct models share the base model's file
        found = _model_file(config, name, d)
        if found is None:
            return d.build()
        model, model_where = found
    merged: dict[str, tuple[object, str]] = {}
    for key in MAXTEXT_MODEL_KEYS:
        cli = _is_cli(config, key)
        if key in s and not cli:
            merged[key] = (_raw_value(config, key), f"{key} in {_where(config, key)}")
        if key in model:
            merged[key] = (model[key], f"{key} in {model_where}")
        if key in s and cli:
            merged[key] = (_raw_value(config, key), f"{key}= on {_where(config, key)}")
    _maxtext_fields(merged, d)
    return d.build()


def _maxtext_fields(merged: dict[str, tuple[object, str]], d: _Dims) -> None:
    for field, key in MAXTEXT_KEYS.items():
        if key in merged:
            d.set(field, _int(merged[key][0]), merged[key][1])
    dense_mlp = d.values.get("d_ff"), d.origin.get("d_ff", "")
    moe = _int(merged.get("base_moe_mlp_dim", (None, ""))[0])
    if d.values.get("experts", 1) > 1 and moe:
        d.set("d_ff", moe, merged["base_moe_mlp_dim"][1])
    if d.values.get("experts", 1) > 1:
        _maxtext_moe_layout(merged, d, dense_mlp)
    if str(merged.get("attention_type", ("", ""))[0]).lower() == "mla":
        for key in MAXTEXT_MLA_KEYS:
            if key in merged:
                d.set(key, _int(merged[key][0]), merged[key][1])
    if d.values.get("experts", 1) <= 1:  # dense: MaxText's num_experts 1
        for f in ("experts", "experts_per_token"):
            d.values.pop(f, None)
            d.origin.pop(f, None)
    acts, where = merged.get("mlp_activations", (None, ""))
    if isinstance(acts, str):
        try:
            acts = yaml.safe_load(acts)
        except yaml.YAMLError:
            acts = None
    if isinstance(acts, list) and acts:
        d.set("mlp_matrices", len(acts) + 1, f"{where} ({acts})")  # one wi per activation, plus wo
    scale = _int(merged.get("global_parameter_scale", (1, ""))[0]) or 1
    if scale != 1:
        _scale(d, scale, merged["global_parameter_scale"][1])
    tied, tied_where = merged.get("logits_via_embedding", (None, ""))
    if _bool(tied) is not None:  # MaxText: the output logits use the (shared) input embedding
        d.flag("tied_embeddings", bool(_bool(tied)), tied_where)
    block, block_where = merged.get("decoder_block", (None, ""))
    window, window_where = merged.get("sliding_window_size", (None, ""))
    if block and str(block) in GLOBAL_EVERY and _int(window):
        d.set("sliding_window", _int(window), window_where)
        d.set("global_every", GLOBAL_EVERY[str(block)], f"the {block} decoder's attention pattern ({block_where})")
    per = LAYERS_PER_DECODER_LAYER.get(str(block)) if block else None
    if per and "layers" in d.values:
        d.values["layers"] *= per
        d.origin["layers"] += f", x{per}: each {block} decoder layer holds {per} transformer layers ({block_where})"


def _maxtext_moe_layout(merged: dict[str, tuple[object, str]], d: _Dims, dense_mlp: tuple[int | None, str]) -> None:
    """Which layers have experts, and the shared experts, as MaxText builds them (maxtext_utils.py
    ``get_dense_moe_layers`` and ``get_shared_expert_mlp_dim``, layers/moe.py, commit e591f30c).

    DeepSeek blocks: the first ``first_num_dense_layers`` layers are dense MLPs of ``base_mlp_dim``. Llama 4 blocks:
    layer i has experts when (i + 1) % ``interleave_moe_layer_step`` == 0, the others are dense (ASAP prices dense
    layers by count). Every MoE layer adds ``shared_experts`` always-active MLPs of ``base_moe_mlp_dim`` (Gemma 4:
    of ``base_mlp_dim``), counted here in experts of the routed width, as the Megatron reader counts them.
    """
    block = str(merged.get("decoder_block", ("", ""))[0]).lower()
    layers, expert = d.values.get("layers"), d.values.get("d_ff")
    dense = 0
    if block == "deepseek" and "first_num_dense_layers" in merged:
        dense = _int(merged["first_num_dense_layers"][0]) or 0
        where = merged["first_num_dense_layers"][1]
    elif block == "llama4" and "interleave_moe_layer_step" in merged and layers:
        step = _int(merged["interleave_moe_layer_step"][0]) or 1
        dense, where = layers - layers // step, f"{merged['interleave_moe_layer_step'][1]} (one MoE layer in {step})"
    if dense and layers and dense < layers:
        d.set("dense_layers", dense, where)
        if dense_mlp[0] and dense_mlp[0] != expert:
            d.set("dense_d_ff", dense_mlp[0], dense_mlp[1])
    n = _int(merged.get("shared_experts", (None, ""))[0])
    if n and expert:
        width = dense_mlp[0] if block == "gemma4" and dense_mlp[0] else expert
        count = max(1, round(n * width / expert))
        detail = f" ({n} x {width} wide / expert width {expert})" if count != n else ""
        d.set("shared_experts", count, merged["shared_experts"][1] + detail)
        if count * expert != n * width:
            d.notes.append(f"shared-expert width {n * width} is not a multiple of the expert width {expert}: priced "
                           f"as {count} experts")


def _scale(d: _Dims, scale: int, where: str) -> None:
    """MaxText ``get_individual_scales`` (src/maxtext/configs/types.py, commit e591f30c): log2(scale) = 3q + r;
    heads and mlp_dim x 2^(q + [r > 0]), emb_dim x 2^(q + [r > 1]), layers x 2^q; head_dim unscaled."""
    if scale & (scale - 1):
        d.problems.append(f"global_parameter_scale {scale} is not a power of two: MaxText refuses it")
        return
    q, r = divmod(scale.bit_length() - 1, 3)
    factors = {"heads": 2 ** (q + (r > 0)), "kv_heads": 2 ** (q + (r > 0)), "d_ff": 2 ** (q + (r > 0)),
               "d_model": 2 ** (q + (r > 1)), "layers": 2 ** q}
    for field, f in factors.items():
        if field in d.values and f != 1:
            d.values[field] *= f
            d.origin[field] += f", x{f} by global_parameter_scale {scale}"
    d.notes.append(f"global_parameter_scale {scale} ({where}): MaxText scales heads and mlp_dim x"
                   f"{factors['heads']}, emb_dim x{factors['d_model']}, layers x{factors['layers']}")


def _is_cli(config: ShardingConfig, key: str) -> bool:
    origin = config.origins.get(key)
    return origin is not None and origin.via is not None


def _where(config: ShardingConfig, key: str) -> str:
    origin = config.origins.get(key)
    if origin is not None and origin.via is not None:
        return origin.via
    file = origin.file if origin is not None and origin.file else config.source
    return Path(file).name


def _raw_value(config: ShardingConfig, key: str) -> object:
    """A setting's value; lists (``mlp_activations``) are read back from their text, which the reader keeps."""
    value = config.settings.get(key)
    origin = config.origins.get(key)
    if value == "<sequence>" and origin is not None and origin.start >= 0:
        try:
            return yaml.safe_load(config.text_of(origin.file)[origin.start:origin.end])
        except (yaml.YAMLError, KeyError):
            return None
    return value


def _model_file(config: ShardingConfig, name: str, d: _Dims) -> tuple[dict[str, Any], str] | None:
    """``models/<name>.yml`` as pyconfig finds it: beside the config (or one folder up) in the run's MaxText
    checkout, else ASAP's bundled copy of MaxText's models; None (with a problem) when there is none."""
    if not MODEL_NAME.fullmatch(name):
        d.problems.append(f"model_name {name!r} is not a MaxText model name")
        return None
    text, where = None, ""
    if config.has_path:
        yamls = [config.source, *config.files]
        for file in (f for f in yamls if f.endswith((".yml", ".yaml"))):
            for folder in (Path(file).parent, Path(file).parent.parent):
                cand = folder / "models" / f"{name}.yml"
                if cand.is_file():
                    text, where = _read(cand), f"{cand.parent.name}/{cand.name} (the run's MaxText checkout)"
                    break
            if text is not None:
                break
    if text is None:
        bundled = resources.files("bot.configs").joinpath("data", "maxtext_models", f"{name}.yml")
        if bundled.is_file():
            text, where = bundled.read_text(encoding="utf-8"), f"MaxText models/{name}.yml (ASAP's bundled copy)"
    if text is None:
        d.problems.append(f"model_name {name!r} names no MaxText model file: no models/{name}.yml in the run's "
                          "MaxText checkout nor in ASAP's copy of MaxText's models (bot/configs/data/maxtext_models)")
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        d.problems.append(f"{where} is not valid YAML: {exc}")
        return None
    if not isinstance(data, dict):
        d.problems.append(f"{where} is not a YAML mapping")
        return None
    return data, where


def _read(path: Path) -> str:
    from bot.configs.detect import read_config_text

    return read_config_text(path)
