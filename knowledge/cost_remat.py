"""Rematerialization (activation checkpointing) policies: what each keeps in HBM and what it recomputes.

A policy is resolved to a :class:`RematSpec`: the per-layer tensors it saves, offloads to host memory,
or recomputes in the backward pass. :func:`activation_terms` then turns a spec into bytes per token per
layer (stored for every layer, and transient while one layer is re-materialized during its backward) and
:func:`recompute_params_per_layer` into the forward matmul work that is done twice.

Sources, per framework:

* **MaxText** (``remat_policy``): ``Decoder.get_remat_policy`` in ``MaxText/layers/decoders.py``
  (AI-Hypercomputer/maxtext) maps each name to a ``jax.checkpoint`` policy over the names the decoder layer
  gives its tensors with ``checkpoint_name`` (``query_proj``, ``key_proj``, ``value_proj``, ``context``,
  ``out_proj``, ``mlpwi`` / ``mlpwi_0`` / ``mlpwi_1``, ``mlpwo``):
  ``full`` -> no policy (only the scanned layer's input survives); ``minimal`` ->
  ``checkpoint_dots_with_no_batch_dims`` (every projection output, not the attention-score dots);
  ``minimal_with_context`` / ``minimal_flash`` -> minimal + ``context``; ``save_dot_with_context_except_mlp``
  -> q, k, v, context, out_proj; ``save_dot_except_mlpwi`` -> q, k, v, out_proj, mlpwo;
  ``save_dot_except_mlp`` -> q, k, v, out_proj; ``save_qkv_proj`` -> q, k, v; ``save_out_proj`` -> out_proj;
  ``qkv_proj_offloaded`` / ``minimal_offloaded`` -> the same names offloaded to pinned host memory;
  ``none`` -> no rematerialization; ``custom`` -> each named tensor as its own key says (``query_proj: offload``,
  ``context: device``, ``mlpwo: remat``; base.yml: every tensor ``remat`` but ``decoder_layer_input: device``).
  ``jax.checkpoint`` keeps a saveable value only when the backward pass
  needs it: ``mlpwo`` (the MLP's down projection) only feeds the residual sum, whose gradient needs no
  saved value, so it is never a residual and costs no memory (the next layer's input is saved anyway).
* **Megatron-LM / NeMo** (``recompute_granularity`` null | selective | full, ``recompute_method`` uniform
  | block, ``recompute_num_layers``; NeMo 1.x ``activations_checkpoint_*``): Korthikanti et al. 2022,
  "Reducing Activation Recomputation in Large Transformer Models" [KOR]: no recompute stores ~34·h bytes
  per token per layer plus 5·a·s for the attention scores (§4.1, Table 2); *selective* recomputes the
  core attention, removing the 5·a·s term (§4.3); *full* keeps only each (group of) layer's 2·h input
  (§4: "2sbhL"); sequence parallelism divides every term by t, tensor parallelism alone only 24 of the
  34 (§4.2.2, Table 2: ``sbh(10 + 24/t + 5as/(ht))``).
* **torchtitan** (``[activation_checkpoint] mode`` / ``selective_ac_option``; pytorch/torchtitan
  ``torchtitan/models/llama3/infra/parallelize.py`` ``_apply_ac_to_transformer_block``): ``selective_op``
  (mode "selective", option "op") saves the outputs of the attention kernel (SDPA), the reductions and every
  *second* ``aten.mm`` of a block and recomputes everything else: about half the block's forward matmuls,
  all its elementwise ops, and none of the attention core; ``selective_layer`` (option "2": every second
  block wrapped in full checkpointing) recomputes half the layers in full. Written here as the remat names
  ``selective_op`` / ``selective_layer`` (``selective_layer_<k>`` for every k-th block).
* **Plain JAX** policy names (``jax.checkpoint_policies``): ``nothing_saveable`` = full,
  ``everything_saveable`` = none, ``dots_saveable`` / ``checkpoint_dots`` = every dot,
  ``dots_with_no_batch_dims_saveable`` / ``checkpoint_dots_with_no_batch_dims`` = minimal. Other names
  (in-house trainers) are read by their words (``save_qkv_and_mlp_outputs`` -> q, k, v and the MLP
  output) and marked inexact, which widens the memory band.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from knowledge.cost_settings import TrainingSettings

# Tensors a decoder layer can keep besides its input (bf16, per token, before sharding).
RESIDUALS: tuple[str, ...] = ("q", "k", "v", "context", "o", "mlpwi", "mlpwo")

_QKV = frozenset({"q", "k", "v"})
_MINIMAL = frozenset({"q", "k", "v", "o", "mlpwi", "mlpwo"})

# MaxText names -> (saved, offloaded). Source: MaxText/layers/decoders.py get_remat_policy.
MAXTEXT_POLICIES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "full": (frozenset(), frozenset()),
    "minimal": (_MINIMAL, frozenset()),
    "minimal_with_context": (_MINIMAL | {"context"}, frozenset()),
    "minimal_flash": (_MINIMAL | {"context"}, frozenset()),
    "save_dot_with_context_except_mlp": (_QKV | {"context", "o"}, frozenset()),
    "save_dot_except_mlpwi": (_QKV | {"o", "mlpwo"}, frozenset()),
    "save_dot_except_mlp": (_QKV | {"o"}, frozenset()),
    "save_qkv_proj": (_QKV, frozenset()),
    "save_out_proj": (frozenset({"o"}), frozenset()),
    "qkv_proj_offloaded": (frozenset(), _QKV),
    "minimal_offloaded": (frozenset(), _MINIMAL),
    "save_all": (_MINIMAL | {"context"}, frozenset()),
    # run.yaml's training.remat vocabulary ("dots": every matmul output, context included)
    "dots": (_MINIMAL | {"context"}, frozenset()),
}

# From fastest (most memory) to slowest (least memory): the ladder a "lighter remat" move walks.
# MaxText base.yml lists the policies in this order ("trade-off between speed (fastest to slowest) and HBM
# usage (highest to lowest)").
MAXTEXT_LADDER: tuple[str, ...] = (
    "none",
    "minimal_with_context",
    "minimal",
    "save_dot_with_context_except_mlp",
    "save_dot_except_mlpwi",
    "save_dot_except_mlp",
    "save_qkv_proj",
    "full",
)
MEGATRON_LADDER: tuple[str, ...] = ("none", "selective", "full")

# MaxText ``remat_policy: custom``: the config key of each named tensor -> ASAP's residual name. Each key takes
# 'remat' | 'device' | 'offload' (base.yml: all 'remat' but decoder_layer_input 'device', the scanned layer's input
# that remat restarts from). Source: MaxText base.yml and layers/decoders.py get_remat_policy (custom branch).
MAXTEXT_CUSTOM_TENSORS: dict[str, str] = {
    "query_proj": "q", "key_proj": "k", "value_proj": "v", "context": "context", "out_proj": "o",
    "mlpwi": "mlpwi", "mlpwi_0": "mlpwi", "mlpwi_1": "mlpwi", "mlpwo": "mlpwo",
}
CUSTOM_CHOICES = ("remat", "device", "offload")

JAX_POLICY_NAMES: dict[str, str] = {
    "nothing_saveable": "full",
    "everything_saveable": "none",
    "dots_saveable": "dots",
    "checkpoint_dots": "dots",
    "dots_with_no_batch_dims_saveable": "minimal",
    "checkpoint_dots_with_no_batch_dims": "minimal",
}


@dataclass(frozen=True)
class RematSpec:
    """A resolved rematerialization policy."""

    policy: str  # as written (normalised to lower case), e.g. "save_dot_except_mlpwi", "selective", "none"
    style: str = "named"  # "named" (JAX/MaxText residual names) or "megatron"
    stores_everything: bool = False  # no rematerialization at all
    saved: frozenset[str] = frozenset()  # residuals kept in HBM besides the layer input
    offloaded: frozenset[str] = frozenset()  # residuals kept in host memory (neither in HBM nor recomputed)
    input_offloaded: bool = False  # MaxText custom decoder_layer_input: offload: each layer's input kept in host memory
    recompute_attention_core: bool = False  # Megatron selective: QK^T/softmax/AV recomputed, scores not stored
    megatron_full: bool = False  # Megatron full recompute
    megatron_method: str = "uniform"  # uniform | block
    megatron_layers: int = 1  # recompute_num_layers
    every_other_mm: bool = False  # torchtitan selective op: every second matmul output (and SDPA's) saved
    layer_every: int = 0  # torchtitan selective layer: every k-th block fully checkpointed (0: not this policy)
    # Megatron-Core selective recompute_modules beyond core_attn (layernorm, moe_act, mlp, moe, shared_experts)
    megatron_modules: frozenset[str] = frozenset()
    exact: bool = True  # the name was recognised exactly (else read from its words)
    source: str = "default"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        if self.megatron_modules:
            return f"{self.policy} ({', '.join(sorted(self.megatron_modules))})"
        return self.policy

    @property
    def is_full(self) -> bool:
        return self.megatron_full or (self.style == "named" and not self.stores_everything and not self.saved
                                      and not self.offloaded and not self.every_other_mm and not self.layer_every)

    @property
    def reruns_moe_layer(self) -> bool:
        """The whole MoE layer's forward runs again in backward: full recompute, or Megatron-Core's selective ``moe``
        module, which checkpoints MoELayer.forward as one function (moe_layer.py custom_forward: route, dispatch,
        experts, combine), so its all-to-alls and per-layer routing work run twice."""
        return self.is_full or "moe" in self.megatron_modules

    @property
    def core_recompute_share(self) -> float:
        """Share of the layers whose attention core is re-run in backward (when it is re-run at all)."""
        return 1.0 / self.layer_every if self.layer_every else 1.0

    @property
    def elementwise_recompute(self) -> float:
        """Share of the layers whose elementwise forward work (norms, activations, rope) is re-run in backward."""
        if self.is_full or self.every_other_mm:
            return 1.0
        return 1.0 / self.layer_every if self.layer_every else 0.0


def _norm(text: object) -> str:
    return str(text).strip().strip("'\"").lower()


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", name) if w]


def _from_words(name: str) -> RematSpec | None:
    """Read an in-house policy name by its words; None when no word is recognised."""
    words = _words(name)
    if not words:
        return None
    saved: set[str] = set()
    joined = "_".join(words)
    if "qkv" in words or any(w in words for w in ("query", "q")):
        saved |= _QKV
    if "key" in words or "k" in words:
        saved.add("k")
    if "value" in words or "v" in words:
        saved.add("v")
    if "context" in words or "attn_out" in joined:
        saved.add("context")
    if re.search(r"(^|_)(out_proj|o_proj|outproj|attn_proj)($|_)", joined):
        saved.add("o")
    mlp_words = {"mlp", "ffn", "mlpwi", "wi", "gate", "up", "fc1"}
    if words and mlp_words & set(words):
        if re.search(r"(mlp|ffn)_(outputs?|out)($|_)", joined) or "mlpwo" in words or "down" in words:
            saved.add("mlpwo")
        else:
            saved.add("mlpwi")
    if "dots" in words or "dot" in words:
        saved |= _MINIMAL | {"context"}
    if "except" in words:
        after = words[words.index("except") + 1 :]
        if any(w in ("mlp", "ffn", "mlpwi") for w in after):
            saved.discard("mlpwi")
        if "context" in after:
            saved.discard("context")
    if not saved:
        if words[0] in ("full", "nothing", "all") or "full" in words:
            return RematSpec(policy=name, exact=False)
        if words[0] in ("none", "no", "off", "false", "disabled"):
            return RematSpec(policy=name, stores_everything=True, exact=False)
        return None
    return RematSpec(policy=name, saved=frozenset(saved), exact=False)


def custom_policy(tensors: str, *, source: str) -> RematSpec:
    """MaxText's ``custom`` policy from its per-tensor choices (``"query_proj=offload,context=device"``, as
    :class:`knowledge.cost_settings.TrainingSettings` carries them); unnamed tensors take base.yml's 'remat'."""
    choices: dict[str, str] = {}
    for item in tensors.split(","):
        key, _, value = item.partition("=")
        if key.strip():
            choices[key.strip()] = _norm(value)
    saved: set[str] = set()
    offloaded: set[str] = set()
    notes: list[str] = []
    for key, choice in choices.items():
        name = MAXTEXT_CUSTOM_TENSORS.get(key)
        if choice not in CUSTOM_CHOICES:
            notes.append(f"remat_policy 'custom': {key}: {choice!r} is not remat / device / offload; read as remat")
        elif name is not None and choice != "remat":
            (saved if choice == "device" else offloaded).add(name)
    exact = not notes
    input_offloaded = choices.get("decoder_layer_input") == "offload"
    if input_offloaded:
        notes.append("remat_policy 'custom': decoder_layer_input is offloaded to host memory: HBM holds the one layer "
                     "being recomputed, not every layer's input; the host transfers are taken as overlapped")
    gated = {choices.get("mlpwi_0", "remat"), choices.get("mlpwi_1", "remat")}
    if choices.get("mlpwi", "remat") == "remat" and len(gated) > 1:
        notes.append("remat_policy 'custom': only one of mlpwi_0 / mlpwi_1 is kept; priced as the MLP input kept")
        exact = False
    return RematSpec(policy="custom", saved=frozenset(saved - offloaded), offloaded=frozenset(offloaded),
                     input_offloaded=input_offloaded, exact=exact, source=source, notes=tuple(notes))


