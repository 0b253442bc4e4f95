"""Kubernetes manifests that launch training, read through their training container's command (bot.configs.k8s).

Fixtures: Google's GKE JobSets for Ironwood (AI-Hypercomputer/tpu-recipes @ c8cfe2f,
``training/ironwood/gpt-oss-120b/8k-bf16-tpu7x-4x4x4/k8s/k8s_manifest.yaml``: ``bash -c`` with the MaxText launch
in a literal block, topology in the node selector; ``training/ironwood/gemma4-2b/8k-bf16-tpu7x-4x4x4/k8s/
k8s_manifest.yaml``: topology as the pod annotation ``gke-tpu-slice-topology``). Each runs the same MaxText
arguments as the recipe's XPK launcher, whose mesh the eval corpus already checks (gpt-oss-120b: fsdp 64 x data 2
over 128 devices = data 2 x fsdp 32 over 64 chips; gemma4-2b: data 4 x fsdp 16 over chips). The GPU manifests are
built here in the shape of Kubeflow's PyTorchJob examples (kubeflow/training-operator), running Megatron-LM's own
GPT-3 175B launch script (tests/data/real/megatron/train_gpt3_175b_distributed.sh).
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from bot.configs.checks import startup_problems
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh
from bot.configs.mesh import Mesh
from bot.errors import ConfigError

REAL = Path(__file__).parent / "data" / "real"
OSS = REAL / "tpu_recipes" / "ironwood_gpt-oss-120b_8k-bf16-tpu7x-4x4x4_k8s_manifest.yaml"
GEMMA = REAL / "tpu_recipes" / "ironwood_gemma4-2b_8k-bf16-tpu7x-4x4x4_k8s_manifest.yaml"


def _changed_lines(old: str, new: str) -> list[str]:
    return [ln for ln in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_a_gke_jobset_is_read_through_its_containers_bash_script() -> None:
    cfg = load_config(OSS)
    assert cfg.format == "maxtext" and cfg.setting("model_name") == "gpt-oss-120b"
    # the node selector states the hardware: tpu7x, 4x4x4 = 64 chips, one slice; MaxText counts two devices a chip
    assert (cfg.devices, cfg.nodes, cfg.devices_per_chip) == (64, 1, 2)
    assert cfg.mesh(64, 1) == Mesh(ici={"data": 2, "fsdp": 32})
    assert any("topology 4x4x4 = 64 chips per slice" in n for n in cfg.reading)
    # a value is placed where the manifest writes it, inside the literal block
    key = next(k for k in cfg.keys if k.key == "ici_fsdp_parallelism")
    assert cfg.text[key.start:key.end] == "64" and key.file is None
    assert cfg.text[cfg.text.rfind("\n", 0, key.start):key.start].strip().startswith("(export TPU_STDERR")


def test_the_slice_topology_annotation_counts_too() -> None:
    cfg = load_config(GEMMA)
    assert (cfg.devices, cfg.nodes) == (64, 1)
    assert cfg.mesh(64, 1) == Mesh(ici={"data": 4, "fsdp": 16})


def test_an_edit_changes_only_the_values_in_the_block_and_reads_back() -> None:
    cfg = load_config(OSS)
    new = apply_mesh(cfg, Mesh(ici={"data": 4, "fsdp": 16}))
    changed = _changed_lines(cfg.text, new)
    assert len(changed) == 2  # the one long command line, before and after
    assert "ici_fsdp_parallelism=32 ici_data_parallelism=4 dataset_type" in changed[1]
    assert changed[0][1:].replace("ici_fsdp_parallelism=64 ici_data_parallelism=2", "") == \
        changed[1][1:].replace("ici_fsdp_parallelism=32 ici_data_parallelism=4", "")
    assert parse_config(new, str(OSS)).mesh(64, 1) == Mesh(ici={"data": 4, "fsdp": 16})
    # a key the command lacks joins it, after a word the block writes as a literal
    added = apply_mesh(cfg, Mesh(ici={"fsdp": 32, "tensor": 2}))
    assert "dataset_path=gs://max-datasets-rogue ici_tensor_parallelism=4 base_output_directory" in added
    assert parse_config(added, str(OSS)).mesh(64, 1) == Mesh(ici={"fsdp": 32, "tensor": 2})


def test_a_manifest_for_another_slice_size_is_flagged_against_the_run() -> None:
    problems = [p for p in startup_problems(load_config(OSS), 256, 1) if p.error]
    assert any("64" in p.message and "256" in p.message for p in problems)


PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: gpt3-175b
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: nvcr.io/nvidia/pytorch:25.01-py3
              env:
                - name: TP
                  value: "8"
                - name: NODE_RANK
                  valueFrom:
                    fieldRef:
                      fieldPath: metadata.annotations['training.kubeflow.org/replica-index']
              command:
                - torchrun
              args:
                - --nproc_per_node=8
                - --nnodes=16
                - pretrain_gpt.py
                - --num-layers=96
                - --hidden-size=12288
                - --num-attention-heads=96
                - --seq-length=2048
                - --micro-batch-size=1
                - --global-batch-size=1536
                - --tensor-model-parallel-size=8
                - --pipeline-model-parallel-size=16
                - --bf16
"""


