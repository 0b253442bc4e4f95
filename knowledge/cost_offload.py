"""DeepSpeed ZeRO offload priced: host-link transfers and the CPU optimizer step, per optimizer step.

Sources:
  [ZO]  Ren et al., 2021, "ZeRO-Offload: Democratizing Billion-Scale Model Training" (USENIX ATC '21).
        §4.1: the optimizer step runs on the CPU; per iteration the GPU sends the fp16 gradients to the host
        (2 bytes per parameter) and receives the updated fp16 parameters (2 bytes per parameter), the minimum
        GPU-CPU volume (4 bytes per parameter); the gradient transfer overlaps with the backward pass.
        §4.2: with ZeRO-2 data parallelism each GPU offloads only the partition it owns (1/N_d).
        §5.1, Table 2: DeepSpeed's CPU-Adam updates a 1-billion-parameter model in ~0.22 s on one DGX-2 host
        (two 24-core Xeon Platinum 8168): ~4.5e9 parameters per second per host.
  [ZI]  Rajbhandari et al., 2021, "ZeRO-Infinity: Breaking the GPU Memory Wall for Extreme Scale Deep
        Learning" (SC '21): with the parameters offloaded (ZeRO-3 ``offload_param``), each layer's
        parameters are brought to the GPU for its forward and again for its backward, prefetched ahead of use.
  [DS]  microsoft/DeepSpeed ``deepspeed/runtime/engine.py`` ``DeepSpeedEngine.allreduce_gradients``: "ZeRO
        stage >= 2 communicates during non gradient accumulation boundaries as well" (every micro-batch; stage 1
        at the accumulation boundary only): with offload, each of those reductions is copied to the host.

Assumptions, named in every prediction that prices offload (:func:`offload_notes`) and given a wider band
(:data:`OFFLOAD_RANGE`): the chip's ``host_link_bandwidth`` from the hardware catalog (achieved one-way
PCIe copy bandwidth), :data:`CPU_ADAM_PARAMS_PER_S` for the host's optimizer (the host's cores and memory
bandwidth set it: CPU-Adam reads and writes ~30 bytes per parameter, so a two-socket server's ~150-200 GB/s
caps it near 5-6e9 parameters/s), the host CPU shared by every GPU it serves, NVMe priced like CPU memory.
Only DeepSpeed offload is priced here; MaxText's ``optimizer_memory_host_offload`` keeps its existing note.
"""

from __future__ import annotations

from typing import Any

import numpy as np

CPU_ADAM_PARAMS_PER_S = 1.0e9 / 0.22
"""Parameters per second one host's CPU-Adam updates [ZO §5.1, Table 2: ~0.22 s for 1B parameters]."""

OFFLOAD_RANGE = 2.0
"""The priced offload time may be this many times lower or higher: the host link and the host's CPU (cores,
memory channels, pinned buffers, NUMA placement) are assumed, not measured; the step-time band spans it."""


def deepspeed_offload(shape: Any) -> tuple[bool, bool]:
    """(optimizer offloaded, parameters offloaded) for a DeepSpeed run; (False, False) otherwise."""
    cfg = getattr(shape, "settings", None)
    if cfg is None or not getattr(cfg, "deepspeed", False):
        return False, False
    return bool(shape.optimizer_offload and shape.zero_stage >= 1), bool(shape.param_offload)


def offload_seconds(shape: Any, chip: Any, chips: np.ndarray, m: np.ndarray, device_s: np.ndarray,
                    overlap_miss: float) -> np.ndarray:
    """Seconds per step the device waits on ZeRO offload, for each mesh (zeros when nothing is offloaded).

    ``chips``: chips per mesh; ``m``: micro-batches per step; ``device_s``: compute + HBM time per step (what
    the overlappable transfers can hide behind, the gradients only behind the backward's ~2/3 of it).
    Per chip, ``psi`` = the parameters of the ZeRO partition it owns (parameters / chips: ZeRO partitions over
    the data ranks, tensor and pipeline split the rest) [ZO §4.2]:

    * optimizer offload: gradients down (``grad_bytes`` each, once per reduction: every micro-batch at stage
      >= 2 [DS]) overlapping the backward; updated parameters up (``weight_bytes`` each) and the host's CPU-Adam
      over every partition it serves, both on the critical path between steps [ZO §4.1, §5.1];
    * parameter offload (ZeRO-3): the partition fetched for each micro-batch's forward and backward,
      prefetched behind compute [ZI].

    The overlappable part is exposed as the collectives are: what exceeds the time it can hide behind, plus
    ``overlap_miss`` of the rest.
    """
    opt, params = deepspeed_offload(shape)
    bw = getattr(chip, "host_link_bandwidth", None)
    zeros = np.zeros_like(device_s)
    if not (opt or params) or not bw:
        return zeros
    psi = float(shape.params_total) / chips
    per_host = np.minimum(float(chip.intra.chips_per_host), chips)
    reductions = m if shape.zero_stage >= 2 else np.ones_like(m)
    down = np.where(opt, reductions * shape.grad_bytes * psi / bw, zeros)
    fetch = np.where(params, 2.0 * m * shape.weight_bytes * psi / bw, zeros)
    critical = np.where(opt, shape.weight_bytes * psi / bw + psi * per_host / CPU_ADAM_PARAMS_PER_S, zeros)
    ovl = down + fetch
    low = np.maximum(np.maximum(0.0, ovl - device_s), down - 2.0 / 3.0 * device_s)
    return critical + low + overlap_miss * (ovl - low)


def offload_notes(shape: Any, chip: Any) -> list[str]:
    """The assumptions an offload price rests on, in words (empty when nothing is offloaded)."""
    opt, params = deepspeed_offload(shape)
    if not (opt or params):
        return []
    bw = getattr(chip, "host_link_bandwidth", None)
    what = " and ".join(w for w, on in (("optimizer", opt), ("parameters", params)) if on)
    if not bw:
        return [f"DeepSpeed offload ({what}) not priced: the hardware catalog has no host_link_bandwidth for "
                f"{chip.display_name}, so the step-time prediction is optimistic"]
    out = [f"DeepSpeed offload ({what}) priced at an assumed {bw / 1e9:.0f} GB/s per direction per GPU over the host "
           f"link ({chip.display_name} host_link_bandwidth, knowledge/data/hardware.yaml) [ZeRO-Offload §4]"]
    if opt:
        out.append(f"assumed host CPU-Adam rate {CPU_ADAM_PARAMS_PER_S / 1e9:.1f}e9 parameters/s per host, shared by "
                   f"its {chip.intra.chips_per_host} GPUs (ZeRO-Offload §5.1, Table 2); the optimizer step and the "
                   "parameter upload are not overlapped with compute (no delayed parameter update)")
    out.append(f"the step-time band spans {1 / OFFLOAD_RANGE:g}x to {OFFLOAD_RANGE:g}x the priced offload time "
               "(host link and CPU assumed, not measured)")
    return out