def named_policy(name: str, *, source: str, tensors: str | None = None) -> RematSpec | None:
    """A MaxText / JAX policy name (or an in-house one read by its words); None when unreadable. ``tensors``: MaxText
    ``custom``'s per-tensor choices where the config states any."""
    n = _norm(name)
    if n == "custom" and tensors:
        return custom_policy(tensors, source=source)
    if n in ("", "null"):
        return None
    n = JAX_POLICY_NAMES.get(n, n)
    titan = _torchtitan_policy(n, source)
    if titan is not None:
        return titan
    if n in ("none", "false", "off", "no"):
        return RematSpec(policy="none", stores_everything=True, source=source)
    if n in MAXTEXT_POLICIES:
        saved, off = MAXTEXT_POLICIES[n]
        return RematSpec(policy=n, saved=saved, offloaded=off, source=source)
    if n == "custom":  # no per-tensor key stated: base.yml's, every named tensor rematerialized
        return custom_policy("", source=source)
    spec = _from_words(n)
    if spec is None:
        return None
    return RematSpec(
        policy=spec.policy, stores_everything=spec.stores_everything, saved=spec.saved, exact=False, source=source,
        notes=(f"remat policy {name!r} is not a MaxText/JAX policy name: read from its words as saving "
               f"{', '.join(sorted(spec.saved)) or ('everything' if spec.stores_everything else 'only the layer input')}",),
    )


