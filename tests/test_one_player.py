"""One episode player everywhere: the run's eval phase, `coevolve-engine eval` and `coevolve-engine rollout` give
the same per-task verdicts on the same checkpoint and tasks, and there is one tool-call parser in the tree.

The checkpoint is a tiny Qwen3 fine-tuned on reference demonstrations of half of 24 calc tasks of one, two and
three user turns, so that it solves some tasks and fails others (a random policy fails all, which would make the
comparison empty).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from click.testing import CliRunner  # noqa: E402

from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

MAX_NEW_TOKENS = 48


@pytest.fixture(scope="module")
def calc_tasks():
    from coevolve_engine.adapters.environments.calc import CalcEnvironment

    tasks = [t for t in CalcEnvironment().load_tasks(split="full", n=60) if t["spec"]["form"] == "steps"]
    by_turns = {n: [t for t in tasks if len(t["spec"].get("turns", [0])) == n] for n in (1, 2, 3)}
    return [task for trio in zip(*by_turns.values()) for task in trio][:24]


@pytest.fixture(scope="module")
def checkpoint(calc_tasks, tmp_path_factory) -> Path:
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.adapters.environments.calc import CalcEnvironment
    from coevolve_engine.rollouts.jobs import run_rollout_job
    from coevolve_engine.trainers import BatchSource
    from coevolve_engine.trainers.sft import RFTConfig, RFTTrainer, demonstrations
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, demonstration_corpus

    environment = CalcEnvironment()
    tmp = tmp_path_factory.mktemp("one-player")
    db = tmp / "demos.duckdb"
    with Store(db) as store:
        store.add_records("tasks", calc_tasks[:12])  # demonstrations of half the tasks: it fails most others
    run_rollout_job(db, environment, "calc", ReferenceAgent(parallel=True), group_size=1, step=0, concurrency=1)
    rows = demonstrations(db, environment)
    policy = build_tiny_qwen3(tmp / "policy", demonstration_corpus(rows, vocab_size=512), hidden_size=48,
                              vocab_size=512, digits=True)
    config = RFTConfig(model=str(policy), output_dir=str(tmp / "sft"), steps=200, batch_size=4, learning_rate=5e-3)
    return RFTTrainer(config, rows, BatchSource({t["task_id"]: 1.0 for t in calc_tasks[:12]})).train().checkpoint


def test_the_eval_phase_eval_and_rollout_give_the_same_verdicts(calc_tasks, checkpoint, tmp_path):
    from coevolve_engine.adapters.environments.calc import CalcEnvironment
    from coevolve_engine.eval.checkpoint import evaluate_policy

    # the run's eval phase (loop/evaluation.py): evaluate_policy with the run's [episode] settings
    phase = {r.task_id: (r.success, r.reason) for r in evaluate_policy(
        checkpoint, CalcEnvironment(), calc_tasks, max_new_tokens=MAX_NEW_TOKENS, max_model_calls_per_turn=20,
        max_steps=30)}
    # `coevolve-engine eval`: the same tasks held out in a store of their own
    eval_db = tmp_path / "eval.duckdb"
    with Store(eval_db) as store:
        store.add_records("tasks", [{**t, "split": "eval"} for t in calc_tasks])
    result = CliRunner().invoke(cli, ["eval", "--env", "calc", "--model", str(checkpoint), "--max-tokens",
                                      str(MAX_NEW_TOKENS), "--no-progress", "--db", str(eval_db)])
    assert result.exit_code == 0, result.output
    with Store(eval_db, read_only=True) as store:
        evaluated = {t: (s, r) for t, s, r in store.execute(
            "SELECT task_id, success, reason FROM eval_results").fetchall()}
    # `coevolve-engine rollout` at temperature 0: the same tasks as training tasks
    train_db = tmp_path / "train.duckdb"
    with Store(train_db) as store:
        store.add_records("tasks", calc_tasks)
    result = CliRunner().invoke(cli, ["rollout", "--env", "calc", "--model", str(checkpoint), "--temperature", "0",
                                      "--max-tokens", str(MAX_NEW_TOKENS), "-k", "1", "--step", "0",
                                      "--no-progress", "--db", str(train_db)])
    assert result.exit_code == 0, result.output
    with Store(train_db, read_only=True) as store:
        rolled = {t: (s, r) for t, s, r in store.execute(
            "SELECT task_id, success, json_extract_string(meta, '$.reason') FROM trajectories").fetchall()}
    assert phase == evaluated == rolled
    successes = [success for success, _ in phase.values()]
    assert any(successes) and not all(successes), phase  # a comparison with both outcomes


def test_there_is_one_tool_call_parser_in_the_tree():
    """Only adapters/calls.py reads <tool_call> blocks or parses tool-call JSON out of model text."""
    root = Path(__file__).resolve().parents[1]
    readers = []
    for folder in ("engine", "adapters", "trainers"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if re.search(r"re\.compile\([^)]*<tool_call>", text) or "parse_response(" in text:
                readers.append(str(path.relative_to(root)))
    assert readers == ["adapters/calls.py"]
