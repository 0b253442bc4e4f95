"""A small decoder-only transformer, sharded over a (data, fsdp, tensor) device mesh, and its train step.

This module imports JAX at the top, so import it only after ``XLA_FLAGS`` names the virtual device count
(see :func:`bot.samples.jaxrun.configure_xla`). It exists to produce *real* profiles and compiled HLO for
the sample run, so the sharding is the one production JAX code uses:

* the batch is split over ``(data, fsdp)``;
* every weight matrix is split over ``fsdp`` on its ``d_model`` side (gathered before use, gradients
  reduce-scattered back) and over ``tensor`` Megatron-style: QKV / gate / up / unembedding split by
  column (heads, ``d_ff``, vocab), the attention output and down projections split by row, so each
  block ends in an all-reduce over ``tensor``;
* optimizer state is sharded exactly like the weights, so gradients of replicated ``data`` copies are
  all-reduced over ``data``.

The partitioner inserts the collectives; nothing here calls them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

Params = dict[str, Any]
BATCH = ("data", "fsdp")


@dataclass(frozen=True)
class ModelDims:
    """Model and training shape of the sample transformer."""

    layers: int
    d_model: int
    heads: int
    d_ff: int
    vocab: int
    seq: int
    batch: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


def param_specs(dims: ModelDims) -> Params:
    """PartitionSpec per parameter: ``fsdp`` on the d_model side, ``tensor`` Megatron column/row split."""
    layer = {
        "ln1_scale": P(None),
        "ln1_bias": P(None),
        "wq": P("fsdp", "tensor", None),  # [d_model, heads, head_dim]: column split by heads
        "wk": P("fsdp", "tensor", None),
        "wv": P("fsdp", "tensor", None),
        "wo": P("tensor", None, "fsdp"),  # [heads, head_dim, d_model]: row split by heads
        "ln2_scale": P(None),
        "ln2_bias": P(None),
        "w_gate": P("fsdp", "tensor"),  # [d_model, d_ff]: column split
        "w_up": P("fsdp", "tensor"),
        "w_down": P("tensor", "fsdp"),  # [d_ff, d_model]: row split
    }
    return {
        "embed": P(None, "fsdp"),  # [vocab, d_model]
        "layers": [dict(layer) for _ in range(dims.layers)],
        "lnf_scale": P(None),
        "lnf_bias": P(None),
        "unembed": P("fsdp", "tensor"),  # [d_model, vocab]: logits split over vocab
    }


def init_params(dims: ModelDims, seed: int = 0) -> Params:
    """fp32 parameters with scaled-normal init (host arrays; placed on the mesh by the caller)."""
    rng = np.random.default_rng(seed)
    d, h, hd, f, v = dims.d_model, dims.heads, dims.head_dim, dims.d_ff, dims.vocab

    def normal(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    def block() -> Params:
        return {
            "ln1_scale": np.ones((d,), np.float32),
            "ln1_bias": np.zeros((d,), np.float32),
            "wq": normal((d, h, hd), d),
            "wk": normal((d, h, hd), d),
            "wv": normal((d, h, hd), d),
            "wo": normal((h, hd, d), d),
            "ln2_scale": np.ones((d,), np.float32),
            "ln2_bias": np.zeros((d,), np.float32),
            "w_gate": normal((d, f), d),
            "w_up": normal((d, f), d),
            "w_down": normal((f, d), f),
        }

    return {
        "embed": normal((v, d), 1),
        "layers": [block() for _ in range(dims.layers)],
        "lnf_scale": np.ones((d,), np.float32),
        "lnf_bias": np.zeros((d,), np.float32),
        "unembed": normal((d, v), d),
    }


def _layernorm(x: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale + bias


def _constrain(x: jax.Array, mesh: Mesh, spec: P) -> jax.Array:
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))


def _block(x: jax.Array, p: Params, mesh: Mesh) -> jax.Array:
    seq = x.shape[1]
    h = _layernorm(x, p["ln1_scale"], p["ln1_bias"])
    q = jnp.einsum("bsd,dhk->bshk", h, p["wq"])
    k = jnp.einsum("bsd,dhk->bshk", h, p["wk"])
    v = jnp.einsum("bsd,dhk->bshk", h, p["wv"])
    heads = P(BATCH, None, "tensor", None)
    q, k, v = (_constrain(t, mesh, heads) for t in (q, k, v))
    scores = jnp.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(causal, scores, jnp.float32(-1e9))
    attn = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("bhqs,bshk->bqhk", attn, v)
    out = jnp.einsum("bqhk,hkd->bqd", ctx, p["wo"])  # row-parallel: partial sums reduced over tensor
    x = _constrain(x + out, mesh, P(BATCH, None, None))
    h = _layernorm(x, p["ln2_scale"], p["ln2_bias"])
    gate = _constrain(h @ p["w_gate"], mesh, P(BATCH, None, "tensor"))
    up = _constrain(h @ p["w_up"], mesh, P(BATCH, None, "tensor"))
    down = (jax.nn.silu(gate) * up) @ p["w_down"]
    return _constrain(x + down, mesh, P(BATCH, None, None))


def loss_fn(params: Params, tokens: jax.Array, mesh: Mesh) -> jax.Array:
    """Mean next-token cross-entropy of a causal LM over ``tokens`` [batch, seq+1]."""
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    # FSDP: gather the whole table once, then look tokens up locally (a gather from a d_model-sharded
    # table would make the partitioner replicate it the slow way).
    table = _constrain(params["embed"], mesh, P(None, None))
    x = _constrain(jnp.take(table, inputs, axis=0), mesh, P(BATCH, None, None))
    for layer in params["layers"]:
        x = _block(x, layer, mesh)
    x = _layernorm(x, params["lnf_scale"], params["lnf_bias"])
    logits = _constrain(x @ params["unembed"], mesh, P(BATCH, None, "tensor"))
    logz = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return (logz - picked).mean()


@dataclass(frozen=True)
class AdamW:
    """Decoupled-weight-decay Adam (Loshchilov & Hutter), written out so no optimizer package is needed."""

    lr: float = 3e-4
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1

    def init(self, params: Params) -> Params:
        zeros = jax.tree.map(jnp.zeros_like, params)
        return {"mu": zeros, "nu": jax.tree.map(jnp.zeros_like, params), "count": jnp.zeros((), jnp.int32)}

    def update(self, grads: Params, state: Params, params: Params) -> tuple[Params, Params]:
        count = state["count"] + 1
        mu = jax.tree.map(lambda m, g: self.b1 * m + (1 - self.b1) * g, state["mu"], grads)
        nu = jax.tree.map(lambda n, g: self.b2 * n + (1 - self.b2) * g * g, state["nu"], grads)
        c1 = 1 - self.b1 ** count.astype(jnp.float32)
        c2 = 1 - self.b2 ** count.astype(jnp.float32)

        def step(p: jax.Array, m: jax.Array, n: jax.Array) -> jax.Array:
            return p - self.lr * ((m / c1) / (jnp.sqrt(n / c2) + self.eps) + self.weight_decay * p)

        return jax.tree.map(step, params, mu, nu), {"mu": mu, "nu": nu, "count": count}


@dataclass
class Trainer:
    """Everything needed to run and lower the sharded train step."""

    mesh: Mesh
    dims: ModelDims
    step_fn: Any  # the jitted step
    params: Params
    opt_state: Params

    def batch(self, step: int) -> jax.Array:
        """A deterministic synthetic token batch [batch, seq+1], sharded over (data, fsdp)."""
        rng = np.random.default_rng(1000 + step)
        tokens = rng.integers(0, self.dims.vocab, size=(self.dims.batch, self.dims.seq + 1), dtype=np.int32)
        return jax.device_put(tokens, NamedSharding(self.mesh, P(BATCH, None)))

    def run_step(self, tokens: jax.Array) -> jax.Array:
        """One optimizer step; returns the loss (not yet synchronized)."""
        self.params, self.opt_state, loss = self.step_fn(self.params, self.opt_state, tokens)
        return loss

    def compiled_hlo(self, tokens: jax.Array) -> str:
        """The optimized, partitioned HLO of the train step, as XLA compiled it."""
        return self.step_fn.lower(self.params, self.opt_state, tokens).compile().as_text()


def build_trainer(mesh_axes: dict[str, int], dims: ModelDims, seed: int = 0) -> Trainer:
    """Create the device mesh, place sharded params and optimizer state, and jit the train step."""
    devices = np.array(jax.devices()[: int(np.prod(list(mesh_axes.values())))])
    mesh = Mesh(devices.reshape(tuple(mesh_axes.values())), tuple(mesh_axes))
    specs = param_specs(dims)
    shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda s: isinstance(s, P))
    params = jax.device_put(init_params(dims, seed), shardings)
    opt = AdamW()
    opt_shardings = {"mu": shardings, "nu": shardings, "count": NamedSharding(mesh, P())}
    opt_state = jax.jit(opt.init, out_shardings=opt_shardings)(params)
    token_sharding = NamedSharding(mesh, P(BATCH, None))

    def train_step(params: Params, opt_state: Params, tokens: jax.Array) -> tuple[Params, Params, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, mesh)
        params, opt_state = opt.update(grads, opt_state, params)
        return params, opt_state, loss

    step_fn = jax.jit(
        train_step,
        in_shardings=(shardings, opt_shardings, token_sharding),
        out_shardings=(shardings, opt_shardings, NamedSharding(mesh, P())),
        donate_argnums=(0, 1),
    )
    return Trainer(mesh=mesh, dims=dims, step_fn=step_fn, params=params, opt_state=opt_state)