def config_policy(settings: TrainingSettings, *, megatron: bool, source: str) -> RematSpec | None:
    """The remat policy a config states (``settings.remat_key`` set): Megatron's recompute keys, else a named
    (MaxText / JAX / torchtitan) policy with MaxText custom's per-tensor choices; None when the name is unreadable."""
    if megatron:
        return megatron_policy(settings.remat_policy, settings.recompute_method, settings.recompute_num_layers,
                               source=source, modules=settings.recompute_modules)
    return named_policy(settings.remat_policy or "none", source=source, tensors=settings.remat_tensors)


def _torchtitan_policy(name: str, source: str) -> RematSpec | None:
    """torchtitan's selective activation checkpointing (module docstring); None for other names."""
    if name in ("selective_op", "torchtitan_selective_op"):
        return RematSpec(policy="selective_op", saved=frozenset({"context"}), every_other_mm=True, source=source)
    m = re.fullmatch(r"(?:torchtitan_)?selective_layer(?:_(\d+))?", name)
    if m:
        k = int(m.group(1) or 2)
        if k <= 1:
            return RematSpec(policy="full", source=source)
        return RematSpec(policy=name, layer_every=k, source=source)
    return None


# Megatron-Core TransformerConfig.recompute_modules (NVIDIA/Megatron-LM megatron/core/transformer/
# transformer_config.py): what "selective" recomputes; default ["core_attn"].
MEGATRON_MODULES: frozenset[str] = frozenset({
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
    "gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc",
})
# the modules whose saved tensors ASAP prices (recompute_module_bytes); the others are named, not priced
PRICED_MODULES: frozenset[str] = frozenset({"core_attn", "moe_act", "layernorm", "mlp", "moe", "shared_experts"})


