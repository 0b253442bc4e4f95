"""Subprocess side of the ahead-of-time (AOT) compile check: ``python -m bot.proposals.aot_worker``.

Reads one JSON job from stdin, compiles the sharded train step of the sample transformer
(:mod:`bot.samples.jaxmodel`) at reduced scale for that mesh on XLA:CPU virtual devices, and writes one
JSON object to stdout. It is a separate process because ``--xla_force_host_platform_device_count`` only
takes effect when it is in ``XLA_FLAGS`` before JAX is first imported, and the caller may already have
JAX loaded with another device count.

Job (written by :func:`bot.proposals.aot.aot_check`)::

    {"axes": {"data": 2, "fsdp": 2, "sequence": 1, "tensor": 2},
     "dims": {"layers": 2, "d_model": 128, "heads": 4, "d_ff": 512, "vocab": 512, "seq": 64, "batch": 4},
     "remat": "none" | "full" | "dots"}

Answer: ``{"status": "compiled" | "compile_error" | "unavailable" | "error", "message": str,
"lower_s", "compile_s", "collectives": [{op, result_bytes, group_size, num_groups}], "memory": {...}}``.

Sharding is the sample model's (batch over ``data`` x ``fsdp``; weights over ``fsdp`` on the d_model side and
``tensor`` Megatron column/row), plus the sequence dimension of the activations over ``sequence`` with
keys/values gathered over it for attention (all-gather context parallelism), which the sample model has no
axis for. Nothing is executed and no parameters are materialised: the step is lowered from
``jax.ShapeDtypeStruct`` arguments.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

DEVICE_FLAG = "--xla_force_host_platform_device_count"
MESH_ORDER = ("data", "fsdp", "sequence", "tensor")
"""Axis order of the JAX mesh (outermost first): tensor innermost, as production meshes put it."""
MAX_ERROR_CHARS = 4000


def _configure(devices: int) -> None:
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(DEVICE_FLAG)]
    flags.append(f"{DEVICE_FLAG}={devices}")
    os.environ["XLA_FLAGS"] = " ".join(flags)
    os.environ["JAX_PLATFORMS"] = "cpu"


def _compile(job: dict[str, Any]) -> dict[str, Any]:
    """Build, lower and compile the step; return the answer dict. JAX is imported here, not at the top."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from bot.samples import jaxmodel
    from bot.samples.jaxmodel import AdamW, ModelDims, param_specs

    axes: dict[str, int] = {a: int(job["axes"].get(a, 1)) for a in MESH_ORDER}
    dims = ModelDims(**{k: int(v) for k, v in job["dims"].items()})
    remat = job.get("remat", "none")
    n = int(np.prod(list(axes.values())))
    if len(jax.devices()) < n:
        return {"status": "error", "message": f"XLA:CPU offers {len(jax.devices())} devices, the mesh needs {n}"}
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(tuple(axes.values())), MESH_ORDER)
    batch = jaxmodel.BATCH
    seq_axis = "sequence" if axes["sequence"] > 1 else None

    def constrain(x: jax.Array, spec: P) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))

    act = P(batch, seq_axis, None)

    def block(x: jax.Array, p: dict[str, Any]) -> jax.Array:
        # The sample model's block (bot.samples.jaxmodel._block) with the sequence dimension sharded.
        seq = x.shape[1]
        h = jaxmodel._layernorm(x, p["ln1_scale"], p["ln1_bias"])
        q = jnp.einsum("bsd,dhk->bshk", h, p["wq"])
        k = jnp.einsum("bsd,dhk->bshk", h, p["wk"])
        v = jnp.einsum("bsd,dhk->bshk", h, p["wv"])
        q = constrain(q, P(batch, seq_axis, "tensor", None))
        # Keys/values are gathered over the sequence axis: every query shard attends to the whole sequence.
        k, v = (constrain(t, P(batch, None, "tensor", None)) for t in (k, v))
        scores = jnp.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
        causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
        scores = jnp.where(causal, scores, jnp.float32(-1e9))
        attn = jax.nn.softmax(scores, axis=-1)
        ctx = jnp.einsum("bhqs,bshk->bqhk", attn, v)
        out = jnp.einsum("bqhk,hkd->bqd", ctx, p["wo"])
        x = constrain(x + out, act)
        h = jaxmodel._layernorm(x, p["ln2_scale"], p["ln2_bias"])
        gate = constrain(h @ p["w_gate"], P(batch, seq_axis, "tensor"))
        up = constrain(h @ p["w_up"], P(batch, seq_axis, "tensor"))
        down = (jax.nn.silu(gate) * up) @ p["w_down"]
        return constrain(x + down, act)

    if remat == "full":
        block = jax.checkpoint(block, policy=jax.checkpoint_policies.nothing_saveable)
    elif remat == "dots":
        block = jax.checkpoint(block, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)

    def loss_fn(params: dict[str, Any], tokens: jax.Array) -> jax.Array:
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        table = constrain(params["embed"], P(None, None))
        x = constrain(jnp.take(table, inputs, axis=0), act)
        for layer in params["layers"]:
            x = block(x, layer)
        x = jaxmodel._layernorm(x, params["lnf_scale"], params["lnf_bias"])
        logits = constrain(x @ params["unembed"], P(batch, seq_axis, "tensor"))
        logz = jax.nn.logsumexp(logits, axis=-1)
        picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
        return (logz - picked).mean()

    opt = AdamW()
    specs = param_specs(dims)
    is_spec = lambda s: isinstance(s, P)  # noqa: E731
    shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=is_spec)
    shapes = jax.eval_shape(lambda: jax.tree.map(jnp.asarray, jaxmodel.init_params(dims)))
    params = jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, shardings)
    opt_shardings = {"mu": shardings, "nu": shardings, "count": NamedSharding(mesh, P())}
    opt_shapes = jax.eval_shape(opt.init, params)
    opt_state = jax.tree.map(
        lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), opt_shapes, opt_shardings
    )
    token_sharding = NamedSharding(mesh, P(batch, None))
    tokens = jax.ShapeDtypeStruct((dims.batch, dims.seq + 1), jnp.int32, sharding=token_sharding)

    def train_step(params: dict[str, Any], opt_state: dict[str, Any], tokens: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
        params, opt_state = opt.update(grads, opt_state, params)
        return params, opt_state, loss

    step = jax.jit(
        train_step,
        in_shardings=(shardings, opt_shardings, token_sharding),
        out_shardings=(shardings, opt_shardings, NamedSharding(mesh, P())),
        donate_argnums=(0, 1),
    )
    try:
        t0 = time.perf_counter()
        lowered = step.lower(params, opt_state, tokens)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
    except Exception as exc:  # noqa: BLE001 - XLA rejects a sharding with many exception types
        return {"status": "compile_error", "message": f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]}

    from bot.profiles.hlo_text import parse_hlo_text

    collectives = [
        {"op": c.op, "result_bytes": c.result_bytes, "group_size": c.group_size, "num_groups": c.num_groups}
        for c in parse_hlo_text(compiled.as_text() or "", source="compiled AOT train step")
    ]
    memory: dict[str, int] = {}
    analysis = compiled.memory_analysis()
    if analysis is not None:
        for key, attr in (
            ("argument_bytes", "argument_size_in_bytes"),
            ("output_bytes", "output_size_in_bytes"),
            ("alias_bytes", "alias_size_in_bytes"),
            ("temp_bytes", "temp_size_in_bytes"),
            ("generated_code_bytes", "generated_code_size_in_bytes"),
        ):
            value = getattr(analysis, attr, None)
            if value is not None:
                memory[key] = int(value)
    return {
        "status": "compiled",
        "message": f"lowered and compiled on {n} XLA:CPU devices (jax {jax.__version__})",
        "lower_s": round(t1 - t0, 3),
        "compile_s": round(t2 - t1, 3),
        "collectives": collectives,
        "memory": memory,
    }


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Configure the device count, import JAX, compile; never raises (errors become the answer)."""
    try:
        devices = 1
        for v in job["axes"].values():
            devices *= int(v)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return {"status": "error", "message": f"bad job: {exc!r}"}
    if "jax" in sys.modules:  # pragma: no cover - only when imported into a process that loaded JAX
        return {"status": "error", "message": "jax was imported before the device count could be set"}
    _configure(devices)
    try:
        import jax  # noqa: F401
    except ImportError as exc:
        return {
            "status": "unavailable",
            "message": f"jax is not installed ({exc}); install the jax extra: pip install 'asap[jax]'",
        }
    try:
        return _compile(job)
    except Exception as exc:  # noqa: BLE001 - report, never a traceback on the parent's console
        tb = traceback.format_exc(limit=3)
        return {"status": "error", "message": f"{type(exc).__name__}: {exc}\n{tb}"[:MAX_ERROR_CHARS]}


def main() -> int:
    try:
        job = json.loads(sys.stdin.read())
    except json.JSONDecodeError as exc:
        answer: dict[str, Any] = {"status": "error", "message": f"job is not JSON: {exc}"}
    else:
        answer = run(job) if isinstance(job, dict) else {"status": "error", "message": "job must be a JSON object"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
