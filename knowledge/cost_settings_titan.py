"""Training settings of a torchtitan TOML config, in the cost model's terms (read by
:func:`knowledge.cost_settings.settings_from_config` for ``format == "torchtitan"``).

What torchtitan does with each (pytorch/torchtitan, BSD-3-Clause; ``torchtitan/config/job_config.py`` and
``torchtitan/train.py`` @238fa99 for 2025-26, ``torchtitan/config_manager.py`` @9dec370 for 2024):

* activation checkpointing: ``[activation_checkpoint] mode`` none / full / selective with
  ``selective_ac_option`` "op" (op-level policy) or an integer k (every k-th block); unset, torchtitan's
  default ``selective`` with option ``"2"``. Named as :mod:`knowledge.cost_remat` names torchtitan's policies
  (``selective_op``, ``selective_layer_<k>``). ``memory_budget`` (2025's budgeted recompute) is left unstated.
* batch: ``local_batch_size`` (2024: ``batch_size``; default 8) sequences per data-parallel rank
  (dp_replicate x dp_shard; tp / cp / pp ranks share them); ``global_batch_size`` (2025-26; -1 or unset:
  local x data-parallel degree, else gradient accumulation); one forward per local batch without pipelining;
  with pipelining micro-batches of ``pipeline_parallel_microbatch_size`` (default 1), in 2024 the local batch
  split into ``pipeline_parallel_microbatches`` (default: the number of stages).
* ``seq_len`` (default 2048); Float8 linears (2024 ``[float8] enable_float8_linear``; 2025-26 ``[model]
  converters`` naming ``float8`` / ``quantize.linear.float8``; ``mx``: MXFP8) -> fp8 matmuls; ``[float8]
  recipe_name`` rowwise / rowwise_with_gw_hp -> torchao's rowwise-scaled recipe (``fp8_rowwise``, fp8_recipe
  ``rowwise``), unset or tensorwise -> tensorwise (whose TP all-gathers run in fp8, ``enable_float8_tensorwise_tp``):
  the converter states its recipe, so a float8 run's recipe is known, not guessed.
* async TP (``enable_async_tensor_parallel`` under ``[parallelism]``, 2024 ``[experimental]``) with
  ``torch.compile`` -> tensor-parallel collectives overlapped with the matmuls.
* the recorded launch command (run.yaml ``command:``) wins over the TOML (:mod:`bot.configs.torchtitan_cli`): its
  values are already in ``config.settings``; a remat policy it sets is named as coming from it.
* loss: with tensor parallelism the output layer's logits stay sharded over the vocabulary and the
  cross-entropy runs under ``torch.distributed.tensor.parallel.loss_parallel`` unless ``disable_loss_parallel``
  is set (2024 ``[training]``, 2025-26 ``[parallelism]``) (``ParallelDims.loss_parallel_enabled``).
* loss: compiled with torch.compile when compile is on, since April 2025 (#1033, ``build_cross_entropy_loss``):
  read for the 2025-26 layout; a 2024-layout config runs it eagerly.
* attention: torchtitan's llama attention is ``F.scaled_dot_product_attention`` (flash kernel on H100 / A100
  in bf16), so a flash kernel is stated by the framework, not unknown.
"""

from __future__ import annotations

from typing import Any

from bot.configs.sharding import ShardingConfig
from bot.configs.torchtitan import LEGACY