def test_a_pytorchjob_args_list_is_read_and_edited_in_its_list_item() -> None:
    cfg = parse_config(PYTORCHJOB, "job.yaml")
    assert cfg.format == "megatron" and cfg.devices == 128
    assert cfg.mesh(128, 16).size("tensor") == 8 and cfg.mesh(128, 16).size("pipeline") == 16
    new = apply_mesh(cfg, cfg.mesh(128, 16).model_copy(update={
        "ici": {"tensor": 4, "data": 2}, "dcn": {"pipeline": 16}}))
    assert _changed_lines(PYTORCHJOB, new) == ["-                - --tensor-model-parallel-size=8",
                                               "+                - --tensor-model-parallel-size=4"]


def test_kubernetes_expands_env_references_in_args_and_an_edit_goes_to_the_env_value() -> None:
    # Kubernetes replaces $(TP) in args with the container's env before torchrun starts; $$(PP) stays literal text
    manifest = PYTORCHJOB.replace("- --tensor-model-parallel-size=8", "- --tensor-model-parallel-size=$(TP)")
    cfg = parse_config(manifest, "job.yaml")
    assert cfg.mesh(128, 16).size("tensor") == 8
    new = apply_mesh(cfg, cfg.mesh(128, 16).model_copy(update={"ici": {"tensor": 4, "data": 2}}))
    assert _changed_lines(manifest, new) == ['-                  value: "8"', '+                  value: "4"']


def test_a_bash_script_sees_the_containers_env_and_an_edit_goes_to_its_value() -> None:
    manifest = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: llama
spec:
  template:
    spec:
      containers:
        - name: train
          image: nvcr.io/nvidia/pytorch:25.01-py3
          env:
            - name: TP
              value: "4"
          command: ["/bin/bash", "-lc"]
          args:
            - |
              torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 \\
                --num-attention-heads 32 --seq-length 4096 --micro-batch-size 1 --global-batch-size 64 \\
                --tensor-model-parallel-size ${TP} --pipeline-model-parallel-size 1 --bf16
"""
    cfg = parse_config(manifest, "job.yaml")
    assert cfg.mesh(8, 1) == Mesh(ici={"tensor": 4, "data": 2})
    new = apply_mesh(cfg, Mesh(ici={"tensor": 2, "data": 4}))
    assert _changed_lines(manifest, new) == ['-              value: "4"', '+              value: "2"']


def test_a_real_launch_script_in_a_job_reads_as_the_script_does() -> None:
    # Megatron-LM's own GPT-3 175B launch script, run by a Job's second container (the first is a sidecar)
    script = (REAL / "megatron" / "train_gpt3_175b_distributed.sh").read_text()
    block = "\n".join("                  " + ln if ln else "" for ln in script.splitlines())
    manifest = ("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: gpt3\nspec:\n  template:\n    spec:\n"
                "      containers:\n        - name: sidecar\n          image: busybox\n          command: [sleep, '1']\n"
                "        - name: train\n          image: nvcr.io/nvidia/pytorch:25.01-py3\n"
                "          command:\n            - bash\n            - -c\n            - |\n" + block + "\n")
    cfg = parse_config(manifest, "job.yaml")
    direct = parse_config(script, "train_gpt3_175b_distributed.sh")
    assert cfg.format == direct.format == "megatron"
    assert cfg.mesh(1024, 128) == direct.mesh(1024, 128)
    tp = next(k for k in cfg.keys if k.axis == "tensor")
    assert tp.start > manifest.index("- |") and manifest[tp.start:tp.end] == tp.raw  # read inside the block


def test_a_manifest_set_with_a_service_is_read_and_one_without_training_is_named() -> None:
    service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: headless\nspec:\n  clusterIP: None\n---\n"
    cfg = parse_config(service + PYTORCHJOB, "job.yaml")
    assert cfg.mesh(128, 16).size("tensor") == 8
    web = ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n"
           "      containers:\n        - name: nginx\n          image: nginx\n          args: [nginx, -g, daemon off;]\n")
    with pytest.raises(ConfigError) as err:
        parse_config(web, "web.yaml")
    assert "no training launch found in the Kubernetes manifest (Deployment)" in err.value.message
    assert "nginx" in err.value.message
