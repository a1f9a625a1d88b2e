"""`coevolve-engine demo --quick`: the whole loop offline on calc with a tiny policy, checked in the store."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("trl")

from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    result = CliRunner().invoke(cli, ["demo", "--quick", "--dir", str(folder)])
    assert result.exit_code == 0, result.output
    return folder, result.output


def rows(folder, sql):
    with Store(folder / "demo.duckdb", read_only=True) as store:
        return store.execute(sql).fetchall()


def test_two_rounds_finish_and_the_table_is_printed(demo):
    folder, output = demo
    assert rows(folder, "SELECT round, status FROM rounds ORDER BY round") == [(0, "finished"), (1, "finished")]
    assert "Round by round" in output and f"coevolve-engine drift --db {folder / 'demo.duckdb'}" in output
    assert "Loop cost: feedback " in output and "+12.76% on BFCL" in output  # the loop's cost, next to the paper's
    assert "Held-out success against training step" in output and "step    0  start" in output  # the curve
    assert (folder / "run.toml").exists() and (folder / "policy" / "model.safetensors").exists()


def test_held_out_tasks_are_evaluated_every_round_and_never_trained_on(demo):
    folder, _ = demo
    evaluations = rows(folder, "SELECT label, tasks FROM evaluations ORDER BY created_at")
    assert evaluations == [("start", 20), ("round 0", 20), ("round 1", 20)]
    (held_out,), = rows(folder, "SELECT count(*) FROM tasks WHERE split = 'eval'")
    assert held_out == 20
    (leaked,), = rows(folder, "SELECT count(*) FROM trajectories JOIN tasks USING (task_id) WHERE split = 'eval'")
    (weighed,), = rows(folder, "SELECT count(*) FROM task_weights JOIN tasks USING (task_id) WHERE split = 'eval'")
    assert (leaked, weighed) == (0, 0)


def test_what_the_demo_prints_is_a_row_of_run_rounds(demo):
    folder, output = demo
    for round_, eval_success, accepted, candidates in rows(
            folder, "SELECT round, eval_success, accepted, candidates FROM run_rounds ORDER BY round"):
        (stored,), = rows(folder, f"SELECT success_rate FROM evaluations WHERE label = 'round {round_}'")
        assert eval_success == stored
        assert f"| {round_}     | finished |" in output and f"| {accepted}/{candidates}" in output


def test_synthesized_tasks_join_the_training_set_and_round_1_draws_them(demo):
    from coevolve_engine.curriculum import WeightedGroupSampler, load_weights

    folder, _ = demo
    (accepted,), = rows(folder, "SELECT count(*) FROM candidates WHERE round = 0 AND verdict = 'accepted'")
    assert accepted > 0
    synthesized = {task_id for (task_id,) in rows(folder, "SELECT task_id FROM tasks WHERE source = 'synthesized' "
                                                          "AND task_id IN (SELECT task_id FROM candidates "
                                                          "WHERE round = 0)")}
    with Store(folder / "demo.duckdb", read_only=True) as store:
        weights = load_weights(store, 1)
    weight = dict(zip(weights.task_ids.tolist(), weights.weights.tolist()))
    assert synthesized and all(weight.get(task_id, 0) > 0 for task_id in synthesized)
    # round 1's 4 groups are one seeded draw, which may miss them (their share is about half); the sampler that
    # made it draws them within a few more steps, and every task round 1 trained on is one it weighs
    sampler = WeightedGroupSampler(weights.weights, group_size=1, groups_per_step=2, seed=1)
    drawn = {weights.task_ids[i] for step in range(20) for i in sampler.batch(step)}
    assert drawn & synthesized
    trained = {task_id for (task_id,) in rows(folder, "SELECT DISTINCT task_id FROM trajectories "
                                                      "WHERE step BETWEEN 3 AND 4")}
    assert trained and all(weight.get(task_id, 0) > 0 for task_id in trained)


def test_the_demonstrations_warm_up_the_policy_but_flag_nothing(demo):
    folder, _ = demo
    (demonstrations,), = rows(folder, "SELECT count(*) FROM trajectories WHERE policy = 'reference'")
    assert demonstrations == 24  # one reference rollout per seed task, at step 0
    (scored,), = rows(folder, "SELECT count(*) FROM scored_trajectories WHERE policy = 'reference'")
    assert scored == 0  # else every seed task the policy then fails would be flagged 'forgetting'


def test_every_task_takes_the_held_out_form(demo):
    folder, _ = demo
    forms = rows(folder, "SELECT DISTINCT json_extract_string(spec, '$.form') FROM tasks")
    (synthesized,), = rows(folder, "SELECT count(*) FROM tasks WHERE source = 'synthesized'")
    assert forms == [("steps",)] and synthesized > 0


def test_running_it_again_resumes_and_finds_nothing_to_do(demo):
    folder, _ = demo
    before = rows(folder, "SELECT count(*) FROM trajectories")
    result = CliRunner().invoke(cli, ["demo", "--quick", "--dir", str(folder)])
    assert result.exit_code == 0, result.output
    assert "nothing to do" in result.output
    assert rows(folder, "SELECT count(*) FROM trajectories") == before


def _outcomes(folder):
    """What a demo computed, without times, ids of processes or the folder's path."""
    return {
        "tasks": rows(folder, "SELECT task_id, split, source FROM tasks ORDER BY ALL"),
        "trajectories": rows(folder, "SELECT task_id, step, group_id, reward, success, action_pattern "
                                     "FROM trajectories ORDER BY ALL"),
        "candidates": rows(folder, "SELECT round, candidate_id, verdict, reason FROM candidates ORDER BY ALL"),
        "evaluations": rows(folder, "SELECT label, tasks, success_rate FROM evaluations ORDER BY ALL"),
        "rounds": rows(folder, "SELECT round, status, first_step FROM rounds ORDER BY ALL"),
        "lease": rows(folder, "SELECT count(*) FROM store_lease"),
    }


