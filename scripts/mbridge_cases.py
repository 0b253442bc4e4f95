"""What the Megatron-Bridge case-writing scripts share: the YAML dump, the measured block, and the command line.

``scripts/eval_cases_mbridge_{h100,nemotron,finetune,2608}.py`` each turn rows of a Megatron-Bridge performance table
into eval case folders (``examples/eval/<case>/``). Their rows, recipes and assumptions differ; how a case file is
written, how a row's two figures become the ``measured`` entry, and how the script is run do not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def dump(doc: Any) -> str:
    """A case file's YAML, as every committed case is written (key order kept, 120 columns)."""
    return yaml.safe_dump(doc, sort_keys=False, width=120)


def write(folder: Path, name: str, doc: Any) -> None:
    (folder / name).write_text(dump(doc))


def measured(row: dict[str, str], label: str) -> list[dict[str, Any]]:
    """The ``measured`` entry of a row: its tokens/s/GPU and model TFLOP/s/GPU, with the row named by ``label``."""
    tps, tflops = row["Tokens / sec / GPU"], row["Model TFLOP / sec / GPU"]
    return [{"tokens_per_second_per_chip": float(tps), "tflops_per_chip": float(tflops),
             "source": f"{label}: {tps} tokens/sec/GPU, {tflops} model TFLOP/sec/GPU"}]


def megatron_doc(row: dict[str, str], gpus: int, slices: int,
                 settings: Iterable[tuple[str, str, Any, str]]) -> tuple[dict[str, Any], list[str], int]:
    """A table row's megatron.yaml document: the parallel sizes and batch the row states, then each recipe setting
    ``(section, key, value, where it is set)``; with the comment line citing each setting, and the data-parallel size."""
    tp, pp, cp = (int(row[k]) for k in ("TP", "PP", "CP"))
    sizes: dict[str, Any] = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
                             "context_parallel_size": cp}
    if row["EP"] != "n/a":
        sizes["expert_model_parallel_size"] = int(row["EP"])
    if row["VP"] != "n/a":
        sizes["virtual_pipeline_model_parallel_size"] = int(row["VP"])
    doc: dict[str, Any] = {"trainer": {"devices": gpus // slices, "num_nodes": slices},
                           "model": {**sizes, "seq_length": int(row["Sequence Length"])},
                           "train": {"micro_batch_size": int(row["MBS"]), "global_batch_size": int(row["GBS"])}}
    cites: list[str] = []
    for section, key, value, src in settings:
        doc.setdefault(section, {})[key] = value
        cites.append(f"#   {section}.{key}: {src}")
    return doc, cites, gpus // (tp * pp * cp)


def run(argv: list[str], write_all: Callable[[Path], Iterable[str]]) -> int:
    """``script.py [cases dir]``: write every case (default ``examples/eval``) and print the ids written."""
    root = Path(argv[1]) if len(argv) > 1 else ROOT / "examples" / "eval"
    sys.path.insert(0, str(ROOT))
    for cid in write_all(root):
        print(cid)
    return 0
