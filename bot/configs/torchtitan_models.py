"""Model dimensions of a torchtitan ``[model] name`` + ``flavor``, from torchtitan's own model args.

torchtitan builds the model from a table in its source, not from the TOML: ``llama3_args`` in
``torchtitan/models/llama3/__init__.py`` @238fa9953e4a (2026-02; ``llama3_configs`` in
``torchtitan/models/llama/__init__.py`` @9dec370 for the 2024 layout, the same 8B / 70B / 405B values),
pytorch/torchtitan, BSD-3-Clause. The SwiGLU width is computed as torchtitan's ``FeedForward.__init__``
computes it (``torchtitan/models/llama3/model/model.py`` @238fa99): ``hidden = int(2 * 4 * dim / 3)``, times
``ffn_dim_multiplier`` (``int``), rounded up to a multiple of ``multiple_of``. The vocabulary is
``TransformerModelArgs.vocab_size`` (default 128256, the Llama 3 tokenizer) in 2025-26; in 2024 it came from
the tokenizer (``vocab_size = -1  # defined later by tokenizer``), 128256 for the Llama 3 tokenizer.
"""

from __future__ import annotations

from typing import Any

TABLE = "torchtitan/models/llama3/__init__.py @238fa99"
LEGACY_TABLE = "torchtitan/models/llama/__init__.py @9dec370"
LLAMA3_VOCAB = 128256

# flavor -> (dim, n_layers, n_heads, n_kv_heads, ffn_dim_multiplier, multiple_of); torchtitan's defaults:
# n_kv_heads None (= n_heads), ffn_dim_multiplier None, multiple_of 256
LLAMA3: dict[str, tuple[int, int, int, int | None, float | None, int]] = {
    "8B": (4096, 32, 32, 8, 1.3, 1024),
    "70B": (8192, 80, 64, 8, 1.3, 4096),
    "405B": (16384, 126, 128, 8, 1.2, 4096),
}
# debugmodel differs between the layouts: 6 layers and vocab 2048 (2025-26), 8 layers and the tokenizer's (2024)
DEBUG = {"current": (256, 6, 16, None, None, 256), "legacy": (256, 8, 16, None, None, 256)}