def _modules(modules: object) -> tuple[frozenset[str], tuple[str, ...]]:
    """Megatron recompute_modules as written (a list, or text with commas / spaces) and notes on what is not
    priced; None is Megatron's default ["core_attn"]."""
    if modules is None:
        return frozenset({"core_attn"}), ()
    words = modules if isinstance(modules, (list, tuple)) else re.split(r"[\s,\[\]'\"]+", str(modules))
    names = frozenset(_norm(w) for w in words if _norm(w))
    notes: list[str] = []
    unknown = sorted(names - MEGATRON_MODULES)
    if unknown:
        notes.append(f"recompute_modules {', '.join(unknown)} not a Megatron-Core module (expected one of "
                     f"{', '.join(sorted(MEGATRON_MODULES))}): not priced")
    unpriced = sorted((names & MEGATRON_MODULES) - PRICED_MODULES)
    if unpriced:
        notes.append(f"recompute_modules {', '.join(unpriced)}: its saved activations are priced as stored "
                     "(the memory estimate is high by what it frees)")
    cheap = sorted(names & {"layernorm", "moe_act"})
    if cheap:
        notes.append(f"recompute_modules {', '.join(cheap)}: the memory they free is priced; their elementwise re-run "
                     "in backward is not (a few percent of the step at most)")
    return names & PRICED_MODULES, tuple(notes)


