"""The trl-grpo trainer: two real GRPO steps on CPU with a tiny Qwen3 policy on three BFCL multi_turn_base tasks.

The policy is built offline (tokenizer trained here, model from a config). A random policy never solves a BFCL
task, so every environment reward is 0 and GRPO would have nothing to learn from; the training run therefore
adds a small TRL reward function (shorter completions score higher) so the parameters move. The environment's
own score is what the store records, and a separate test replays a ground truth through the TRL-facing
environment to show that path scores 1.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("bfcl_eval")

import torch  # noqa: E402

from coevolve_engine.store import Store  # noqa: E402
from coevolve_engine.trainers import TRAINERS, BatchSource  # noqa: E402

K = 4
TASKS = ["bfcl/multi_turn_base_100", "bfcl/multi_turn_base_104", "bfcl/multi_turn_base_105"]  # TradingBot, 2 turns
WEIGHTS = {TASKS[0]: 3.0, TASKS[1]: 1.0, TASKS[2]: 0.0}


def shorter_is_better(completions, **row):
    """A TRL reward function: one float per completion, higher for shorter ones."""
    return [1.0 / (1.0 + len(json.dumps(completion))) for completion in completions]


@pytest.fixture(scope="module")
def bfcl():
    from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment

    environment = BFCLEnvironment()
    tasks = [t for t in environment.load_tasks(category="multi_turn_base") if t["task_id"] in TASKS]
    return environment, sorted(tasks, key=lambda t: t["task_id"])


@pytest.fixture(scope="module")
def trained(bfcl, tmp_path_factory):
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, qwen3_chat_template
    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig

    environment, tasks = bfcl
    tmp = tmp_path_factory.mktemp("trl-grpo")
    corpus = [qwen3_chat_template()]
    for task in tasks:
        episode = environment.start(task["task_id"], task["spec"])
        corpus += [episode.next_turn(), json.dumps(episode.tools())]
    policy = build_tiny_qwen3(tmp / "policy", corpus * 2, vocab_size=2048)
    db = tmp / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", tasks)
    config = TRLGRPOConfig(
        model=str(policy), output_dir=str(tmp / "out"), num_generations=K, groups_per_step=2, learning_rate=1e-3,
        beta=0.0, max_completion_length=32, max_tool_calling_iterations=3, policy_name="tiny",
    )
    trainer = TRAINERS.load("trl-grpo").from_store(db, config, environment, BatchSource(WEIGHTS, seed=0),
                                                   reward_funcs=[shorter_is_better])
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    report = trainer.train(2)
    with Store(db, read_only=True) as store:
        rows = store.sql("SELECT * FROM trajectories ORDER BY step, group_id, trajectory_id").to_dicts()
    return trainer, before, report, rows, db


def test_two_grpo_steps_change_the_parameters(trained):
    trainer, before, report, _, _ = trained
    changed = [name for name, p in trainer.model.named_parameters() if not torch.equal(p.detach(), before[name])]
    assert changed, "no parameter moved after two GRPO steps"
    assert report.steps == 2 and report.first_step == 1
    assert (report.checkpoint / "config.json").exists()


def test_metrics_stay_in_the_log_history_and_are_not_printed(trained):
    from transformers import PrinterCallback

    trainer = trained[0]
    assert [entry["step"] for entry in trainer._grpo.state.log_history if "loss" in entry] == [1, 2]
    assert not any(isinstance(cb, PrinterCallback) for cb in trainer._grpo.callback_handler.callbacks)


def test_every_rollout_is_in_the_store_in_intact_groups(trained):
    _, _, report, rows, _ = trained
    assert report.groups == 4 and report.rollouts == 4 * K == len(rows)
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["group_id"], []).append(row)
    assert sorted({row["step"] for row in rows}) == [1, 2]
    for group_id, members in groups.items():
        task_id, step = members[0]["task_id"], members[0]["step"]
        assert group_id == f"{task_id}@{step}"
        assert {m["task_id"] for m in members} == {task_id} and {m["step"] for m in members} == {step}
        assert sorted(m["trajectory_id"] for m in members) == [f"{group_id}#{k}" for k in range(K)]
    for row in rows:
        assert row["reward"] == 0.0 and row["success"] is False  # the environment's score, not the shaping reward
        assert row["policy"] == f"tiny@{row['step'] - 1}"
        messages = json.loads(row["messages"])
        assert messages[0]["role"] == "user" and messages[1]["role"] == "assistant"
        assert "first of 2 turns played" in json.loads(row["meta"])["reason"]


def test_a_task_with_weight_zero_is_never_drawn(trained):
    _, _, _, rows, _ = trained
    assert TASKS[2] not in {row["task_id"] for row in rows}


def test_next_round_draws_from_refreshed_weights_and_continues_the_steps(trained):
    trainer, _, _, _, db = trained
    trainer.source.refresh({TASKS[0]: 0.0, TASKS[1]: 0.0, TASKS[2]: 1.0})
    report = trainer.train(1)
    assert (report.steps, report.first_step, report.groups, report.rollouts) == (1, 3, 2, 2 * K)
    with Store(db, read_only=True) as store:
        rows = store.sql("SELECT task_id, group_id FROM trajectories WHERE step = 3").to_dicts()
    # one positive-weight task, two groups per step: drawn with replacement, two intact groups of it
    assert {row["task_id"] for row in rows} == {TASKS[2]}
    assert sorted({row["group_id"] for row in rows}) == [f"{TASKS[2]}@3", f"{TASKS[2]}@3~2"]
    assert len(rows) == 2 * K


def test_sampler_follows_the_weights_keeps_groups_and_takes_new_weights():
    from coevolve_engine.trainers.trl_grpo.sampler import WeightedRepeatSampler

    source = BatchSource({"a": 3.0, "b": 1.0, "c": 0.0, "d": 0.0}, seed=1)
    sampler = WeightedRepeatSampler(list(range(4)), ["a", "b", "c", "d"], source, mini_repeat_count=K, batch_size=1)
    draws = [sampler.draw()[0] for _ in range(2000)]
    assert set(draws) == {0, 1}
    assert 0.71 < draws.count(0) / len(draws) < 0.79  # 3 / (3 + 1)
    indices = list(sampler)
    assert len(indices) == len(sampler) and all(len(set(indices[i:i + K])) == 1 for i in range(0, len(indices), K))
    source.refresh({"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0})
    assert {sampler.draw()[0] for _ in range(200)} == {2, 3}
    two = WeightedRepeatSampler(list(range(4)), ["a", "b", "c", "d"], source, mini_repeat_count=K, batch_size=2)
    assert all(sorted(two.draw()) == [2, 3] for _ in range(50))  # without replacement: one group per task per step


def test_batch_source_refuses_bad_weights():
    with pytest.raises(ValueError, match="finite numbers >= 0"):
        BatchSource({"a": -1.0})
    with pytest.raises(ValueError, match="positive weight"):
        BatchSource({"a": 0.0})
    source = BatchSource({"a": 1.0})
    source.refresh({"b": 2.0})
    assert source.weights() == {"b": 2.0} and source.round == 1


def test_trl_environment_runs_tools_in_the_episode_and_scores_it(bfcl):
    """The class TRL instantiates: its methods are the task's tools, with schemas transformers accepts, and a
    replay of the first turn's ground truth through them earns reward 1."""
    from transformers.utils import get_json_schema

    from coevolve_engine.trainers.trl_grpo.tool_environment import environment_classes

    environment, tasks = bfcl
    classes, tool_sets = environment_classes(environment, tasks)
    assert len(classes) == 1 and set(tool_sets) == set(TASKS)
    task = tasks[0]
    instance = classes[tool_sets[task["task_id"]]]()
    tools = {t["function"]["name"]: t["function"] for t in _first_turn_tools(environment, task)}
    for name, function in tools.items():
        schema = get_json_schema(getattr(instance, name))["function"]
        assert schema["name"] == name
        assert set(schema["parameters"]["properties"]) == set(function["parameters"]["properties"])
    instance.reset(prompt=[], task_id=task["task_id"], spec=json.dumps(task["spec"]))
    for call in environment.reference_solution(task["spec"])[0]:
        getattr(instance, call.name)(**call.arguments)
    assert instance.get_reward() == 1.0
    rollout = instance._rollout([{"role": "user", "content": "x"}], "tiny@0", 0)
    assert rollout.success and rollout.actions and rollout.task_id == task["task_id"]
    instance.reset(prompt=[], task_id=task["task_id"], spec=json.dumps(task["spec"]))
    assert instance.get_reward() == 0.0  # a fresh episode: no calls, the turn fails


