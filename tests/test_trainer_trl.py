"""The trl-grpo trainer: real GRPO steps on CPU with a tiny Qwen3 policy on whole BFCL multi_turn_base episodes,
and on a crafted 3-turn task whose token ids and loss mask are checked one by one.

The policy is built offline (tokenizer trained here, model from a config). A random policy never solves a BFCL
task, so every environment reward is 0 and GRPO would have nothing to learn from; the training run therefore
adds a small TRL reward function (shorter completions score higher) so the parameters move. The environment's
own score is what the store records.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("bfcl_eval")

import torch  # noqa: E402

from coevolve_engine.core.store import Store  # noqa: E402
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
        model=str(policy), output_dir=str(tmp / "out"), group_size=K, groups_per_step=2, learning_rate=1e-3,
        beta=0.0, max_completion_length=512, max_new_tokens=16, max_model_calls_per_turn=2, policy_name="tiny",
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
        messages, meta = json.loads(row["messages"]), json.loads(row["meta"])
        assert messages[0]["role"] == "user" and messages[1]["role"] == "assistant"
        if meta["stop"] == "done":  # the whole episode was played: both of the task's user turns
            assert sum(m["role"] == "user" for m in messages) == meta["turns"] == 2
        assert meta["failed_turn"] in (1, 2)
    assert any(json.loads(row["meta"])["stop"] == "done" for row in rows)


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


def grpo_sampler(source: BatchSource, groups: int, first_draw: int = 0):
    """The sampler trl-grpo's GRPOTrainer builds for a train() call, from the settings TRL hands it."""
    from types import SimpleNamespace

    from datasets import Dataset

    from coevolve_engine.trainers.trl_grpo.grpo import CoevolveGRPOTrainer

    grpo = SimpleNamespace(train_dataset=Dataset.from_list([{"task_id": task} for task in "abcd"]), num_iterations=1,
                           num_generations=K, args=SimpleNamespace(generation_batch_size=groups * K,
                                                                   steps_per_generation=1),
                           source=source, first_draw=first_draw)
    return CoevolveGRPOTrainer._get_train_sampler(grpo)