def megatron_policy(granularity: object, method: object = None, num_layers: object = None, *,
                    source: str, modules: object = None) -> RematSpec:
    """Megatron ``recompute_granularity`` / ``recompute_method`` / ``recompute_num_layers`` [KOR], and for
    *selective* the ``recompute_modules`` it re-runs (Megatron-Core; default core_attn only)."""
    g = _norm(granularity) if granularity is not None else "none"
    if g in ("", "none", "null", "false"):
        return RematSpec(policy="none", style="megatron", stores_everything=True, source=source)
    if g == "selective":
        names, notes = _modules(modules)
        return RematSpec(policy="selective", style="megatron", stores_everything=True,
                         recompute_attention_core="core_attn" in names,
                         megatron_modules=names - {"core_attn"}, source=source, notes=notes)
    if g == "full":
        m = _norm(method) if method is not None else "uniform"
        n = num_layers if isinstance(num_layers, int) and not isinstance(num_layers, bool) and num_layers > 0 else 1
        return RematSpec(policy="full", style="megatron", megatron_full=True,
                         megatron_method="block" if m == "block" else "uniform", megatron_layers=n, source=source)
    return RematSpec(policy=g, style="megatron", stores_everything=True, exact=False, source=source,
                     notes=(f"recompute_granularity {granularity!r} not understood: costed as no recompute",))


def runyaml_policy(remat: str, framework: str, *, source: str) -> RematSpec:
    """run.yaml ``training.remat`` (none | minimal | dots | full) in the framework's own terms."""
    if framework == "megatron":
        # run.yaml's vocabulary mapped onto Megatron: minimal/dots ~ selective (KOR §4.3).
        g = {"none": None, "minimal": "selective", "dots": "selective", "full": "full"}[remat]
        return megatron_policy(g, source=source)
    spec = named_policy(remat, source=source)
    assert spec is not None  # run.yaml values are all known names
    return spec


# torchtitan's own choices, most recompute first: full recomputes every block; selective layer 2 every second
# block; selective op only elementwise ops and every second matmul output; none nothing.
TORCHTITAN_LADDER: tuple[str, ...] = ("full", "selective_layer_2", "selective_op", "none")


def lighter_torchtitan(spec: RematSpec) -> list[str]:
    """torchtitan policies that recompute less than ``spec`` (a torchtitan config can name no others)."""
    name = "none" if spec.stores_everything else spec.policy
    if spec.layer_every:
        # selective_layer_k checkpoints one block in k: k = 1 is every block (full), a larger k recomputes less.
        # Beyond k = 2 the only policy certain to recompute less is none (selective_op is not ordered against it).
        k = spec.layer_every
        if k > 2:
            return ["none"]
        name = "full" if k <= 1 else "selective_layer_2"
    if name not in TORCHTITAN_LADDER:
        return []
    i = TORCHTITAN_LADDER.index(name)
    return list(TORCHTITAN_LADDER[i + 1:])


