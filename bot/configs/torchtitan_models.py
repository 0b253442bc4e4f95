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