def test_sampler_follows_the_weights_keeps_groups_and_takes_new_weights():
    source = BatchSource({"a": 3.0, "b": 1.0, "c": 0.0, "d": 0.0}, seed=1)
    sampler = grpo_sampler(source, groups=1)
    draws = [sampler.tasks(step)[0] for step in range(2000)]
    assert set(draws) == {0, 1}
    assert 0.71 < draws.count(0) / len(draws) < 0.79  # 3 / (3 + 1)
    indices = list(sampler)
    assert len(indices) == len(sampler) and all(len(set(indices[i:i + K])) == 1 for i in range(0, len(indices), K))
    source.refresh({"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0})
    assert {sampler.tasks(step)[0] for step in range(200)} == {2, 3}
    two = grpo_sampler(source, groups=2)
    assert all(sorted(two.tasks(step)) == [2, 3] for step in range(50))  # without replacement: a group per task
    # a later train() call continues the run's draws: its first step is the draw after the steps done
    assert list(grpo_sampler(source, groups=2, first_draw=7))[: 2 * K] == two.batch(7).tolist()


def test_batch_source_refuses_bad_weights():
    with pytest.raises(ValueError, match="task 'a' has weight -1.0; a weight is a finite number >= 0"):
        BatchSource({"a": -1.0})
    with pytest.raises(ValueError, match="no task has a weight above 0"):
        BatchSource({"a": 0.0})
    source = BatchSource({"a": 1.0})
    source.refresh({"b": 2.0})
    assert source.weights() == {"b": 2.0} and source.round == 1


def test_from_store_refuses_weights_on_tasks_it_does_not_hold(bfcl, tmp_path):
    from coevolve_engine.core.errors import CoevolveError
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

    with pytest.raises(ValueError, match="group_size must be >= 2"):
        TRLGRPOConfig(model="m", output_dir="o", group_size=1)
    with pytest.raises(ValueError, match="through TRLGRPOConfig's own fields"):
        TRLGRPOConfig(model="m", output_dir="o", trl_args={"max_steps": 3})
    with pytest.raises(ValueError, match="max_model_calls_per_turn must be >= 1"):
        TRLGRPOConfig(model="m", output_dir="o", max_model_calls_per_turn=0)
    with pytest.raises(ValueError, match="use_vllm"):
        TRLGRPOConfig(model="m", output_dir="o", trl_args={"use_vllm": True})


def test_registry_lists_trl_grpo():
    assert "trl-grpo" in TRAINERS.names()
    assert TRAINERS.load("trl-grpo").__name__ == "TRLGRPOTrainer"


def test_batch_source_reads_a_rounds_stored_weights(tmp_path):
    from coevolve_engine.curriculum import compute_weights
    from coevolve_engine.core.store import Store
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


# --- a crafted 3-turn task: the ids trained are the ids sampled, and only they carry the loss ------------------

THREE_TURNS = ["Add 2 to the counter.", "Now add 3.", "Read the counter."]


def counter_trainer(tmp, task_id: str, texts: list[str], *, target: int, **options):
    """trl-grpo on one crafted 3-turn counter task: a tiny Qwen3 whose tokenizer also learned ``texts``, group
    size K, one group a step; ``options`` are the config's own (beta, max_new_tokens, ...)."""
    from toy_env import TOOLS, CounterEnvironment, counter_task

    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, qwen3_chat_template
    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig, TRLGRPOTrainer

    corpus = [qwen3_chat_template(), json.dumps(TOOLS), *THREE_TURNS, *texts] * 3
    policy = build_tiny_qwen3(tmp / "policy", corpus, vocab_size=400)
    task = counter_task(task_id, THREE_TURNS, target=target)
    db = tmp / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", [task])
    config = TRLGRPOConfig(model=str(policy), output_dir=str(tmp / "out"), group_size=K, groups_per_step=1,
                           learning_rate=1e-2, max_completion_length=400, policy_name="tiny", save_checkpoint=False,
                           **options)
    return TRLGRPOTrainer.from_store(db, config, CounterEnvironment(), BatchSource({task["task_id"]: 1.0}),
                                     reward_funcs=[shorter_is_better])


@pytest.fixture(scope="module")
def three_turn_step(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("three-turns")
    trainer = counter_trainer(tmp, "counter/three", ["The counter is 5."], target=5, beta=0.0, max_new_tokens=12,
                              max_model_calls_per_turn=1)
    seen = []
    play = trainer._rollout_func

    def recording(prompts, grpo):
        output = play(prompts, grpo)
        seen.append(output)
        return output

    trainer._grpo.rollout_func = recording
    model = trainer.model
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer.train(1)
    with Store(tmp / "store.duckdb", read_only=True) as store:
        rows = store.sql("SELECT messages, meta FROM trajectories ORDER BY trajectory_id").to_dicts()
    return trainer, before, seen[0], rows


def _segments(ids, mask):
    """(mask value, ids) runs of a completion."""
    runs = []
    for token, flag in zip(ids, mask):
        if runs and runs[-1][0] == flag:
            runs[-1][1].append(token)
        else:
            runs.append((flag, [token]))
    return runs


def test_the_loss_mask_covers_exactly_the_policys_own_tokens(three_turn_step):
    trainer, _, output, rows = three_turn_step
    tokenizer = trainer._grpo.processing_class
    assert len(output["completion_ids"]) == len(rows) == K
    for ids, mask, logprobs, row in zip(output["completion_ids"], output["env_mask"], output["logprobs"], rows):
        messages, meta = json.loads(row["messages"]), json.loads(row["meta"])
        assert len(ids) == len(mask) == len(logprobs)
        runs = _segments(ids, mask)
        answers = [m for m in messages if m["role"] == "assistant"]
        sampled = [run for flag, run in runs if flag == 1]
        assert len(sampled) == len(answers) and runs[0][0] == 1 and runs[-1][0] == 1
        assert sum(map(len, sampled)) == json.loads(row["meta"])["usage"]["completion_tokens"]
        assert all(p == 0.0 for p, flag in zip(logprobs, mask) if flag == 0)
        assert all(p <= 0.0 for p, flag in zip(logprobs, mask) if flag == 1)
        # one answer per turn (max_model_calls_per_turn=1): a plain answer ends the turn and the next user message
        # follows, outside the mask, exactly as the template renders it
        if meta["stop"] == "done":
            assert sum(m["role"] == "user" for m in messages) == 3
            between = [tokenizer.decode(run) for flag, run in runs if flag == 0]
            for text, user in zip(between, THREE_TURNS[1:]):
                assert text.endswith(f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
            for text in (tokenizer.decode(run) for run in sampled):
                assert not any(user in text for user in THREE_TURNS)


def test_one_grpo_step_changes_the_log_probability_of_turn_2_and_3_tokens(three_turn_step):
    from transformers import AutoModelForCausalLM

    trainer, before, output, rows = three_turn_step
    after = trainer.model
    old = AutoModelForCausalLM.from_pretrained(trainer.config.model, dtype=torch.float32)  # the policy before the step
    assert all(torch.equal(p, before[name]) for name, p in old.named_parameters())
    done = [i for i, row in enumerate(rows) if json.loads(row["meta"])["stop"] == "done"]
    assert done, "no episode reached its third turn"
    i = done[0]
    prompt, ids, mask = output["prompt_ids"][i], output["completion_ids"][i], output["env_mask"][i]
    sequence = torch.tensor([prompt + ids])
    starts = [start for start, (flag, prev) in enumerate(zip(mask, [0] + mask[:-1])) if flag == 1 and prev == 0]
    assert len(starts) == 3  # one answer per user turn
    later = [len(prompt) + p for p in range(starts[1], len(ids)) if mask[p] == 1]  # turns 2 and 3, sampled

    def logps(model):
        with torch.no_grad():
            logits = model(sequence).logits[0].float()
        return torch.log_softmax(logits[:-1], -1).gather(1, sequence[0, 1:, None])[:, 0]

    moved = (logps(after) - logps(old)).abs()
    assert all(moved[p - 1] > 1e-6 for p in later)


# --- thinking on: each user turn re-renders the context without earlier reasoning, a segment per turn ----------

def _thinking_answer(text: str, row: int) -> str:
    """What the scripted policy writes after ``text`` (a prompt): reasoning of a length set by its batch row, then
    a call to ``add`` or, after a tool result, a plain answer that ends the turn."""
    reasoning = " ".join(["hmm"] * (1 + row))
    if text.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n"):
        return f"<think>\n{reasoning}\n</think>\n\nDone."
    call = json.dumps({"name": "add", "arguments": {"amount": 2}})
    return f"<think>\n{reasoning}\n</think>\n\n<tool_call>\n{call}\n</tool_call>"


@pytest.fixture(scope="module")
def thinking_step(tmp_path_factory):
    """One trl-grpo step on the tiny Qwen3 (thinking on: its template drops earlier reasoning), the answers written
    by a script with think blocks and scored by the tiny model itself (teacher-forced)."""
    from types import SimpleNamespace

    tmp = tmp_path_factory.mktemp("thinking")
    answers = [_thinking_answer(end, row) for row in range(K)
               for end in ("", "</tool_response><|im_end|>\n<|im_start|>assistant\n")]
    trainer = counter_trainer(tmp, "counter/thinking", answers, target=6, beta=1e-3, max_new_tokens=64)
    grpo, model = trainer._grpo, trainer.model
    tokenizer = grpo.processing_class
    assert tokenizer.chat_template is not None

    def generate(input_ids, attention_mask, max_new_tokens, **kwargs):
        texts = [tokenizer.decode([t for t, a in zip(row, att) if a], skip_special_tokens=False)
                 for row, att in zip(input_ids.tolist(), attention_mask.tolist())]
        new = [tokenizer(_thinking_answer(text, row) + "<|im_end|>", add_special_tokens=False)["input_ids"]
               for row, text in enumerate(texts)]
        width = max(map(len, new))
        pad = tokenizer.pad_token_id
        tail = torch.tensor([ids + [pad] * (width - len(ids)) for ids in new])
        sequences = torch.cat([input_ids, tail], dim=1)
        attention = torch.cat([attention_mask, torch.tensor([[1] * len(ids) + [0] * (width - len(ids))
                                                              for ids in new])], dim=1)
        with torch.no_grad():
            logits = model(input_ids=sequences, attention_mask=attention).logits
        # what generate does at each step: the logits through the logits processors (the sampling warpers)
        for t in range(width):
            kwargs["logits_processor"](sequences[:, :input_ids.size(1) + t], logits[:, input_ids.size(1) - 1 + t])
        return SimpleNamespace(sequences=sequences)

    model.generate = generate  # the script writes, the tiny model scores what it wrote
    seen, batches = [], []
    play, score = trainer._rollout_func, grpo._generate_and_score_completions

    def recording(prompts, trl_trainer):
        output = play(prompts, trl_trainer)
        seen.append(output)
        return output

    def scored(inputs):
        batch = score(inputs)
        batches.append(batch)
        return batch

    grpo.rollout_func, grpo._generate_and_score_completions = recording, scored
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer.train(1)
    return trainer, before, seen[0], batches[0]


def test_a_grpo_step_with_thinking_on_trains_each_segment_with_its_episodes_advantage(thinking_step):
    trainer, before, output, batch = thinking_step
    tokenizer = trainer._grpo.processing_class
    episodes = output["episode_segments"]
    assert len(episodes) == K and all(len(segments) == 3 for segments in episodes)  # a segment per user turn
    # the batch TRL trains: one row per segment, in episode order
    rows = [segment for segments in episodes for segment in segments]
    assert batch["completion_ids"].size(0) == batch["advantages"].size(0) == len(rows) == 3 * K
    for r, (prompt, completion, mask, logprobs) in enumerate(rows):
        text = tokenizer.decode(prompt, skip_special_tokens=False)
        assert "hmm" not in text  # no earlier turn's reasoning in any segment's context
        width = batch["prompt_ids"].size(1)
        assert batch["prompt_ids"][r, width - len(prompt):].tolist() == prompt
        assert batch["completion_ids"][r, :len(completion)].tolist() == completion
        assert batch["tool_mask"][r, :len(mask)].tolist() == mask
        assert batch["completion_mask"][r].sum().item() == len(completion)
        sampled = tokenizer.decode([t for t, m in zip(completion, mask) if m], skip_special_tokens=False)
        assert sampled.count("<think>") == 2 and sampled.endswith("Done.<|im_end|>")  # the turn's two answers
    # the first segment of each episode is what the rollout_func gave TRL for it
    assert [segments[0][1] for segments in episodes] == output["completion_ids"]
    # each segment carries its episode's advantage, and the advantages are normalised per episode in the group
    advantage = batch["advantages"].view(K, 3)
    assert torch.equal(advantage, advantage[:, :1].expand(K, 3))
    assert abs(advantage[:, 0].sum().item()) < 1e-4 and advantage[:, 0].abs().max().item() > 0.1
    sampled = torch.tensor([sum(sum(m) for _, _, m, _ in segments) for segments in episodes], dtype=torch.float32)
    assert batch["num_items_in_batch"].item() == sampled.sum().item()
    # the reference log-probabilities were computed on the segments' rows: the reference is the policy that
    # sampled them, so on every sampled token they are the sampling log-probabilities
    sampled_at = (batch["completion_mask"] * batch["tool_mask"]).bool()
    assert torch.allclose(batch["ref_per_token_logps"][sampled_at], batch["sampling_per_token_logps"][sampled_at],
                          atol=1e-4)
    # TRL's default loss (dapo) is token-level: at the sampling policy (ratio 1, beta 0) its value is the
    # advantages averaged over sampled tokens, so an episode weighs by its sampled tokens, not its segments
    grpo = trainer._grpo
    assert grpo.loss_type == "dapo"
    grpo.model.eval()
    grpo.beta = 0.0
    try:
        with torch.no_grad():
            loss = grpo._compute_loss(grpo.model, {k: v for k, v in batch.items()
                                                   if k not in ("old_per_token_logps", "sampling_per_token_logps")})
    finally:
        grpo.model.train()
        grpo.beta = trainer.config.beta
    expected = -(advantage[:, 0].cpu() * sampled).sum() / sampled.sum()
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
    # and the step trained: the parameters moved
    assert any(not torch.equal(p, before[name]) for name, p in trainer.model.named_parameters())
