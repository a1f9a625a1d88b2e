"""Check the verl route against verl itself: every verl override our docs print, composed with verl's own Hydra
config in strict mode, and our exported Parquet loaded with verl's dataset classes and sampler.

    python bench/verl_check.py --venv /tmp/verl-venv [--install] [--verl-version 0.9.1]

Run it with the project's Python (it builds a small store, exports it and builds a tiny tokenizer, so it needs
the `bfcl` and `trl` extras); the verl side runs in a separate virtual environment, ``--venv``, which
``--install`` creates or completes: the CPU torch the project pins, verl without its dependencies, then only
the dependencies verl declares that composing its config and loading its dataset need (hydra-core, omegaconf,
transformers, datasets, ray, tensordict, torchdata, ...), pinned as verl pins them, and this checkout of
coevolve-engine (without dependencies) so that ``pkg://coevolve_engine...`` resolves. No GPU is needed.

What it checks, printing one line per item and exiting non-zero on any failure:

1. overrides: every ``key=value`` verl override in docs/trainers.md, recipes/*.toml, recipes/README.md, the
   ``export`` command's help and trainers/verl_sampler.py (the lines of each ``verl.trainer.main_ppo`` command,
   and any ``data.``/``actor_rollout_ref.``/``algorithm.`` override elsewhere) is composed on its own with
   ``ppo_trainer`` (verl's config; a key verl does not have is refused, as ``main_ppo`` would refuse it), then
   each printed command is composed whole and passed through verl's ``validate_config``.
2. dataset: a store's round exported with ``coevolve-engine export --layout verl`` is loaded with verl's
   ``RLHFDataset`` and verl's own sampler (``create_rl_sampler``: uniform, the paper's method) and with the
   dataset class the weighted command names (``data.custom_cls``), whose draws must follow the rows' weights;
   a batch of each goes through verl's ``collate_fn``.
3. episodes (``bench/verl_episodes.py``): 24 BFCL multi-turn tasks (20 base tasks of 2-5 user turns, 4 miss_func)
   exported, the verl command ``export`` printed composed strictly, and verl's ``AgentLoopWorker`` loading the
   export's tool and agent-loop configs plays every row (one drawn twice, ``rollout.n=2``) with
   ``coevolve_engine.trainers.verl_bfcl``'s agent loop, interaction and tools against a scripted server (token
   ids of the tiny tokenizer: the ground truth, the ground truth one call per answer, or the last turn without
   calls); every turn is played, the reward function
   (loaded by verl's ``get_custom_reward_fn``) gives the episode player's verdict on the same answers, and the
   response mask is 1 on exactly the generated tokens.
4. dump: verl's ``RayPPOTrainer._log_rollout_data`` writes the step's rollouts; ``import-rollouts`` reads them
   back with their turns, tool calls, chats and one group per draw (verl's ``uid``), and the signal views equal
   those of the episode player's rollouts of the same draws ingested as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TORCH = "torch==2.13.0"  # the CPU build the project pins (pyproject.toml)
# The dependencies verl declares that composing its config and loading its dataset import; installed at the
# versions verl's own metadata asks for.
NEEDED = ("hydra-core", "omegaconf", "transformers", "datasets", "pyarrow", "pandas", "numpy", "ray", "tensordict",
          "torchdata", "codetiming", "packaging", "dill", "peft", "accelerate")
EXTRA = ("pillow", "cachetools")  # imported by verl's dataset module and agent loop, not declared by verl
# What coevolve_engine needs there (its dependencies and the `bfcl` extra, read from pyproject.toml), and the
# bfcl-eval release the project installs without its dependencies.
BFCL_EVAL = "bfcl-eval==2026.3.23"
VERL_PREFIXES = ("data.", "actor_rollout_ref.", "algorithm.")  # sections our own run config does not have
OVERRIDE = re.compile(r"^[+~]?[A-Za-z_][\w]*(\.[\w]+)+=\S*$")
ANYWHERE = re.compile(r"(?<![\w./=-])([+~]?(?:data|actor_rollout_ref|algorithm)(?:\.\w+)+=[^\s`'\",;)]+)")


# -- the overrides our docs print ------------------------------------------------------------------------------

def doc_sources() -> dict[str, str]:
    """Each file (or help text) that prints verl overrides, by a short name."""
    from coevolve_engine.cli.export import export

    sources = {"docs/trainers.md": (REPO / "docs/trainers.md").read_text(),
               "recipes/README.md": (REPO / "recipes/README.md").read_text(),
               "trainers/verl_sampler.py": (REPO / "trainers/verl_sampler.py").read_text(),
               "coevolve-engine export --help": export.epilog or ""}
    for path in sorted((REPO / "recipes").glob("*.toml")):
        sources[f"recipes/{path.name}"] = path.read_text()
    return sources


def _clean(line: str) -> str:
    return re.sub(r"^\s*#", "", line).strip().strip("`")


def commands(text: str) -> list[dict]:
    """The overrides of each ``verl.trainer.main_ppo`` command in ``text`` (continuation lines joined), and
    whether it is a whole command or an excerpt."""
    lines = text.splitlines()
    found = []
    for index, line in enumerate(lines):
        if "verl.trainer.main_ppo" not in line:
            continue
        joined = _clean(line.split("verl.trainer.main_ppo", 1)[1])
        follow = index
        while joined.endswith("\\") and follow + 1 < len(lines):
            follow += 1
            joined = joined[:-1] + " " + _clean(lines[follow])
        overrides = [token.strip("`") for token in joined.split() if OVERRIDE.match(token.strip("`"))]
        if overrides:  # a command ending in "..." is an excerpt: composed, not validated as a whole run
            found.append({"overrides": overrides, "complete": "..." not in joined})
    return found


def loose_overrides(text: str) -> list[str]:
    """Overrides of verl-only sections named anywhere in ``text`` (prose, docstrings, help)."""
    return [match.rstrip(".") for match in ANYWHERE.findall(text)]


def collect() -> dict:
    per_source, blocks = {}, []
    for name, text in doc_sources().items():
        found = commands(text)
        blocks += [{"source": name, **block} for block in found]
        singles = sorted({o for block in found for o in block["overrides"]} | set(loose_overrides(text)))
        if singles:
            per_source[name] = singles
    return {"per_source": per_source, "commands": blocks}


# -- the sample store and its export ----------------------------------------------------------------------------

def sample_exports(folder: Path) -> dict:
    """A store with 6 BFCL training tasks, rollouts that make the coevolve weights differ, and round 0
    exported twice for verl: uniform (the paper) and weighted; plus a tiny tokenizer."""
    import runpy

    from click.testing import CliRunner

    from coevolve_engine.cli import cli
    from coevolve_engine.curriculum import compute_weights
    from coevolve_engine.core.signal_params import SignalParams
    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers.export import export_round

    db = folder / "check.duckdb"
    result = CliRunner().invoke(cli, ["tasks", "import", "bfcl", "--category", "multi_turn_base", "--split",
                                      "train", "--limit", "6", "--db", str(db), "--create"])
    if result.exit_code != 0:
        raise SystemExit(f"could not import BFCL tasks: {result.output}")
    with Store(db) as store:
        tasks = [t for (t,) in store.execute("SELECT task_id FROM tasks ORDER BY task_id").fetchall()]
        # the first two tasks get mixed groups (boundary), the rest are not attempted: their weights differ
        records = [{"task_id": task, "step": 1, "reward": reward} for task in tasks[:2] for reward in (1.0, 0.0)]
        store.add_records("trajectories", records)
        compute_weights(store, 0, "coevolve", SignalParams(forgetting_form="trajectory"))
        uniform = export_round(store, 0, "verl", folder / "uniform", uniform=True)
        weighted = export_round(store, 0, "verl", folder / "weighted")
    tokenizer = runpy.run_path(str(REPO / "recipes" / "build_tiny_policy.py"))["build"](folder / "policy")
    return {"uniform": str(uniform.data_file), "weighted": str(weighted.data_file), "tokenizer": str(tokenizer),
            "policy": str(tokenizer)}


# -- the virtual environment with verl ---------------------------------------------------------------------------

def pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *args], check=True)


def install(venv: Path, version: str) -> None:
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    constraints = venv / "constraints.txt"
    constraints.write_text(TORCH + "\n")
    pip(venv, TORCH)
    pip(venv, "--no-deps", f"verl=={version}")
    declared = subprocess.run([str(venv / "bin" / "python"), "-c", "import importlib.metadata as m, json; "
                               "print(json.dumps(m.requires('verl') or []))"], check=True, capture_output=True,
                              text=True).stdout
    wanted = []
    for requirement in json.loads(declared):
        if ";" in requirement:  # optional extras and platform-specific ones
            continue
        name = re.split(r"[<>=!~\[ ]", requirement, maxsplit=1)[0].lower()
        if name in NEEDED:
            wanted.append(re.sub(r"\[[^\]]*\]", "", requirement))  # ray[default] -> ray: no dashboard needed
    pip(venv, "-c", str(constraints), *wanted, *EXTRA, *project_requirements())
    pip(venv, "--no-deps", BFCL_EVAL)


def project_requirements() -> list[str]:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["bfcl"]]


def install_checkout(venv: Path) -> None:
    """This checkout, without its dependencies, so that pkg://coevolve_engine... resolves in verl."""
    pip(venv, "--no-deps", "--force-reinstall", str(REPO))


