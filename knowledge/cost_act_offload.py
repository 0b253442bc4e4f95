"""Activation offloading to host memory (Megatron-Core ``cpu_offloading``): what it frees and what it costs.

Megatron-Core can copy the saved activations of ``cpu_offloading_num_layers`` transformer layers to host memory after
their forward and bring them back before their backward, on a side stream (``TransformerConfig.cpu_offloading``,
``cpu_offloading_num_layers``, ``cpu_offloading_activations``; ``megatron/core/extensions/.../cpu_offload``).
Megatron-Bridge's performance recipes use it on Grace-Blackwell, whose GPUs reach CPU memory over NVLink-C2C: the
Llama 3 70B FSDP recipes offload 40 of 80 layers on GB200 (186 GB) and 20 on GB300 (288 GB)
(``scripts/performance/configs/llama/llama3_workload_base_configs.py``, ``cpu_offloading_num_layers``).

* **Memory**: the offloaded layers' saved activations leave HBM, for every micro-batch in flight. At least one layer
  per stage stays (Megatron refuses ``cpu_offloading_num_layers >= num_layers``).
* **Time**: each offloaded byte crosses the host link twice per micro-batch (out after forward, back before
  backward). The copies run beside compute; what the compute cannot cover is exposed. The link is the catalog's
  ``host_link_bandwidth``; a chip without one leaves the copies unpriced, and the answer says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bot.configs.common import as_bool, find_by_name, positive_int

# Config keys read (bot.configs.common.settings by name): Megatron-Core TransformerConfig / Megatron-Bridge model.
NAMES: tuple[str, ...] = ("cpu_offloading", "cpu_offloading_num_layers", "cpu_offloading_activations")


def offload_settings(values: dict[str, Any]) -> dict[str, Any]:
    """``{"activation_offload_layers": n}`` when the config says whether it offloads activations, else ``{}``.

    ``cpu_offloading`` off, or on with ``cpu_offloading_activations: false`` (weights only), is 0 layers; on with
    ``cpu_offloading_num_layers`` is that many (Megatron-Core's default is 0: nothing moves).
    """
    path, on = find_by_name(values, "cpu_offloading")
    if path is None:
        return {}
    if not as_bool(on) or as_bool(find_by_name(values, "cpu_offloading_activations")[1]) is False:
        return {"activation_offload_layers": 0}
    return {"activation_offload_layers": positive_int(find_by_name(values, "cpu_offloading_num_layers")[1]) or 0}


def offload_layers(settings: Any, runyaml_layers: int) -> int:
    """Layers per stage whose activations are offloaded: the config's setting (it is what ran), else run.yaml's."""
    stated = getattr(settings, "activation_offload_layers", None) if settings is not None else None
    return int(runyaml_layers if stated is None else stated)


def offload_note(layers: int, link: float | None) -> str:
    """What a prediction with activation offloading assumes (one line of the answer)."""
    where = (f"their copies over the host link ({link / 1e9:.0f} GB/s each way, catalog) run beside compute, only "
             "what compute cannot cover is priced" if link else
             "the catalog has no host-link figure for this chip, so the copies' time is not priced")
    return (f"activation offloading: the saved activations of {layers} layer(s) per stage go to host memory after "
            f"forward and come back for backward (Megatron cpu_offloading_num_layers); {where}")


def kept_layers(layers: Any, offloaded: int) -> Any:
    """Layers of a stage whose saved activations stay in HBM (``layers`` may be a numpy array): all but the
    offloaded ones, and never fewer than one."""
    return layers - np.minimum(float(offloaded), np.maximum(layers - 1.0, 0.0))


def offload_copy_seconds(bytes_per_layer_mb: Any, layers: Any, offloaded: int, micro_batches: Any,
                         link: float | None, device_s: Any) -> Any:
    """Seconds per step the copies of offloaded activations add: out and back per micro-batch over the host link,
    less what the step's compute covers (0 without a host-link figure or with nothing offloaded)."""
    if not offloaded or not link:
        return np.zeros_like(np.asarray(device_s, dtype=float))
    moved = layers - kept_layers(layers, offloaded)
    copies = 2.0 * bytes_per_layer_mb * moved * micro_batches / link
    return np.maximum(copies - device_s, 0.0)
