"""How many real launch scripts and YAML files ASAP reads to the mesh the framework would build (issue 13).

Usage::

    python benchmarks/real_configs.py --maxtext /work/.mirror/AI-Hypercomputer+maxtext/repo \\
        [--megatron /work/.mirror/NVIDIA+Megatron-LM/repo] [--pai /work/.mirror/alibaba+Pai-Megatron-Patch/repo] \\
        [--torchtitan /work/.mirror/pytorch+torchtitan/repo]

Each checkout is a git directory (a fetched mirror is enough): its files are materialized into a temporary
folder with ``git archive``. The reference ("what the framework would build") is computed independently
of ASAP's readers:

* **Shell expansion** comes from bash itself: each script runs under ``bash`` in the temporary copy with a
  ``BASH_ENV`` file that replaces ``python``/``python3``/``torchrun`` by a function recording its argv and
  stubs every other command that could reach outside (sudo, gsutil, gcloud, pip, curl, git, docker...; an
  unknown command does nothing). Nothing of the training stack runs. (ASAP itself never runs a script; the
  benchmark does so only to obtain an independent reference.)
* **MaxText's mesh** comes from MaxText's own code in that checkout: ``create_device_mesh``'s ``ici_map``
  (which key feeds which mesh axis, with its default) is read from the source with ``ast``, the config
  chain is merged with PyYAML like ``pyconfig`` (``base_config`` relative to the file; later wins; then the
  command's ``key=value`` overrides), and ``fill_unspecified_mesh_axes``'s rule fills the ``-1``.
* **Megatron's settings** are the recorded argv read with argparse's rule (the last occurrence wins).
* **torchtitan's config functions** (March 2026 on) are read from their source; the reference is the degrees their
  names state (torchtitan's integration-test configs: ``llama3_debugmodel_fsdp2_tp2_pp2``), which their authors wrote.

The device count of a MaxText recipe is taken from its comments (``v5p-512`` is 256 chips; ``v5e-256``,
``v6e-256``/``trillium-256`` are 256 chips; ``<N>vm`` GPU recipes are N nodes of 8 GPUs, one slice per
node); 256 chips in one slice when a script names none. Pai-Megatron-Patch scripts take positional
arguments: the example invocation in their header comment (``# sh run_....sh dsw ... ``) is used, for the
reference and for ASAP (as run.yaml's ``command:``).
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.configs import maxtext as mx  # noqa: E402
from bot.configs.detect import load_config  # noqa: E402
from bot.errors import AsapError  # noqa: E402

BASH_ENV = r"""
__asap_record() { printf '%s\0' "$@" > "$ASAP_ARGV_DIR/$(date +%s%N).argv"; }
python3() { __asap_record python3 "$@"; return 0; }
python() { __asap_record python "$@"; return 0; }
torchrun() { __asap_record torchrun "$@"; return 0; }
deepspeed() { __asap_record deepspeed "$@"; return 0; }
bash() { case "$1" in *configs/*.sh|*examples/*.sh) command bash "$@";; *) return 0;; esac; }
sh() { bash "$@"; }
for __c in sudo gsutil gcloud pip pip3 curl wget git docker kubectl xpk apt apt-get rm nvidia-smi shuf \
           mpirun srun sbatch ssh scp sysctl ulimit hostname nproc; do eval "$__c() { echo 1; return 0; }"; done
command_not_found_handle() { return 0; }
"""


def materialize(repo: Path, paths: list[str], dest: Path, rev: str = "HEAD") -> None:
    """``git archive`` the given folders of ``rev`` into ``dest`` (folders it lacks are skipped)."""
    paths = [p for p in paths if subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{rev}:{p}"],
                                                capture_output=True, check=False).returncode == 0]
    proc = subprocess.run(["git", "-C", str(repo), "archive", rev, *paths], capture_output=True, check=False)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=proc.stdout, check=True)


def run_bash(script: Path, cwd: Path, args: list[str], extra: dict[str, str] | None = None) -> list[list[str]]:
    """Run ``script`` under bash with the stubs; the argv of every python/torchrun call, in order."""
    with tempfile.TemporaryDirectory() as out:
        env_file = Path(out) / "env.sh"
        env_file.write_text(BASH_ENV)
        env = {"PATH": "/usr/bin:/bin", "HOME": out, "BASH_ENV": str(env_file), "ASAP_ARGV_DIR": out,
               "PWD": str(cwd), **(extra or {})}
        subprocess.run(["bash", str(script), *args], cwd=cwd, env=env, capture_output=True, timeout=30, check=False)
        files = sorted(Path(out).glob("*.argv"))
        return [f.read_bytes().decode().split("\0")[:-1] for f in files]


# --------------------------------------------------------------------------------------------- MaxText
def ici_map_from_source(root: Path) -> dict | list[str]:
    """Which config key feeds which mesh axis, read from MaxText's own source with ``ast``.

    Current MaxText: ``create_device_mesh``'s ``ici_map`` dict (mesh axis -> (key, default)). Older MaxText
    (2024-2025): ``pyconfig``'s positional list ``ici_parallelism = [raw_keys["ici_data_parallelism"], ...]``,
    aligned with ``mesh_axes``.
    """
    for name in ("maxtext_utils.py", "types.py"):  # 2026: create_device_mesh; early 2026: pydantic types.py
        for path in sorted(root.rglob(name)):
            for sub in ast.walk(ast.parse(path.read_text())):
                if isinstance(sub, ast.Assign) and getattr(sub.targets[0], "id", "") == "ici_map" \
                        and isinstance(sub.value, ast.Dict):
                    return _map_literal(sub.value)
    for path in sorted(root.rglob("pyconfig.py")):
        for sub in ast.walk(ast.parse(path.read_text())):
            if isinstance(sub, ast.Assign) and getattr(sub.targets[0], "id", "") == "ici_parallelism" \
                    and isinstance(sub.value, ast.List):
                return [ast.literal_eval(e.slice) for e in sub.value.elts]  # type: ignore[attr-defined]
    raise SystemExit("neither create_device_mesh's ici_map nor pyconfig's ici_parallelism list was found")


def _map_literal(d: ast.Dict) -> dict[str, tuple[str | None, int]]:
    out: dict[str, tuple[str | None, int]] = {}
    for k, v in zip(d.keys, d.values, strict=True):
        axis = k.value  # type: ignore[union-attr]
        if isinstance(v, ast.Call):
            out[axis] = (ast.literal_eval(v.args[1]), ast.literal_eval(v.args[2]))
        elif isinstance(v, ast.Attribute):  # self.ici_x_parallelism: the key is always in base.yml
            out[axis] = (v.attr, -1 if v.attr == "ici_fsdp_parallelism" else 1)
        else:
            out[axis] = (None, ast.literal_eval(v))
    return out


def load_chain(path: Path) -> dict:
    """pyconfig's merge: the base_config file (relative to the file, else to MaxText's configs folder)
    first, the child's keys win."""
    raw = yaml.safe_load(path.read_text()) or {}
    base = raw.get("base_config")
    if base:
        parent = path.parent / base
        if not parent.is_file():
            parent = next((d / base for d in path.parents if d.name == "configs" and (d / base).is_file()), parent)
        merged = load_chain(parent) if parent.is_file() else {}
        merged.update(raw)
        return merged
    return raw


def fill(vals: list[int], target: int) -> list[int] | str:
    """fill_unspecified_mesh_axes: one -1 takes the rest; the product must equal the target."""
    if vals.count(-1) > 1:
        return "more than one -1"
    if -1 in vals:
        rest = target / (math.prod(vals) * -1)
        if rest < 1 or not float(rest).is_integer():
            return "-1 cannot be determined"
        vals = [int(rest) if v == -1 else v for v in vals]
    if math.prod(vals) != target:
        return f"product {math.prod(vals)} != {target}"
    return vals


def reference_mesh(cfg: dict, source: dict | list[str], chips: int, slices: int) -> dict | str:
    """The mesh MaxText would build, in its own axes (size-1 axes dropped), or why it would refuse."""
    axes = cfg.get("mesh_axes") or []
    if isinstance(source, list):  # older MaxText: positional keys aligned with mesh_axes
        if len(source) != len(axes):
            return f"mesh_axes has {len(axes)} axes but this MaxText builds {len(source)}"
        ici_keys = [(k, -1 if k == "ici_fsdp_parallelism" else 1) for k in source]
    else:
        ici_keys = [source[a] for a in axes]
    ici = [cfg.get(k, d) if k else d for k, d in ici_keys]
    got = fill([int(v) for v in ici], chips // slices)
    if isinstance(got, str):
        return got
    out = {"ici": {a: v for a, v in zip(axes, got, strict=True) if v != 1}, "dcn": {}}
    if slices > 1:
        dcn = [cfg.get(k.replace("ici_", "dcn_", 1), 1) if k else d for k, d in ici_keys]
        gd = fill([int(v) for v in dcn], slices)
        if isinstance(gd, str):
            return gd
        out["dcn"] = {a: v for a, v in zip(axes, gd, strict=True) if v != 1}
    return out


def asap_mesh(path: Path, chips: int, slices: int, root: Path) -> dict | str:
    try:
        cfg = load_config(path, root=root)  # the checkout is the folder its files may name
        nat = mx.native(cfg, chips, slices)
    except AsapError as exc:
        return "refused: " + exc.message.splitlines()[0]
    return {g: {a: v for a, v in nat[g].items() if v != 1} for g in ("ici", "dcn")}


def chips_of(text: str, name: str) -> tuple[int, int]:
    """The device count a recipe's comments name (see the module docstring)."""
    m = re.match(r"(\d+)vm\.sh$", name)
    if m:
        return 8 * int(m.group(1)), int(m.group(1))
    m = re.search(r"\b(v5p|v4|v5e|v6e|trillium)-(\d+)", text + " " + name)
    if m:
        n = int(m.group(2))
        return (n // 2 if m.group(1) in ("v5p", "v4") else n), 1
    m = re.search(r"v5p_(\d+)\.sh$", name)
    if m:
        return int(m.group(1)) // 2, 1
    return 256, 1


def maxtext_scripts(root: Path, ici_map: dict) -> tuple[int, int, list[str]]:
    """(recipe scripts whose mesh MaxText would build, of them read by ASAP to that mesh, report lines).

    Scripts whose launch bash cannot reach, or whose config file is missing from the checkout (MaxText
    itself would not start), are listed apart with what ASAP reads, and not counted in either number.
    """
    total = agree = 0
    lines: list[str] = []
    for script in sorted(root.rglob("configs/**/*.sh")):
        chips, slices = chips_of(script.read_text(), script.name)
        calls = [a for a in run_bash(script, root, []) if _is_maxtext_train(a)]
        if not calls and (root / "src").is_dir():  # scripts that call ./maxtext/... expect to run from src/
            calls = [a for a in run_bash(script, root / "src", [], {"MAXTEXT_REPO_ROOT": str(root)})
                     if _is_maxtext_train(a)]
        rel = script.relative_to(root)
        if not calls:
            lines.append(f"apart: {rel}: bash reaches no MaxText launch (from the repository root or src/); "
                         f"ASAP reads {asap_mesh(script, chips, slices, root)}")
            continue
        argv = calls[-1]
        i = next(i for i, w in enumerate(argv) if w.endswith((".yml", ".yaml")))
        overrides = dict(w.split("=", 1) for w in argv[i + 1:] if "=" in w)
        cfg_path = Path(argv[i]) if Path(argv[i]).is_absolute() else (root / argv[i]).resolve()
        got = asap_mesh(script, chips, slices, root)
        if not cfg_path.is_file():
            lines.append(f"apart: {rel}: its config {argv[i]} is not in the checkout (MaxText would not start); "
                         f"ASAP reads {got} with base.yml defaults and says so")
            continue
        cfg = load_chain(cfg_path)
        cfg.update({k: yaml.safe_load(v) if v else v for k, v in overrides.items()})
        ref = reference_mesh(cfg, ici_map, chips, slices)
        total += 1
        ok = got == ref or (isinstance(ref, str) and isinstance(got, str))
        agree += ok
        if not ok:
            lines.append(f"DIFFERS: {rel} ({chips} chips, {slices} slice(s)): MaxText {ref}; ASAP {got}")
    return total, agree, lines


def _is_maxtext_train(argv: list[str]) -> bool:
    if len(argv) > 3 and argv[1] == "-m" and "train" in argv[2] and "maxtext" in argv[2].lower():
        return True
    return len(argv) > 2 and bool(re.search(r"(?i)maxtext.*/train(_compile)?\.py$", argv[1]))


def maxtext_yamls(root: Path, ici_map: dict) -> tuple[int, int, list[str]]:
    """YAML files under configs/ that set a parallelism key or mesh_axes, read alone on 256 chips."""
    total = agree = 0
    bad: list[str] = []
    for path in sorted(root.rglob("configs/**/*.y*ml")):
        text = path.read_text(errors="replace")
        if not re.search(r"^(ici|dcn)_\w+_parallelism:|^mesh_axes:", text, re.M):
            continue
        try:
            cfg = load_chain(path)
        except yaml.YAMLError:
            continue
        total += 1
        ref = reference_mesh(cfg, ici_map, 256, 1)
        got = asap_mesh(path, 256, 1, root)
        ok = got == ref or (isinstance(ref, str) and isinstance(got, str))
        agree += ok
        if not ok:
            bad.append(f"DIFFERS: {path.relative_to(root)}: MaxText {ref}; ASAP {got}")
    return total, agree, bad


# -------------------------------------------------------------------------------------------- Megatron
FLAGS = {"tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp", "context_parallel_size": "cp",
         "expert_model_parallel_size": "ep", "micro_batch_size": "mbs", "global_batch_size": "gbs"}


def reference_flags(argv: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, w in enumerate(argv):
        name, eq, val = w.partition("=")
        key = name.lstrip("-").replace("-", "_")
        if key in FLAGS:
            v = val if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if v.isdigit():
                out[FLAGS[key]] = int(v)
    return out


def asap_flags(path: Path, command: str | None, root: Path) -> tuple[dict[str, int] | str, set[str]]:
    """ASAP's reading of the six values, and the ones it reports as unknown (with a reason in its notes)."""
    try:
        cfg = load_config(path, command=command, root=root)
    except AsapError as exc:
        return "refused: " + exc.message.splitlines()[0], set()
    out = {FLAGS[k.key]: k.value for k in cfg.keys}
    unknown: set[str] = set()
    for name in ("micro_batch_size", "global_batch_size"):
        v = cfg.setting(name)
        if isinstance(v, int) and not isinstance(v, bool):
            out[FLAGS[name]] = v
        elif name in cfg.settings or any(name.replace("_", "-") in n for n in cfg.reading):
            unknown.add(FLAGS[name])
    return out, unknown


def megatron_scripts(root: Path, label: str) -> tuple[int, int, list[str]]:
    """(scripts reaching a Megatron launch under bash, of them read exactly, report lines)."""
    total = agree = said_unknown = scripts = 0
    lines: list[str] = []
    for script in sorted(root.rglob("examples/**/*.sh")):
        scripts += 1
        text = script.read_text(errors="replace")
        m = re.search(r"^#\s*(?:sh|bash)\s+(\S+\.sh)\s+(.*)$", text, re.M)
        args = m.group(2).split() if m and Path(m.group(1)).name == script.name else []
        calls = [a for a in run_bash(script, script.parent, args) if _megatron_argv(a)]
        if not calls:
            continue
        ref = reference_flags(calls[-1])
        if not any(k in ref for k in ("tp", "pp", "mbs", "gbs")):
            continue
        total += 1
        command = f"bash {script.name} {' '.join(args)}" if args else None
        got, unknown = asap_flags(script, command, root)
        if isinstance(got, str):
            lines.append(f"DIFFERS: {script.relative_to(root)}: {label} argv {ref}; ASAP {got}")
            continue
        got_cmp = {k: v for k, v in got.items() if k in ref or v != 1}
        wrong = {k for k in set(ref) | set(got_cmp) if ref.get(k, 1) != got_cmp.get(k, 1) and k not in unknown}
        if wrong:
            lines.append(f"DIFFERS: {script.relative_to(root)}: {label} argv {ref}; ASAP {got}")
            continue
        agree += 1
        if unknown & set(ref):
            said_unknown += 1
            lines.append(f"unknown: {script.relative_to(root)}: ASAP reports {sorted(unknown & set(ref))} as unknown "
                         f"(set in branches of a test that depends on the machine); bash on this machine gave {ref}")
    lines.insert(0, f"({scripts} .sh files under examples/; {total} reach a Megatron launch with parallel or batch "
                    f"flags under bash with their documented arguments; {said_unknown} of the {agree} have a value "
                    "ASAP reports as unknown, with the reason)")
    return total, agree, lines


def _megatron_argv(argv: list[str]) -> bool:
    return any(re.search(r"(pretrain|finetune|train)[\w-]*\.py$", w) for w in argv)


# torchtitan's integration-test config functions name their degrees (``llama3_debugmodel_fsdp2_tp2_pp2``,
# ``..._hsdp2x2_ep2``): a reference written by torchtitan's authors, independent of ASAP's reading of the body
_TITAN_NAMED = {"fsdp": "data_parallel_shard_degree", "tp": "tensor_parallel_degree", "pp": "pipeline_parallel_degree",
                "cp": "context_parallel_degree", "ep": "expert_parallel_degree", "ddp": "data_parallel_replicate_degree"}


def _titan_named(name: str) -> dict[str, int]:
    named: dict[str, int] = {}
    for tok in name.split("_"):
        m = re.fullmatch(r"(fsdp|tp|pp|cp|ep|ddp)(\d+)", tok)
        if m:
            named[_TITAN_NAMED[m.group(1)]] = int(m.group(2))
        m = re.fullmatch(r"hsdp(\d+)x(\d+)", tok)
        if m:
            named[_TITAN_NAMED["ddp"]], named[_TITAN_NAMED["fsdp"]] = int(m.group(1)), int(m.group(2))
    return named


def torchtitan_functions(root: Path) -> tuple[int, int, int, int, list[str]]:
    """Every ``-> Trainer.Config`` function of a torchtitan checkout (torchtitan of March 2026 on) read from its
    source: (functions, read, named in the function's name, agreeing with the name, problems)."""
    total = read = named_n = agree = 0
    bad: list[str] = []
    for f in sorted(root.rglob("*.py")):
        text = f.read_text(encoding="utf-8", errors="replace")
        if "Trainer.Config" not in text:
            continue
        try:
            module = ast.parse(text)
        except SyntaxError:
            continue
        for fn in (n for n in module.body if isinstance(n, ast.FunctionDef) and n.returns is not None
                   and ast.unparse(n.returns) == "Trainer.Config"):
            total += 1
            try:
                cfg = load_config(f, command=f"torchrun -m torchtitan.train --config {fn.name}", root=root)
            except AsapError as exc:
                bad.append(f"refused {f.relative_to(root)}::{fn.name}: {exc.message[:120]}")
                continue
            read += 1
            named = _titan_named(fn.name)
            if not named:
                continue
            named_n += 1
            got = {k.key: k.value for k in cfg.keys}
            default = {"data_parallel_shard_degree": -1}
            if all(got.get(k, default.get(k, 1)) == v for k, v in named.items()):
                agree += 1
            else:
                bad.append(f"DIFFERS {f.relative_to(root)}::{fn.name}: named {named}, read {got}")
    return total, read, named_n, agree, bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--maxtext", type=Path)
    ap.add_argument("--rev", default="HEAD", help="the MaxText commit to read (default HEAD)")
    ap.add_argument("--megatron", type=Path)
    ap.add_argument("--pai", type=Path)
    ap.add_argument("--torchtitan", type=Path, help="a pytorch/torchtitan checkout of March 2026 on")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every disagreement")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if a.maxtext:
            root = Path(tmp) / "maxtext"
            root.mkdir()
            materialize(a.maxtext, ["src/maxtext/configs", "src/maxtext/utils", "src/MaxText", "MaxText"], root, a.rev)
            head = subprocess.run(["git", "-C", str(a.maxtext), "rev-parse", "--short", a.rev], capture_output=True,
                                  text=True, check=False).stdout.strip()
            ici_map = ici_map_from_source(root)
            for what, fn in (("recipe scripts", maxtext_scripts), ("YAML files with mesh keys", maxtext_yamls)):
                total, agree, bad = fn(root, ici_map)
                apart = sum(1 for line in bad if line.startswith("apart"))
                print(f"MaxText {head} {what}: {agree}/{total} read to the mesh MaxText would build"
                      + (f" ({apart} more set apart, below)" if apart else ""))
                for line in bad if a.verbose else [x for x in bad if x.startswith("DIFFERS")][:10]:
                    print("   ", line)
        for label, repo in (("Megatron-LM", a.megatron), ("Pai-Megatron-Patch", a.pai)):
            if repo is None:
                continue
            root = Path(tmp) / label
            root.mkdir()
            materialize(repo, ["examples"], root)
            total, agree, bad = megatron_scripts(root, label)
            print(f"{label} example launch scripts: {agree}/{total} read with the launch's TP/PP/CP/EP/MBS/GBS")
            for line in bad if a.verbose else [bad[0]] + [x for x in bad if x.startswith("DIFFERS")][:10]:
                print("   ", line)
        if a.torchtitan:
            root = Path(tmp) / "torchtitan"
            root.mkdir()
            materialize(a.torchtitan, ["torchtitan", "torchtitan_recipes"], root)
            total, read, named, agree, bad = torchtitan_functions(root)
            print(f"torchtitan config functions: {read}/{total} read from their Python source; the degrees of "
                  f"{agree}/{named} agree with those their names state (fsdp2_tp2_pp2 ...)")
            for line in bad if a.verbose else bad[:10]:
                print("   ", line)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