def ffn_hidden(dim: int, multiplier: float | None, multiple_of: int) -> int:
    """torchtitan's SwiGLU width for ``FeedForward(hidden_dim=4 * dim, ...)``."""
    hidden = int(2 * (4 * dim) / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def llama3(flavor: str, legacy: bool) -> tuple[dict[str, int], str, list[str]] | None:
    """(run.yaml model fields, where they came from, notes) for a llama3 flavor; None when torchtitan has none."""
    notes: list[str] = []
    base = flavor
    if flavor not in LLAMA3 and flavor != "debugmodel":
        base = flavor.split("_", 1)[0]  # 8B_flex, 8B_varlen, debugmodel_flex_attn: same sizes, other attention
        if base not in LLAMA3 and base != "debugmodel":
            return None
        notes.append(f"torchtitan llama3 flavor {flavor!r} has the sizes of {base!r} (another attention kernel)")
    if base == "debugmodel":
        args: Any = DEBUG["legacy" if legacy else "current"]
    else:
        args = LLAMA3[base]
    dim, layers, heads, kv, mult, multiple = args
    where = LEGACY_TABLE if legacy else TABLE
    fields = {"layers": layers, "d_model": dim, "heads": heads, "kv_heads": kv or heads, "head_dim": dim // heads,
              "d_ff": ffn_hidden(dim, mult, multiple), "mlp_matrices": 3}
    if base == "debugmodel" and legacy:
        notes.append("torchtitan 2024 debugmodel: the vocabulary comes from the tokenizer the run loads (not stated)")
    else:
        fields["vocab"] = 2048 if base == "debugmodel" else LLAMA3_VOCAB
    return fields, where, notes


# torchtitan's MoE model args at the last TOML commit (238fa9953e4a, pytorch/torchtitan, BSD-3-Clause):
# ``qwen3_args`` in torchtitan/models/qwen3/__init__.py and ``deepseekv3_args`` in
# torchtitan/models/deepseek_v3/__init__.py. Field names are run.yaml's; every Qwen3 MoE layer is a MoE layer.
MOE_TABLES = {"qwen3": "torchtitan/models/qwen3/__init__.py @238fa99",
              "deepseek_v3": "torchtitan/models/deepseek_v3/__init__.py @238fa99"}
_QWEN3_COMMON: dict[str, int | bool] = {"vocab": 151936, "head_dim": 128, "mlp_matrices": 3, "tied_embeddings": False}
QWEN3: dict[str, dict[str, int | bool]] = {
    "0.6B": {"d_model": 1024, "layers": 28, "heads": 16, "kv_heads": 8, "d_ff": 3072, "tied_embeddings": True},
    "1.7B": {"d_model": 2048, "layers": 28, "heads": 16, "kv_heads": 8, "d_ff": 6144, "tied_embeddings": True},
    "4B": {"d_model": 2560, "layers": 36, "heads": 32, "kv_heads": 8, "d_ff": 9728, "tied_embeddings": True},
    "8B": {"d_model": 4096, "layers": 36, "heads": 32, "kv_heads": 8, "d_ff": 12288},
    "14B": {"d_model": 5120, "layers": 40, "heads": 40, "kv_heads": 8, "d_ff": 17408},
    "32B": {"d_model": 5120, "layers": 64, "heads": 64, "kv_heads": 8, "d_ff": 25600},
    "30B-A3B": {"d_model": 2048, "layers": 48, "heads": 32, "kv_heads": 4, "d_ff": 768, "experts": 128,
                "experts_per_token": 8},
    "235B-A22B": {"d_model": 4096, "layers": 94, "heads": 64, "kv_heads": 4, "d_ff": 1536, "experts": 128,
                  "experts_per_token": 8},
}
_MLA: dict[str, int | bool] = {"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                               "mlp_matrices": 3, "tied_embeddings": False}
DEEPSEEK_V3: dict[str, dict[str, int | bool]] = {
    "16B": {"vocab": 102400, "d_model": 2048, "dense_d_ff": 10944, "d_ff": 1408, "layers": 27, "dense_layers": 1,
            "heads": 16, "kv_heads": 16, "experts": 64, "shared_experts": 2, "experts_per_token": 6},
    "236B": {"vocab": 102400, "d_model": 5120, "dense_d_ff": 12288, "d_ff": 1536, "layers": 60, "dense_layers": 1,
             "heads": 128, "kv_heads": 128, "experts": 160, "shared_experts": 2, "experts_per_token": 6,
             "q_lora_rank": 1536},
    "671B": {"vocab": 129280, "d_model": 7168, "dense_d_ff": 18432, "d_ff": 2048, "layers": 61, "dense_layers": 3,
             "heads": 128, "kv_heads": 128, "experts": 256, "shared_experts": 1, "experts_per_token": 8,
             "q_lora_rank": 1536},
}


# GPT-OSS as torchtitan builds it (``_20b`` / ``_120b`` in torchtitan/models/gpt_oss/__init__.py @ b5bcd76c, a config
# function's ``model_registry("120b")``): width 2880, 64 query heads and 8 KV heads of 64, experts 2880 wide with top-4,
# vocabulary 201,088 with its own output layer, and every even layer attending over a 128-token window
# (``_build_gptoss_layers``: sliding_window_size=128 if layer_id % 2 == 0).
GPT_OSS_TABLE = "torchtitan/models/gpt_oss/__init__.py @b5bcd76c"
_GPT_OSS_COMMON: dict[str, int | bool] = {"d_model": 2880, "d_ff": 2880, "heads": 64, "kv_heads": 8, "head_dim": 64,
                                          "vocab": 201088, "mlp_matrices": 3, "tied_embeddings": False,
                                          "experts_per_token": 4, "sliding_window": 128, "global_every": 2}
GPT_OSS: dict[str, dict[str, int | bool]] = {"20b": {"layers": 24, "experts": 32}, "120b": {"layers": 36, "experts": 128}}
# Moonlight 16B-A3B, the text-only model of torchtitan's kimi_k2_7 (``_moonlight_16b_a3b_config`` in
# torchtitan/models/kimi_k2_7/__init__.py @ b5bcd76c): DeepSeek-V3's layout (MLA without a query latent) with Kimi's
# 163,840-token vocabulary. Kimi-VL and Kimi-K2.5 add a vision tower ASAP does not price: not in the table.
KIMI_TABLE = "torchtitan/models/kimi_k2_7/__init__.py @b5bcd76c"
# torchtitan models whose layers the cost model has no terms for (torchtitan @ b5bcd76c): said when one is named
UNPRICED = {"qwen3_5": "Qwen3.5 mixes Gated DeltaNet linear-attention layers with its attention layers",
            "kimi_k2_7": "Kimi-VL and Kimi-K2.5 train a vision tower besides the text layers",
            "muse_glimmer": "a text decoder with an optional vision path", "flux": "a diffusion model"}
MOONLIGHT: dict[str, int | bool] = {"vocab": 163840, "d_model": 2048, "dense_d_ff": 11264, "d_ff": 1408, "layers": 27,
                                    "dense_layers": 1, "heads": 16, "kv_heads": 16, "experts": 64, "shared_experts": 2,
                                    "experts_per_token": 6}


def moe_model(name: str, flavor: str) -> tuple[dict[str, int | bool], str] | None:
    """(run.yaml model fields, where they came from) for a Qwen3, DeepSeek-V3, GPT-OSS or Moonlight flavor; None when
    there is none. (MLA models: kv_heads = heads, the latent's up-projection gives every head its own K and V.)"""
    if name == "gpt_oss" and flavor in GPT_OSS:
        return {**_GPT_OSS_COMMON, **GPT_OSS[flavor]}, GPT_OSS_TABLE
    if name == "kimi_k2_7" and flavor == "moonlight-16B-A3B":
        return {**_MLA, **MOONLIGHT}, KIMI_TABLE
    if name == "qwen3" and flavor in QWEN3:
        return {**_QWEN3_COMMON, **QWEN3[flavor]}, MOE_TABLES[name]
    if name == "deepseek_v3" and flavor in DEEPSEEK_V3:
        return {**_MLA, **DEEPSEEK_V3[flavor]}, MOE_TABLES[name]
    return None