def heavier_torchtitan(spec: RematSpec) -> list[str]:
    """torchtitan policies that recompute more than ``spec`` (keep less activation memory), nearest first."""
    if spec.layer_every:
        return ["full"] if spec.layer_every <= 2 else ["selective_layer_2", "full"]
    name = "none" if spec.stores_everything else spec.policy
    if name not in TORCHTITAN_LADDER:
        return []
    return list(reversed(TORCHTITAN_LADDER[:TORCHTITAN_LADDER.index(name)]))


def heavier_policies(spec: RematSpec) -> list[str]:
    """Policy names that keep less (recompute more) than ``spec``, nearest first, in the framework's terms: the way
    to fit activations into memory at the same mesh [KOR §5]."""
    ladder = MEGATRON_LADDER if spec.style == "megatron" else MAXTEXT_LADDER
    here = len(lighter_policies(spec))  # lighter_policies places the spec on the ladder: all before it is lighter
    return list(ladder[here + 1:])


def lighter_policies(spec: RematSpec) -> list[str]:
    """Policy names that keep more (recompute less) than ``spec``, nearest first, in the framework's terms."""
    ladder = MEGATRON_LADDER if spec.style == "megatron" else MAXTEXT_LADDER
    recomputes = spec.recompute_attention_core or spec.megatron_modules
    name = "none" if spec.stores_everything and not recomputes else spec.policy
    if name not in ladder:
        # an inexact/in-house name: place it by what it keeps
        kept = len(spec.saved)
        name = "full" if kept == 0 else "save_qkv_proj" if kept <= 3 else "save_dot_except_mlp" if kept <= 5 else "minimal"
    i = ladder.index(name)
    return list(reversed(ladder[:i]))


# ------------------------------------------------------------------------------------------ byte terms
@dataclass(frozen=True)
class Dims:
    """What the byte and FLOP terms need from the model shape."""

    d_model: float
    d_ff: float
    heads: float
    kv_heads: float
    head_dim: float
    mlp_matrices: float
    top_k: float
    seq_len: float
    # DeepSeek-V3-style models (0: the plain layer above). MLA: head_dim is the query/key size per head.
    v_head_dim: float = 0.0  # per-head value / attention-output size (0: head_dim)
    mla_latent: float = 0.0  # MLA compressed q and kv latents + shared rope key per token (0: not MLA)
    attn_proj: float = 0.0  # attention projection parameters per layer (0: d_model x head_dim x (2 heads + 2 kv))
    mlp_width: float = 0.0  # MLP width computed per token, averaged over the layers (0: d_ff x top_k); with
    #                         dense_layers and shared experts: (dense x dense_d_ff + moe x d_ff (top_k + shared)) / L
    routed_share: float = 0.0  # share of mlp_per_token done by routed experts (0: a dense model)
    shared_share: float = 0.0  # share of mlp_per_token done by shared experts
    # hybrid Mamba stacks (Megatron layer patterns); the defaults are a transformer layer
    attn_share: float = 1.0  # share of the layers with self-attention
    block_share: float = 1.0  # norm + residual blocks per layer relative to a transformer layer's two
    mamba_share: float = 0.0  # share of the layers that are Mamba-2 mixers
    mamba_inner: float = 0.0  # their d_inner
    mamba_in_proj: float = 0.0  # their in_proj output width (z, x, B, C, dt)
    mamba_bc: float = 0.0  # their B and C channels (2 x groups x state)

    @property
    def mamba_proj(self) -> float:
        """Matmul parameters of one Mamba-2 layer: in_proj and out_proj."""
        return self.d_model * (self.mamba_in_proj + self.mamba_inner)

    def mamba_stored(self, fp8_inputs: bool = False) -> float:
        """Bytes per token a Mamba-2 layer keeps for backward, before tensor sharding. Megatron-Core's training
        path (MambaMixer.ssm_training -> mamba_ssm's mamba_split_conv1d_scan_combined, the memory-efficient kernel)
        saves the in_proj output (z, x, B, C, dt) and the scan output, recomputing the convolution in backward;
        then the norm keeps its input and out_proj its input (Transformer Engine with fp8: a 1-byte copy)."""
        return BF16 * (self.mamba_in_proj + 2.0 * self.mamba_inner) + (1.0 if fp8_inputs else BF16) * self.mamba_inner

    @property
    def v_dim(self) -> float:
        return self.v_head_dim or self.head_dim

    @property
    def mlp_per_token(self) -> float:
        """MLP width a token passes through in one (average) layer: d_ff x top_k for plain models."""
        return self.mlp_width or self.d_ff * self.top_k


