"""A trainer from another package: examples/frozen-trainer, pip-installed, found through its entry point
(coevolve_engine.trainers) by the registry that holds trl-grpo, and driven by `coevolve-engine run` for two rounds
on calc with no change to the engine: it draws its groups through the run's BatchSource (the weights each round
stored), plays them with the policy and reports them to the run's TrajectorySink.

The package is installed with pip into a folder of the test's own (``--target``), so the test's environment is
left as it was, and the run is a subprocess with that folder on PYTHONPATH, as a user's shell runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coevolve_engine import WeightedGroupSampler
from coevolve_engine.core.store import Store
from coevolve_engine.core.weights import load_weights

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "frozen-trainer"
K, GROUPS, STEPS = 2, 3, 2  # rollouts per group, groups per step, steps per round
CONFIG = """\
env = "calc"
rounds = 2

[trainer]
name = "frozen"
model = "{policy}"
steps_per_round = {steps}
optimization = "round"

[trainer.options]
group_size = {k}
groups_per_step = {groups}

[synthesis]
synthesizer = "none"

[eval]
every = 0

[episode]
max_new_tokens = 16
max_model_calls_per_turn = 2
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """PYTHONPATH holding the installed example package (its dist-info with the entry point)."""
    folder = tmp_path_factory.mktemp("trainer-plugin")
    source = shutil.copytree(EXAMPLE, folder / "frozen-trainer")  # pip builds in the tree: a copy, not the repo's
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(folder / "site"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (entry_points,) = (folder / "site").glob("coevolve_frozen_trainer-*.dist-info/entry_points.txt")
    assert "[coevolve_engine.trainers]" in entry_points.read_text()
    return str(folder / "site")


def engine(site, *args, check=True):
    env = {**os.environ, "PYTHONPATH": site, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "coevolve_engine.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600)
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout
    return done


def test_run_drives_a_trainer_from_another_package(installed, tmp_path):
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3

    tasks = list(load_environment("calc").load_tasks(n=6))
    corpus = [t["prompt"] for t in tasks] * 4 + ['<tool_call>\n{"name": "add", "arguments": {"n": 1}}\n</tool_call>']
    policy = build_tiny_qwen3(tmp_path / "policy", corpus, hidden_size=32, vocab_size=300, digits=True)
    db = str(tmp_path / "store.duckdb")
    engine(installed, "tasks", "import", "calc", "--limit", "6", "--create", "--db", db)
    config = tmp_path / "run.toml"
    config.write_text(CONFIG.format(policy=policy, steps=STEPS, k=K, groups=GROUPS))
    out = engine(installed, "run", "--config", str(config), "--db", db, "--log", str(tmp_path / "run.log"))
    assert "2 of 2 rounds finished" in out, out
    log = (tmp_path / "run.log").read_text()   # the trainer's progress lines go to the run's log
    assert all(f"step {step}: {GROUPS} groups" in log for step in (1, 2, 3, 4)), log[-3000:]

    with Store(db, read_only=True) as store:
        rows = store.execute("SELECT step, group_id, task_id, policy FROM trajectories ORDER BY step, group_id, "
                             "trajectory_id").fetchall()
        rounds = store.execute("SELECT round, policy, checkpoint, first_step FROM rounds ORDER BY round").fetchall()
        weights = [load_weights(store, r).by_task for r in (0, 1)]
    assert len(rows) == 2 * STEPS * GROUPS * K and {step for step, *_ in rows} == {1, 2, 3, 4}
    assert {(step, policy) for step, _, _, policy in rows} == {(s, f"policy@{s - 1}") for s in (1, 2, 3, 4)}
    # each step's groups are the tasks the round's stored weights give the sampler (seed: run seed + round)
    for step in (1, 2, 3, 4):
        round_ = (step - 1) // STEPS
        drawn = WeightedGroupSampler(weights[round_], group_size=K, groups_per_step=GROUPS,
                                     seed=round_).batch_ids(step - 1)[::K]
        groups = {}
        for s, group_id, task_id, _ in rows:
            if s == step:
                groups.setdefault(group_id, []).append(task_id)
        assert sorted(groups) == sorted(f"{t}@{step}" for t in drawn)
        assert all(ids == [group_id.split("@")[0]] * K for group_id, ids in groups.items())
    # round 1 starts from the checkpoint round 0's trainer saved, and each round's checkpoint is a policy
    (_, p0, c0, f0), (_, p1, c1, f1) = rounds
    assert p0 == str(policy.resolve()) and p1 == c0 and (f0, f1) == (1, 1 + STEPS)
    assert (Path(c1) / "config.json").is_file()


def test_the_config_lists_the_plugin_s_options_and_run_refuses_one_optimization_it_cannot_carry(installed, tmp_path):
    config = tmp_path / "run.toml"
    config.write_text(CONFIG.format(policy=tmp_path, steps=STEPS, k=K, groups=GROUPS))
    printed = engine(installed, "run", "--print-config", "--config", str(config))
    options = printed[printed.index("[trainer.options]"):printed.index("[signals]")]
    assert "# frozen: K: rollouts per task drawn (a GRPO group)" in options and "trl-grpo" not in options
    db = str(tmp_path / "store.duckdb")
    engine(installed, "tasks", "import", "calc", "--limit", "2", "--create", "--db", db)
    refused = engine(installed, "run", "--config", str(config), "--db", db, "--set", 'trainer.optimization="run"',
                     check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-2000:]
    assert "trainer frozen cannot carry its optimizer" in refused.stderr + refused.stdout
    assert 'set trainer.optimization = "round"' in refused.stderr + refused.stdout


def test_an_unknown_trainer_names_the_contract_the_entry_point_group_and_the_example():
    from coevolve_engine.core.registry import RegistryError
    from coevolve_engine.trainers import TRAINERS

    with pytest.raises(RegistryError) as raised:   # the example is not installed in the test's own environment
        TRAINERS.load("frozen")
    message = str(raised.value)
    assert "unknown trainer 'frozen'" in message and "trl-grpo" in message
    assert "coevolve_engine.trainers.base.Trainer" in message
    assert "entry-point group coevolve_engine.trainers" in message
    assert "docs/trainers.md" in message and EXAMPLE.is_dir()
