"""evaluate_policy: greedy batched answers of a local checkpoint, every user turn played through the environment
and scored."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from coevolve_engine.adapters.environments.calc import CalcEnvironment  # noqa: E402
from coevolve_engine.eval.checkpoint import evaluate_policy, success_rate  # noqa: E402


@pytest.fixture(scope="module")
def calc():
    return CalcEnvironment()


@pytest.fixture(scope="module")
def tasks(calc):
    return list(calc.load_tasks(split="seed", n=6))


@pytest.fixture(scope="module")
def policy(tmp_path_factory, tasks):
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3

    corpus = [t["prompt"] for t in tasks] * 4 + ['<tool_call>\n{"name": "add", "arguments": {"n": 1}}\n</tool_call>']
    return build_tiny_qwen3(tmp_path_factory.mktemp("evaluate") / "policy", corpus, hidden_size=32, vocab_size=300,
                            digits=True)


def test_a_random_checkpoint_gets_one_scored_result_per_task_in_order(calc, tasks, policy):
    results = evaluate_policy(policy, calc, tasks, max_new_tokens=8, max_model_calls_per_turn=2, batch_size=4)
    assert [r.task_id for r in results] == [t["task_id"] for t in tasks]
    assert all(isinstance(r.reward, float) and isinstance(r.success, bool) and r.reason for r in results)
    assert all(r.completion[-1]["role"] in ("assistant", "tool") for r in results)
    assert success_rate(results) == 0.0 and evaluate_policy(policy, calc, []) == []


class Scripted:
    """A stand-in model: answers each prompt with the next call of its task's chain, one call per model turn
    (as the reference agent does); on tasks whose prompt mentions 'multiply' it answers with prose."""

    training = False

    def __init__(self, tokenizer, tasks):
        self.tokenizer = tokenizer
        self.tasks = tasks

    def eval(self):
        return self

    def train(self, mode=True):
        return self

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        import torch

        rows = []
        for ids in input_ids:
            text = self.tokenizer.decode(ids, skip_special_tokens=False)
            task = next(t for t in self.tasks if t["prompt"] in text)
            done = text.count("<tool_response>")
            steps = task["spec"]["steps"]
            if "multiply" in task["prompt"]:
                answer = "I cannot."
            elif done < len(steps):
                step = steps[done]
                answer = f'<tool_call>\n{json.dumps({"name": step["op"], "arguments": {"n": step["n"]}})}\n</tool_call>'
            else:
                answer = "done"
            new = self.tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
            rows.append(ids.tolist() + new)
        width = max(len(r) for r in rows)
        return SimpleNamespace(sequences=torch.tensor([r + [self.tokenizer.pad_token_id] * (width - len(r))
                                                       for r in rows]))


def test_tool_calls_are_played_turn_by_turn_and_scored_by_the_episode(calc, tasks, policy):
    from transformers import AutoTokenizer

    steps_tasks = [t for t in calc.load_tasks(split="test", n=60) if t["spec"]["form"] == "steps"][:12]
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    model = Scripted(tokenizer, steps_tasks)
    longest = max(len(t["spec"]["steps"]) for t in steps_tasks)
    results = evaluate_policy(policy, calc, steps_tasks, max_model_calls_per_turn=longest + 1, batch_size=5,
                              model=model, tokenizer=tokenizer)
    expected = ["multiply" not in t["prompt"] for t in steps_tasks]
    assert [r.success for r in results] == expected and any(expected) and not all(expected)
    assert [len(r.actions) for r in results] == [len(t["spec"]["steps"]) * ok for t, ok in zip(steps_tasks, expected)]
    # a turn must end within max_model_calls_per_turn answers (BFCL's rule); these tasks have one turn, so the
    # capped turn is the last and is scored as played (as BFCL's checker scores an episode capped in its last
    # turn): only a one-step task is solved by its first answer
    short = evaluate_policy(policy, calc, steps_tasks, max_model_calls_per_turn=1, model=model, tokenizer=tokenizer)
    assert [r.success for r in short] == [ok and len(t["spec"]["steps"]) == 1 for ok, t in zip(expected, steps_tasks)]
    assert all(r.reason.startswith("turn 1 needed more than max_model_calls_per_turn=1 model calls in the last "
                                   "turn, scored as played: ") for r, ok in zip(short, expected) if ok)
    # more environment steps than allowed fail the task, with the reason
    capped = evaluate_policy(policy, calc, steps_tasks, max_model_calls_per_turn=longest + 1, max_steps=1,
                             model=model, tokenizer=tokenizer)
    assert [r.success for r in capped] == [ok and len(t["spec"]["steps"]) == 1 for ok, t in zip(expected, steps_tasks)]
    assert {r.reason for r, t in zip(capped, steps_tasks) if len(t["spec"]["steps"]) > 1 and "multiply" not in
            t["prompt"]} == {"exceeded max_steps=1 environment steps"}


class GroundTruthTurns:
    """A stand-in model for BFCL multi-turn tasks: in each user turn it answers once with that turn's ground-truth
    calls, then with prose, which ends the turn. The turn is the latest of the task's user messages in the prompt."""

    training = False

    def __init__(self, tokenizer, tasks, env):
        self.tokenizer = tokenizer
        self.tasks = [(t, env.reference_solution(t["spec"])) for t in tasks]

    def eval(self):
        return self

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        import torch

        rows = []
        for ids in input_ids:
            text = self.tokenizer.decode(ids, skip_special_tokens=False)
            task, solution = next((t, s) for t, s in self.tasks if t["spec"]["turns"][0][0]["content"] in text)
            users = [turn[0]["content"] for turn in task["spec"]["turns"]]
            turn = max(i for i, user in enumerate(users) if user in text)
            answered = text[text.rindex(users[turn]):].count("<|im_start|>assistant") - 1  # minus the open one
            if answered == 0 and solution[turn]:
                answer = "".join(f'<tool_call>\n{json.dumps({"name": c.name, "arguments": c.arguments})}\n</tool_call>'
                                 for c in solution[turn])
            else:
                answer = "Done."
            new = self.tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
            rows.append(ids.tolist() + new)
        width = max(len(r) for r in rows)
        return SimpleNamespace(sequences=torch.tensor([r + [self.tokenizer.pad_token_id] * (width - len(r))
                                                       for r in rows]))


def test_every_user_turn_of_a_multi_turn_task_is_played_and_scored(policy):
    pytest.importorskip("bfcl_eval")
    from transformers import AutoTokenizer

    from coevolve_engine.adapters.environments import load_environment

    bfcl = load_environment("bfcl")
    tasks = list(bfcl.load_tasks(category="multi_turn_base", limit=2))
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    model = GroundTruthTurns(tokenizer, tasks, bfcl)
    results = evaluate_policy(policy, bfcl, tasks, max_model_calls_per_turn=2, batch_size=2, max_new_tokens=512,
                              model=model, tokenizer=tokenizer)
    assert [(r.task_id, r.success, r.reason) for r in results] == \
        [(t["task_id"], True, f"state and responses match the ground truth after each of {len(t['spec']['turns'])} "
          "turns") for t in tasks]
    for result, task in zip(results, tasks):
        assert len(result.actions) == sum(map(len, task["spec"]["ground_truth"]))
        assert sum(m["role"] == "user" for m in result.completion) == len(task["spec"]["turns"])
    # one model answer per user turn is not enough: the turn has not ended, so the task fails there
    capped = evaluate_policy(policy, bfcl, tasks, max_model_calls_per_turn=1, model=model, tokenizer=tokenizer)
    assert not any(r.success for r in capped)