def test_trl_parses_a_tool_call_and_runs_it_in_the_task_episode(trained, bfcl):
    """TRL's own response parser and tool table, on the trainer's tokenizer: the call reaches our episode."""
    from trl.chat_template_utils import parse_response

    trainer = trained[0]
    grpo = trainer._grpo
    (name, tools), = grpo._env_tools.items()
    tokenizer = grpo.processing_class
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=tools,
                                           add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    text = '<tool_call>\n{"name": "get_symbol_by_name", "arguments": {"name": "Quasar Ltd."}}\n</tool_call><|im_end|>'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    reply = parse_response(tokenizer, ids, prefix=prompt, tools=tools)
    (call,) = reply["tool_calls"]
    task = bfcl[1][0]
    grpo._environment_pool[name][0].reset(prompt=[], task_id=task["task_id"], spec=json.dumps(task["spec"]))
    result = {tool.__name__: tool for tool in tools}[call["function"]["name"]](**call["function"]["arguments"])
    assert json.loads(result) == {"symbol": "QUAS"}


def test_from_store_refuses_weights_on_tasks_it_does_not_hold(bfcl, tmp_path):
    from coevolve_engine.errors import CoevolveError
    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig, TRLGRPOTrainer

    environment, tasks = bfcl
    db = tmp_path / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", tasks[:1])
    config = TRLGRPOConfig(model=str(tmp_path), output_dir=str(tmp_path / "out"))
    with pytest.raises(CoevolveError, match="not bfcl tasks"):
        TRLGRPOTrainer.from_store(db, config, environment, BatchSource({TASKS[0]: 1.0, "bfcl/nope": 1.0}))