# -- the verl side (runs inside --venv) --------------------------------------------------------------------------

def child(spec_path: str) -> int:
    import contextlib
    import io
    import logging

    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    spec = json.loads(Path(spec_path).read_text())
    failures = 0
    logging.disable(logging.WARNING)  # verl's notes about the missing GPU

    def report(ok: bool, text: str) -> None:
        nonlocal failures
        failures += not ok
        print(f"  {'accepted' if ok else 'REFUSED '}  {text}", flush=True)

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    import hydra
    import torch
    import transformers

    print(f"verl {verl.__version__} (hydra-core {hydra.__version__}, torch {torch.__version__}, transformers "
          f"{transformers.__version__}), no GPU")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        def composed(overrides: list[str]):
            return compose(config_name="ppo_trainer", overrides=overrides)

        print("\n1. each override, composed on its own with verl's ppo_trainer config (strict):")
        control = "data.sampler.class_path"  # older verl's sampler hook, not in 0.9.1
        try:
            composed([f"{control}=pkg://coevolve_engine.trainers.verl_sampler"])
            report(False, f"strictness control: {control} was accepted, so an unknown key would pass unnoticed")
        except Exception as exc:
            print(f" strictness control: a key this verl lacks, {control}, is refused: {str(exc).splitlines()[0]}")
        for source, overrides in spec["overrides"]["per_source"].items():
            print(f" {source}:")
            for override in overrides:
                try:
                    composed([override])
                    report(True, override)
                except Exception as exc:  # Hydra's ConfigCompositionException and OmegaConf's errors
                    report(False, f"{override}: {str(exc).splitlines()[0]}")
        print("\n   each printed command, composed whole (and a whole command checked by verl's validate_config):")
        from verl.trainer.main_ppo import validate_config
        from verl.trainer.ppo.utils import need_critic, need_reference_policy

        for block in spec["overrides"]["commands"]:
            kind = "and verl's validate_config" if block["complete"] else "an excerpt (ends in ...), composed only"
            label = f"{block['source']}: main_ppo with {len(block['overrides'])} overrides, {kind}"
            try:
                config = composed(block["overrides"])
                if block["complete"]:
                    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        validate_config(config=config, use_reference_policy=need_reference_policy(config),
                                        use_critic=need_critic(config))
                report(True, label)
            except Exception as exc:
                report(False, f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0]}")

        print("\n2. our exported Parquet in verl's dataset classes:")
        from torch.utils.data import DataLoader
        from transformers import AutoTokenizer

        from verl.trainer.ppo.utils import create_rl_sampler
        from verl.utils.dataset.rl_dataset import collate_fn, get_dataset_class

        tokenizer = AutoTokenizer.from_pretrained(spec["exports"]["tokenizer"])
        routes = {"uniform": spec["uniform_overrides"], "weighted": spec["weighted_overrides"]}
        for route, overrides in routes.items():
            parquet = spec["exports"][route]
            try:
                config = composed(overrides)
                with open_dict(config):
                    config.data.train_files = parquet
                    config.data.dataloader_num_workers = 0
                with contextlib.redirect_stdout(io.StringIO()):
                    cls = get_dataset_class(config.data)
                    dataset = cls(data_files=[parquet], tokenizer=tokenizer, config=config.data, processor=None)
                sampler = create_rl_sampler(config.data, dataset)
                order = list(iter(sampler))
                batch = next(iter(DataLoader(dataset, batch_size=4, sampler=sampler, collate_fn=collate_fn)))
                rows = dataset.dataframe
                weights = [row["weight"] for row in rows["extra_info"]]
                tasks = [row["task_id"] for row in rows["extra_info"]]
                ok = "raw_prompt" in batch and len(batch["raw_prompt"]) == 4
                if route == "uniform":
                    ok = ok and cls.__name__ == "RLHFDataset" and sorted(order) == list(range(len(rows)))
                    detail = (f"{cls.__name__}, {len(dataset)} rows, verl's {type(sampler).__name__} "
                              f"(data.shuffle={config.data.shuffle}) visits each row once per epoch")
                else:
                    draws = list(dataset.draws)
                    counts = [draws.count(i) for i in range(len(rows))]
                    total = sum(weights)
                    expected = [len(draws) * w / total for w in weights]
                    # within 5 standard deviations of a binomial draw, for every row
                    close = all(abs(c - e) <= 5 * (e * (1 - e / len(draws))) ** 0.5 + 1
                                for c, e in zip(counts, expected))
                    ok = ok and cls.__name__ == "WeightedRLHFDataset" and len(dataset) == len(draws) and close
                    detail = (f"{cls.__name__}, {len(rows)} rows served as {len(dataset)} weighted draws; "
                              f"weights {[round(w, 3) for w in weights]} -> draws {counts} "
                              f"(expected {[round(e, 1) for e in expected]}); verl's {type(sampler).__name__}")
                detail += f"; a batch of {len(batch['raw_prompt'])} through collate_fn, first task {tasks[0]}"
                report(ok, f"{route}: {detail}")
            except Exception as exc:
                report(False, f"{route}: {type(exc).__name__}: {str(exc).splitlines()[0]}")

        try:
            episodes().child_check(spec, composed, report)
        except Exception as exc:  # noqa: BLE001 - reported as a failed item, with where it failed
            import traceback

            report(False, f"episodes: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}")
    Path(spec_path).with_name("child.json").write_text(json.dumps({"failures": failures,
                                                                  "verl": verl.__version__}))
    return 1 if failures else 0


