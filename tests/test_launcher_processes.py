"""A round's GRPO training under `accelerate launch` with 2 CPU processes (gloo): the run's own launcher path.

Each step draws two calc tasks, one of one user turn and one of two, so the two processes play episodes of
different lengths at once (each process plays its own groups). The round must finish, and every rollout of
every process must be in the store exactly once, in whole groups. What only a GPU can show (ZeRO-3 gathering
the weights for generation) is in docs/run.md, "Several GPUs".
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from click.testing import CliRunner  # noqa: E402

from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

TASKS = {"calc/seed-0-0000": 1, "calc/seed-0-0005": 2}  # task -> user turns
K, STEPS = 2, 2
CONFIG = """\
env = "calc"
rounds = 1
[trainer]
model = "{policy}"
steps_per_round = {steps}
output_dir = "{checkpoints}"
launcher = "{accelerate} launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no --dynamo_backend no"
[trainer.options]
group_size = {k}
groups_per_step = 1
learning_rate = 1e-3
max_completion_length = 96
temperature = 1.0
[episode]
max_new_tokens = 12
max_model_calls_per_turn = 2
[synthesis]
synthesizer = "none"
[curriculum]
strategy = "uniform"
[eval]
every = 0
"""


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, qwen3_chat_template

    accelerate = Path(sys.executable).with_name("accelerate")
    if not accelerate.exists() and shutil.which("accelerate") is None:
        pytest.skip("the accelerate command is not installed beside this Python")
    folder = tmp_path_factory.mktemp("launched")
    environment = load_environment("calc")
    tasks = [t for t in environment.load_tasks(split="seed", n=20, seed=0) if t["task_id"] in TASKS]
    with Store(folder / "store.duckdb") as store:
        store.add_records("tasks", tasks)
    policy = build_tiny_qwen3(folder / "policy", [qwen3_chat_template()] + [t["prompt"] for t in tasks] * 4,
                              hidden_size=32, vocab_size=400)
    config = folder / "run.toml"
    config.write_text(CONFIG.format(policy=policy, checkpoints=folder / "checkpoints", steps=STEPS, k=K,
                                    accelerate=accelerate if accelerate.exists() else shutil.which("accelerate")))
    result = CliRunner().invoke(cli, ["run", "--config", str(config), "--db", str(folder / "store.duckdb")],
                                env={"OMP_NUM_THREADS": "1"})
    assert result.exit_code == 0, result.output
    with Store(folder / "store.duckdb", read_only=True) as store:
        rows = store.sql("SELECT task_id, step, group_id, trajectory_id, messages FROM trajectories "
                         "ORDER BY trajectory_id").to_dicts()
    return folder, rows


def test_two_processes_finish_the_round_and_every_rollout_is_stored_once(launched):
    folder, rows = launched
    assert len(rows) == STEPS * 2 * K == len({row["trajectory_id"] for row in rows})
    for step in range(1, STEPS + 1):
        groups = {row["group_id"] for row in rows if row["step"] == step}
        assert groups == {f"{task}@{step}" for task in TASKS}  # one group of each task, played on its own process
    for row in rows:
        assert row["trajectory_id"].rsplit("#", 1)[0] == row["group_id"]
    assert (folder / "checkpoints" / "round-0" / f"checkpoint-{STEPS}" / "optimizer.pt").exists()


def test_the_processes_played_episodes_of_different_lengths(launched):
    _, rows = launched
    answers = {}
    for row in rows:
        messages = json.loads(row["messages"])
        answers.setdefault(row["task_id"], set()).add(sum(m["role"] == "assistant" for m in messages))
        users = sum(m["role"] == "user" for m in messages)
        assert users <= TASKS[row["task_id"]]
    assert max(answers["calc/seed-0-0005"]) > max(answers["calc/seed-0-0000"])  # more model calls on one process
