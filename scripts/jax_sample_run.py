#!/usr/bin/env python
"""Train a small sharded transformer on N XLA:CPU virtual devices and write an ASAP run folder.

    python scripts/jax_sample_run.py --out examples/runs/jax-cpu-8dev --devices 8 \\
        --mesh data=2,fsdp=2,tensor=2 --layers 2 --d-model 256 --heads 4 --seq 128 --batch 16 --steps 6

The virtual device count reaches XLA_FLAGS before JAX is imported (bot.samples.jaxrun imports JAX only
after validating the arguments). See docs/real-jax-run.md for what the folder contains.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    try:
        from bot.samples.jaxrun import main
    except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from bot.samples.jaxrun import main
    sys.exit(main())