def episodes():
    """bench/verl_episodes.py, beside this script."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import verl_episodes

    return verl_episodes


# -- the parent ---------------------------------------------------------------------------------------------------

def route_overrides(blocks: list[dict], weighted: bool) -> list[str]:
    """The overrides of docs/trainers.md's uniform (paper) or weighted verl command."""
    for block in blocks:
        if (block["source"] == "docs/trainers.md" and block["complete"]
                and weighted == any("custom_cls" in o for o in block["overrides"])):
            return block["overrides"]
    raise SystemExit(f"docs/trainers.md prints no {'weighted' if weighted else 'uniform'} verl command")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, required=True, help="The virtual environment with verl (outside the "
                                                                  "repository, e.g. /tmp/verl-venv).")
    parser.add_argument("--install", action="store_true", help="Create the venv or complete it first.")
    parser.add_argument("--verl-version", default="0.9.1", help="The verl release --install installs.")
    parser.add_argument("--smoke", action="store_true", help="Accepted as every bench script accepts it: the check "
                                                                  "has one size, already a small one.")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.child:
        return child(args.child)
    venv = args.venv.resolve()
    if REPO in venv.parents:
        raise SystemExit(f"--venv {venv} is inside the repository; put it outside (e.g. /tmp/verl-venv)")
    if args.install:
        install(venv, args.verl_version)
    if not (venv / "bin" / "python").exists():
        raise SystemExit(f"{venv} has no Python; create it with --install")
    install_checkout(venv)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # the tiny tokenizer's save
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    overrides = collect()
    with tempfile.TemporaryDirectory(prefix="verl-check-") as folder:
        spec = {"overrides": overrides, "exports": sample_exports(Path(folder)),
                "uniform_overrides": route_overrides(overrides["commands"], weighted=False),
                "weighted_overrides": route_overrides(overrides["commands"], weighted=True),
                "episodes": None}
        spec["episodes"] = episodes().build(Path(folder), spec["exports"]["tokenizer"])
        spec_path = Path(folder) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONWARNINGS": "ignore", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
               "TRANSFORMERS_VERBOSITY": "error"}
        subprocess.run([str(venv / "bin" / "python"), str(Path(__file__).resolve()), "--venv", str(venv),
                        "--child", str(spec_path)], env=env, cwd=folder)
        child_file = Path(folder) / "child.json"
        if not child_file.exists():
            print("\nthe verl side stopped before its end")
            return 1
        verl_side = json.loads(child_file.read_text())
        failures = verl_side["failures"]

        def report(ok: bool, text: str) -> None:
            nonlocal failures
            failures += not ok
            print(f"  {'accepted' if ok else 'REFUSED '}  {text}", flush=True)

        if Path(spec["episodes"]["dump"]).is_dir():
            episodes().import_back(spec, report)
        else:
            report(False, "verl wrote no dump to import")
    outcome = "all checks passed" if not failures else f"{failures} check(s) failed"
    print(f"\n{outcome} against verl {verl_side['verl']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