BF16 = 2.0


def tensor_bytes(d: Dims) -> dict[str, float]:
    """bf16 bytes per token per layer of each residual candidate, before tensor sharding."""
    a = d.attn_share
    return {
        "input": BF16 * d.d_model,
        "q": BF16 * d.heads * d.head_dim * a,
        "k": BF16 * d.kv_heads * d.head_dim * a,
        "v": BF16 * d.kv_heads * d.v_dim * a,
        "context": BF16 * d.heads * d.v_dim * a,
        "o": BF16 * d.d_model * max(2.0 * d.block_share - 1.0, 0.0),  # a transformer layer's mid residual
        "mlpwi": BF16 * d.mlp_per_token * (d.mlp_matrices - 1),
        "mlpwo": 0.0,  # never a backward residual (see module docstring)
    }


def everything_bytes(d: Dims, *, dropout: bool, fp8_inputs: bool = False) -> tuple[float, float]:
    """(replicated-without-SP part, tensor-sharded part) of all activations of one layer per token [KOR §4.1].

    [KOR] counts 34·h for a GPT layer: layer-norm inputs 4h, QKV input 2h, Q,K 4h, V 2h, out-projection
    input 2h, MLP input 2h, GeLU input 8h, GeLU output 8h, dropout masks 2h (attention scores apart). For
    any width, GQA and gated MLPs: the two norms' inputs and outputs 8h, q/k/v 2(H+2KV)hd, the attention
    output 2·H·hd, the MLP's first matmul output 2·d_ff·(m-1) and its activation output 2·d_ff (times the
    routed experts k), plus 2h of dropout masks when dropout is on. Without sequence parallelism the norm
    parts (and masks) are replicated across tensor ranks: KOR's "10 + 24/t".

    ``fp8_inputs``: Transformer Engine with fp8 saves the fp8 copy of each linear layer's input for the weight
    gradient (transformer_engine/pytorch/module/linear.py, layernorm_linear.py, layernorm_mlp.py: the
    quantized ``inputmat`` / ``ln_out`` / activation output are what ``save_for_backward`` keeps), so the two
    norm outputs and the MLP activation output take 1 B per element, and the out-projection keeps a 1 B copy
    of the attention output next to the bf16 one the flash kernel saves.
    """
    h = d.d_model
    norm_out = (1.0 if fp8_inputs else BF16) * h
    replicated = d.block_share * (4.0 * h + 2.0 * norm_out + (2.0 * h if dropout else 0.0))
    # MLA (Megatron-Core MLASelfAttention): the down projections' outputs (q and kv latents, rope key) and their
    # norms' outputs, the up projections' inputs, are kept; the down projections are not split over tensor ranks
    replicated += 2.0 * BF16 * d.mla_latent
    act_out = (1.0 if fp8_inputs else BF16) * d.mlp_per_token
    attention = (
        BF16 * (d.heads + d.kv_heads) * d.head_dim + BF16 * d.kv_heads * d.v_dim  # q, k, v as stored per head
        + (BF16 + (1.0 if fp8_inputs else 0.0)) * d.heads * d.v_dim
    )
    sharded = (
        d.attn_share * attention + BF16 * d.mlp_per_token * (d.mlp_matrices - 1) + act_out
        + d.mamba_share * d.mamba_stored(fp8_inputs)
    )
    return replicated, sharded


def _module_shares(d: Dims) -> dict[str, float]:
    """Share of the MLP width (mlp_per_token) each Megatron MLP module covers: dense MLPs, routed experts, shared
    experts."""
    dense = max(1.0 - d.routed_share - d.shared_share, 0.0)
    return {"mlp": dense, "moe": d.routed_share, "shared_experts": d.shared_share}


def _rerun_mlp_share(spec: RematSpec, d: Dims) -> float:
    """Share of the MLP width whose matmuls Megatron selective ``mlp`` / ``moe`` / ``shared_experts`` re-run."""
    share = _module_shares(d)
    return sum(share[m] for m in ("mlp", "moe", "shared_experts") if m in spec.megatron_modules)