def test_two_demos_on_one_folder_one_refuses_and_the_other_equals_a_solo_run(demo, tmp_path):
    import subprocess
    import sys

    folder = tmp_path / "shared"
    command = [sys.executable, "-m", "coevolve_engine.cli", "demo", "--quick", "--dir", str(folder)]
    first, second = (subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                     for _ in range(2))
    outputs = {process.pid: process.communicate(timeout=900)[0] for process in (first, second)}
    codes = {process.pid: process.returncode for process in (first, second)}
    assert sorted(codes.values()) == [0, 1], outputs
    winner = next(pid for pid, code in codes.items() if code == 0)
    loser = next(pid for pid, code in codes.items() if code == 1)
    assert f"is in use by `demo` (pid {winner} on" in outputs[loser], outputs[loser]
    assert len(outputs[loser].strip().splitlines()) == 1  # refused before it built or printed anything
    solo, _ = demo
    assert _outcomes(folder) == _outcomes(solo)


def test_the_held_out_curve_is_one_bar_per_evaluation():
    from coevolve_engine.loop.demo import curve_lines

    text = curve_lines([("start", 0, 61, 157), ("round 0", 25, 62, 157), ("round 1", 50, 58, 157)], width=10)
    assert text.splitlines() == [
        "held-out success, bar from 0 to 40%",
        "step    0  start      38.9% (61/157)  ##########|",
        "step   25  round 0    39.5% (62/157)  ##########|   +0.6",
        "step   50  round 1    36.9% (58/157)  ######### |   -1.9",
    ]
    assert curve_lines([]) == "(no held-out evaluation yet)"


def test_a_demo_killed_while_it_prepares_finishes_preparing_when_run_again(tmp_path, monkeypatch):
    """The demonstrations are written one task at a time and the policy is saved in several files: a demo
    killed in the middle of either, run again, has every demonstration and a whole policy, as an uninterrupted
    one does (the policy's tokenizer and warm-up are built from the demonstrations)."""
    from coevolve_engine.loop import demo as demo_module
    from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.rollouts.jobs import run_rollout_job

    folder = tmp_path / "demo"
    folder.mkdir()
    environment = load_environment("calc")
    size = demo_module.QUICK
    training = demo_module.seed_tasks(environment, size.seed_tasks) + demo_module.frontier_tasks(
        environment, size.frontier_tasks)
    with Store(folder / demo_module.STORE_NAME) as store:
        store.add_records("tasks", training)
    # killed after 5 demonstrations: the first 5 tasks' groups are stored
    run_rollout_job(folder / demo_module.STORE_NAME, environment, "calc", ReferenceAgent(parallel=True),
                    group_size=1, step=0, concurrency=1, task_ids=[t["task_id"] for t in training[:5]])
    real_build = demo_module.build_tiny_qwen3

    def killed_after_the_model(path, *args, **kwargs):  # the model saved, then killed before the tokenizer
        from transformers import Qwen3Config, Qwen3ForCausalLM

        path.mkdir(parents=True, exist_ok=True)
        Qwen3ForCausalLM(Qwen3Config(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     num_key_value_heads=1, head_dim=8, vocab_size=64)).save_pretrained(path)
        raise KeyboardInterrupt

    monkeypatch.setattr(demo_module, "build_tiny_qwen3", killed_after_the_model)
    with pytest.raises(KeyboardInterrupt):
        demo_module.prepare(folder, size, echo=lambda line: None)
    monkeypatch.setattr(demo_module, "build_tiny_qwen3", real_build)
    lines = []
    demo_module.prepare(folder, size, echo=lines.append)
    (demonstrated,), = rows(folder, "SELECT count(DISTINCT task_id) FROM trajectories WHERE step = 0")
    assert demonstrated == len(training)
    assert (folder / "policy" / "tokenizer.json").exists() and (folder / "policy" / "model.safetensors").exists()
    assert any(line.startswith("policy ") for line in lines)
    # a task a round synthesized is not demonstrated when the demo is run again
    (synthesized,) = [dict(task, task_id="calc-syn/0001", source="synthesized")
                      for task in environment.load_tasks(split="full", n=1, seed=1)]
    with Store(folder / demo_module.STORE_NAME) as store:
        store.add_records("tasks", [synthesized])
    demo_module.prepare(folder, size, echo=lines.append)
    assert rows(folder, "SELECT count(*) FROM trajectories WHERE task_id = 'calc-syn/0001'") == [(0,)]
    assert rows(folder, "SELECT count(*) FROM trajectories") == [(len(training),)]
