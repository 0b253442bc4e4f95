"""Regenerate the real profile fixtures in this folder (run by hand; not part of the test suite).

    XLA_FLAGS=--xla_force_host_platform_device_count=4 .venv/bin/python tests/data/profiles/generate.py

Profiles a tiny jitted, sharded step on 4 virtual CPU devices with jax.profiler, converts the raw XProf
session with xprof (hlo_stats, roofline_model, overview_page, op_profile), and saves the compiled HLO of
that step and of a shard_map step using every collective kind.
"""

import glob
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

HERE = Path(__file__).resolve().parent


def main() -> None:
    devs = np.array(jax.devices()).reshape(2, 2)
    mesh = Mesh(devs, ("data", "model"))
    x = jax.device_put(jnp.ones((64, 128), jnp.float32), NamedSharding(mesh, P("data", None)))
    w = jax.device_put(jnp.ones((128, 256), jnp.float32), NamedSharding(mesh, P(None, "model")))

    @jax.jit
    def step(x, w):
        y = jnp.tanh(x @ w)
        g = jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w)
        return y.sum(), w - 0.01 * g

    (HERE / "step.hlo.txt").write_text(step.lower(x, w).compile().as_text())

    def body(a):
        s = jax.lax.psum(a, "model")
        g = jax.lax.all_gather(a, "data", tiled=True)
        r = jax.lax.psum_scatter(g, "data", tiled=True)
        p = jax.lax.ppermute(a, "model", perm=[(0, 1), (1, 0)])
        t = jax.lax.all_to_all(a.reshape(2, -1, a.shape[-1]), "model", 0, 0, tiled=True)
        return s + r + p + t.reshape(a.shape).astype(a.dtype)

    sm = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("data", "model"), out_specs=P("data", "model")))
    a = jax.device_put(jnp.ones((64, 128), jnp.bfloat16), NamedSharding(mesh, P("data", "model")))
    (HERE / "collectives.hlo.txt").write_text(sm.lower(a).compile().as_text())

    step(x, w)[0].block_until_ready()
    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp):
            for i in range(3):
                with jax.profiler.StepTraceAnnotation("train", step_num=i):
                    loss, w = step(x, w)
                    loss.block_until_ready()
        xplane = glob.glob(os.path.join(tmp, "plugins", "profile", "*", "*.xplane.pb"))[0]
        trace = glob.glob(os.path.join(tmp, "plugins", "profile", "*", "*.trace.json.gz"))[0]
        session = HERE / "session" / "plugins" / "profile" / "2026_01_01_00_00_00"
        shutil.rmtree(HERE / "session", ignore_errors=True)
        session.mkdir(parents=True)
        shutil.copy(xplane, session / "host.xplane.pb")
        shutil.copy(trace, HERE / "cpu_step.trace.json.gz")
        from xprof.convert.raw_to_tool_data import xspace_to_tool_data

        for tool in ("hlo_stats", "roofline_model", "overview_page", "op_profile"):
            data, _ = xspace_to_tool_data([xplane], tool, {})
            (HERE / f"cpu_{tool}.json").write_bytes(data if isinstance(data, bytes) else data.encode())
    print("wrote fixtures to", HERE, file=sys.stderr)


if __name__ == "__main__":
    main()
