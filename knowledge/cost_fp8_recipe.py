"""FP8 scaling recipes: which one a config states, and what the block-scaled (MXFP8) recipe costs.

Transformer Engine scales fp8 tensors one of four ways (Megatron-LM ``--fp8-recipe``, Megatron-Core / Megatron-Bridge
``fp8_recipe``): ``delayed`` (one scale per tensor from an amax history; Megatron-LM's default), ``tensorwise`` (one
scale per tensor from the current amax: "FP8-CS"), ``blockwise`` (1x128 / 128x128 blocks, Hopper) and ``mxfp8``
(1x32 blocks with E8M0 scales, the block-scaled tensor-core instructions of Blackwell: "FP8-MX"). All run their
matmuls at the chip's fp8 peak; what differs is the GEMM kernel and the quantization around it.

What ASAP prices: the dense (non-expert) GEMMs of an MXFP8 run at ``1 / MXFP8_DENSE_GEMM_SLOWDOWN`` of the per-tensor
fp8 rate. The figure is Transformer Engine's own kernel measurement, not fitted on the eval corpus: its GEMM
profiling tutorial (docs/examples/gemm_profiling/gemm_profiling.rst @ 8f2e635, NVIDIA B300, a 4,096-hidden /
16,384-FFN layer over 15,872 tokens, inputs pre-quantized so that only the GEMM kernels are timed) gives 7.161 ms per
layer (fprop + dgrad + wgrad) for MXFP8 against 6.812 ms for FP8 current scaling.

Checked against Megatron-Bridge's published pairs of one configuration run in both recipes (the parenthesised FP8-MX
figures of the 25.09 / 25.11 performance summaries; docs/cost-model.md, "FP8 recipes"): dense Llama rows run 2-6%
slower in MXFP8, which the kernel ratio reproduces; MoE rows (Qwen3, DeepSeek-V3) run as fast or faster, so the
expert grouped GEMMs keep the fp8 rate. The quantization kernels themselves (an amax pass for current scaling, the
1x32 block scales for MXFP8) are not priced for either recipe.
"""

from __future__ import annotations

# MXFP8 / FP8 current scaling, per-layer GEMM time on B300 with pre-quantized inputs (module docstring)
MXFP8_DENSE_GEMM_SLOWDOWN = 7.161 / 6.812

# Transformer Engine's four, and torchao's per-row scaling (torchtitan's float8 recipe_name rowwise*: priced by the
# rowwise path of knowledge.cost_core, ROWWISE_FP8_SPEEDUP and ROWWISE_CAST_BYTES)
RECIPES: tuple[str, ...] = ("tensorwise", "delayed", "mxfp8", "blockwise", "rowwise")

# Megatron-Bridge mixed-precision presets (src/megatron/bridge/training/mixed_precision.py) by a word of their name
_PRESET_WORDS: tuple[tuple[str, str], ...] = (
    ("mxfp8", "mxfp8"), ("current_scaling", "tensorwise"), ("delayed_scaling", "delayed"),
    ("subchannel", "blockwise"), ("blockwise", "blockwise"),
)


def fp8_recipe_stated(recipe: object, preset: object = None) -> str | None:
    """The fp8 recipe a config states: ``fp8_recipe`` (Megatron-LM ``--fp8-recipe``, Megatron-Bridge
    ``mixed_precision.fp8_recipe``), else a Megatron-Bridge preset named as ``mixed_precision`` (e.g.
    ``bf16_with_mxfp8_mixed``); None when neither says. A recipe name outside the four (``custom``) is kept as
    written, lower-cased, and priced as per-tensor fp8."""
    if isinstance(recipe, str) and recipe.strip() and recipe.strip().lower() not in ("none", "null"):
        name = recipe.strip().lower()
        return "mxfp8" if name in ("mx", "mxfp8", "fp8_mx") else "tensorwise" if name in ("current", "fp8_cs") else name
    if isinstance(preset, str):
        name = preset.strip().lower()
        for word, found in _PRESET_WORDS:
            if word in name:
                return found
    return None


def block_scaled_chip(peak_fp4_flops: float | None, family: str) -> bool:
    """Whether a catalog chip has block-scaled tensor cores (MXFP8, NVFP4): the GPUs with a published fp4 peak
    (Blackwell). On the others an fp8 run is per-tensor or blockwise, and the recipe does not move the price."""
    return family == "gpu" and peak_fp4_flops is not None


def recipe_note(recipe: str | None) -> str | None:
    """One line of the answer on how the fp8 recipe is priced (None when fp8 is per-tensor or unstated)."""
    if recipe == "mxfp8":
        return (f"MXFP8 (config: fp8_recipe mxfp8): dense GEMMs priced {100 * (MXFP8_DENSE_GEMM_SLOWDOWN - 1):.0f}% "
                "slower than per-tensor fp8 (Transformer Engine's B300 GEMM benchmark: 7.161 vs 6.812 ms per layer); "
                "expert GEMMs at the fp8 rate")
    return None


def unstated_note(slowdown: float) -> str:
    """Why the band widens when an fp8 run on a Blackwell chip does not say its recipe."""
    return (f"fp8 recipe not stated (per-tensor or MXFP8): priced per-tensor; band widened by "
            f"+-{100 * slowdown:.0f}%, the dense GEMM time MXFP8 would add")
