"""torchtitan's own start-up rules on a TOML config (beyond the world-size check of ParallelDims, which
:func:`bot.configs.torchtitan.degrees` raises in torchtitan's words).

Each rule cites where torchtitan enforces it (pytorch/torchtitan, BSD-3-Clause):

* ``global_batch_size`` a multiple of ``local_batch_size x`` data-parallel degree (``torchtitan/train.py``
  @238fa99, ``Trainer.__init__``: "global batch size must be multiple of local batch size times data-parallel
  degree");
* with pipelining, ``local_batch_size`` divisible by ``pipeline_parallel_microbatch_size``
  (``torchtitan/distributed/pipeline_parallel.py`` @238fa99: "Batch size ... must be divisible by
  microbatch_size");
* ``expert_tensor_parallel_degree`` equal to tp or 1 when ep > 1 (``parallel_dims.py`` @238fa99
  ``_validate``: "Currently we only support ETP=TP or ETP=1");
* attention heads and key/value heads divisible by tp: torchtitan's tensor-parallel plan shards ``wq`` /
  ``wk`` / ``wv`` column-wise by heads (``torchtitan/models/llama3/infra/parallelize.py``), and the attention
  reshapes to ``n_heads / tp`` local heads; an uneven split fails at the first step.
"""

from __future__ import annotations

from typing import Any

from bot.configs.sharding import ShardingConfig
from bot.configs.torchtitan import LEGACY


def _pos(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def torchtitan_rules(cfg: ShardingConfig, sizes: dict[str, int], model: Any) -> list[tuple[bool, str, str]]:
    """(error, rule, message) for every torchtitan rule the config breaks on a mesh of these sizes."""
    st = cfg.settings
    legacy = cfg.vintage == LEGACY
    out: list[tuple[bool, str, str]] = []
    tp, pp = sizes["tensor"], sizes["pipeline"]
    dp = sizes["data"] * sizes["fsdp"] * sizes["expert"]
    local = _pos(st.get("training.batch_size" if legacy else "training.local_batch_size")) or 8
    gbs = _pos(st.get("training.global_batch_size"))
    if gbs and gbs % (local * dp):
        out.append((True, "global_batch", f"global batch size must be multiple of local batch size times "
                    f"data-parallel degree ({gbs} % ({local} * {dp}) != 0): torchtitan refuses to start"))
    mbs = _pos(st.get("parallelism.pipeline_parallel_microbatch_size")) or 1
    if pp > 1 and not legacy and local % mbs:
        out.append((True, "microbatch", f"Batch size {local} must be divisible by microbatch_size {mbs} "
                    "(training.local_batch_size, parallelism.pipeline_parallel_microbatch_size): torchtitan "
                    "refuses to start"))
    etp = _pos(st.get("parallelism.expert_tensor_parallel_degree"))
    if sizes["expert"] > 1 and etp and etp not in (1, tp):
        out.append((True, "etp", f"expert_tensor_parallel_degree={etp}: torchtitan supports only ETP=TP ({tp}) "
                    "or ETP=1 and refuses to start"))
    for name, field in (("n_heads", "heads"), ("n_kv_heads", "kv_heads")):
        n = _pos(getattr(model, field, None)) if model is not None else None
        if tp > 1 and n and n % tp:
            out.append((True, "heads", f"{name}={n} is not divisible by tensor_parallel_degree={tp}: torchtitan's "
                        "tensor-parallel attention splits the heads evenly and fails at the first step"))
    return out