def test_config_explains_bad_settings():
    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig

    with pytest.raises(ValueError, match="num_generations must be >= 2"):
        TRLGRPOConfig(model="m", output_dir="o", num_generations=1)
    with pytest.raises(ValueError, match="through TRLGRPOConfig's own fields"):
        TRLGRPOConfig(model="m", output_dir="o", trl_args={"max_steps": 3})


def test_registry_lists_trl_grpo():
    assert "trl-grpo" in TRAINERS.names()
    assert TRAINERS.load("trl-grpo").__name__ == "TRLGRPOTrainer"


def _first_turn_tools(environment, task):
    episode = environment.start(task["task_id"], task["spec"])
    episode.next_turn()
    return episode.tools()


def test_batch_source_reads_a_rounds_stored_weights(tmp_path):
    from coevolve_engine.curriculum import compute_weights
    from coevolve_engine.store import Store
    from coevolve_engine.trainers import BatchSource

    db = tmp_path / "weights.duckdb"
    with Store(db) as store:
        store.add_records("tasks", [{"task_id": "a"}, {"task_id": "b"}], label="tasks")
        store.add_records("trajectories", [{"task_id": "a", "step": 0, "reward": 1.0},
                                           {"task_id": "a", "step": 0, "reward": 1.0}], label="rollouts")
        compute_weights(store, 0, "dapo-filter")
    source = BatchSource.from_store(db, seed=3)
    # dapo-filter leaves out a task whose last group was all success; b was never attempted and stays
    assert source.weights() == {"a": 0.0, "b": 1.0} and source.round == 0 and source.seed == 3