def recompute_module_bytes(d: Dims, modules: frozenset[str], *, fp8_inputs: bool = False) -> tuple[float, float]:
    """(replicated-without-SP part, tensor-sharded part) of :func:`everything_bytes` that Megatron-Core's selective
    ``recompute_modules`` do not keep (transformer_config.py): ``layernorm`` discards the two norms' outputs,
    ``moe_act`` the routed experts' activation output, ``mlp`` / ``moe`` / ``shared_experts`` everything the dense
    MLP / routed experts / shared experts keep past their input (the norm output, which stays)."""
    h = d.d_model
    norm_out = (1.0 if fp8_inputs else BF16) * h
    act = (1.0 if fp8_inputs else BF16) * d.mlp_per_token
    inner = BF16 * d.mlp_per_token * (d.mlp_matrices - 1) + act
    share = _module_shares(d)
    replicated = 2.0 * d.block_share * norm_out if "layernorm" in modules else 0.0
    whole = {m for m in ("mlp", "moe", "shared_experts") if m in modules}
    sharded = sum(share[m] for m in whole) * inner
    if "moe_act" in modules and "moe" not in modules:
        sharded += share["moe"] * act
    return replicated, sharded


def recompute_routed_share(spec: RematSpec, d: Dims) -> float:
    """Share of the re-run MLP matmuls (recompute_params_per_layer) that are routed-expert matmuls: all MLP widths
    evenly when whole layers are re-run, only the ``moe`` module's under Megatron selective recompute_modules."""
    if not spec.stores_everything:
        return d.routed_share
    total = _rerun_mlp_share(spec, d)
    return d.routed_share / total if total and "moe" in spec.megatron_modules else 0.0


def score_bytes(d: Dims, *, dropout: bool) -> float:
    """Attention scores kept per token per layer without flash attention: 5·a·s [KOR §4.1], 2·a·s without dropout."""
    return (5.0 if dropout else 2.0) * d.heads * d.seq_len * d.attn_share


def recompute_params_per_layer(spec: RematSpec, d: Dims) -> tuple[float, float, bool]:
    """(attention-side, MLP-side) forward matmul parameters re-run per layer per token, and whether the
    attention core (QK^T, AV) is re-run, for one backward pass.

    A named policy re-runs a projection when its output is neither saved nor offloaded and the backward
    needs it: q/k/v (attention backward), context (out-projection weight gradient; needs the attention core),
    out_proj (rebuilds the residual the MLP norm reads), mlpwi (activation backward). mlpwo is never needed.
    Megatron full recompute re-runs the whole layer forward; selective only the core attention [KOR §5].
    """
    h, hd = d.d_model, d.head_dim
    out = d.heads * d.v_dim * h
    qkv = d.attn_proj - out if d.attn_proj else h * hd * (d.heads + 2 * d.kv_heads)
    out, qkv = out * d.attn_share, qkv * d.attn_share  # averaged over the layers (a hybrid stack's * layers)
    wi = h * d.mlp_per_token * (d.mlp_matrices - 1)
    wo = d.mlp_per_token * h
    if spec.stores_everything:
        # Megatron selective mlp / moe / shared_experts re-run those MLP matmuls (layernorm, moe_act: elementwise)
        return 0.0, _rerun_mlp_share(spec, d) * (wi + wo), spec.recompute_attention_core
    if spec.megatron_full:  # the whole layer: a hybrid stack's Mamba projections too
        return qkv + out + d.mamba_share * d.mamba_proj, wi + wo, True
    if spec.every_other_mm:  # wq, wv, w1, w2 saved; wk, wo, w3 re-run: about half of each side
        return 0.5 * (qkv + out), 0.5 * (wi + wo), False
    if spec.layer_every:  # one block in k re-run in full (the core too: RematSpec.core_recompute_share)
        k = float(spec.layer_every)
        return (qkv + out) / k, (wi + wo) / k, True
    kept = spec.saved | spec.offloaded
    attn = 0.0
    if not _QKV <= kept:
        attn += qkv
    core = "context" not in kept
    if "o" not in kept:
        attn += out
    mlp = 0.0 if "mlpwi" in kept else wi
    return attn, mlp, core