def _pos(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def torchtitan_settings(config: ShardingConfig) -> dict[str, Any]:
    """TrainingSettings fields a torchtitan TOML states (or torchtitan's documented defaults give)."""
    st = config.settings
    legacy = config.vintage == LEGACY
    out: dict[str, Any] = {"flash_attention": True}
    out.update(_remat(st))
    if "remat_key" in out and any(k in config.origins for k in ("activation_checkpoint.mode",
                                                                 "activation_checkpoint.selective_ac_option")):
        out["remat_key"] = "activation_checkpoint.mode (from the recorded launch command, run.yaml command:)"
    # [training] batch_size (2024 and spring 2025, before #1238 renamed it local_batch_size in June 2025)
    local = _pos(st.get("training.local_batch_size")) or _pos(st.get("training.batch_size")) or 8
    degrees = {k.key: k.value for k in config.keys}
    tp, cp, pp = (max(degrees.get(f"{n}_parallel_degree", 1), 1) for n in ("tensor", "context", "pipeline"))
    out["local_batch"] = local
    out["batch_divisor"] = tp * cp * pp
    out["global_batch"] = _pos(st.get("training.global_batch_size"))
    out["seq_len"] = _pos(st.get("training.seq_len")) or 2048
    if pp == 1:
        out["micro_batch"] = local
    elif legacy:
        n = _pos(st.get("experimental.pipeline_parallel_microbatches")) or pp
        out["micro_batch"] = local // n if local % n == 0 else None
    else:
        out["micro_batch"] = _pos(st.get("parallelism.pipeline_parallel_microbatch_size")) or 1
    out["quantization"] = _quantization(st, legacy)
    # the converter states its scaling: torchao MX (1x32 blocks, E8M0 scales), Float8Linear per row or per tensor
    recipe = {"mxfp8": "mxfp8", "fp8_rowwise": "rowwise", "fp8": "tensorwise"}.get(out["quantization"] or "")
    if recipe:
        out["fp8_recipe"] = recipe
    # torchtitan runs the loss under torch's loss_parallel whenever TP > 1 unless this is set (ParallelDims)
    disable = st.get("training.disable_loss_parallel" if legacy else "parallelism.disable_loss_parallel")
    out["loss_parallel"] = disable is not True
    out.update(_async_tp(st, legacy))
    # build_cross_entropy_loss compiles the loss when compile is on (torchtitan #1033, April 2025: after the
    # [parallelism] layout of March 2025; a 2024-layout config predates it and runs the loss eagerly)
    out["loss_compiled"] = not legacy and _compiled(st)
    return out


def _compiled(st: dict[str, Any]) -> bool:
    """torch.compile on: ``[training] compile`` (2024 - autumn 2025) or ``[compile] enable`` (later)."""
    return st.get("training.compile") is True or st.get("compile.enable") is True


def _async_tp(st: dict[str, Any], legacy: bool) -> dict[str, Any]:
    """Async TP overlaps the tensor-parallel all-gathers / reduce-scatters with the matmuls that use them
    (micro-pipelined through symmetric memory); torchtitan applies it only with torch.compile and refuses it
    without ("Async TP requires --training.compile", parallelize_llama.py @820504e)."""
    on = st.get("experimental.enable_async_tensor_parallel" if legacy else
                "parallelism.enable_async_tensor_parallel") is True
    return {"tp_comm_overlap": on and _compiled(st)}


def _remat(st: dict[str, Any]) -> dict[str, Any]:
    mode = st.get("activation_checkpoint.mode")
    option = st.get("activation_checkpoint.selective_ac_option")
    key = "activation_checkpoint.mode"
    if mode is None:
        mode, key = "selective", "activation_checkpoint.mode (torchtitan default: selective, option 2)"
        option = "2" if option is None else option
    mode = str(mode).strip().lower()
    if mode == "memory_budget":
        return {}
    if mode != "selective":
        return {"remat_key": key, "remat_policy": mode}
    opt = str("2" if option is None else option).strip().lower()
    if opt == "op":
        return {"remat_key": key, "remat_policy": "selective_op"}
    if opt.isdigit():
        return {"remat_key": key, "remat_policy": f"selective_layer_{int(opt)}"}
    return {"remat_key": key, "remat_policy": f"selective {opt}"}


def _quantization(st: dict[str, Any], legacy: bool) -> str | None:
    if st.get("float8.enable_float8_linear") is True:  # 2024, until the ModelConverter interface (#823, Feb 2025)
        return "fp8"
    converters = [c.strip() for c in str(st.get("model.converters") or "").split(",") if c.strip()]
    if any("float8" in c for c in converters):
        # torchao's rowwise recipes (rowwise, rowwise_with_gw_hp) scale per row; unset / tensorwise per tensor
        recipe = str(st.get("float8.recipe_name") or "tensorwise").strip().lower()
        return "fp8_rowwise" if recipe.startswith("rowwise") else "fp8"
    if any(c.endswith(".mx") or c == "mx" for c in converters):
        return "mxfp8"
    return None
