"""evaluate_policy: greedy batched answers of a local checkpoint, played through the environment and scored."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from coevolve_engine.adapters.environments.calc import CalcEnvironment  # noqa: E402
from coevolve_engine.evaluate import evaluate_policy, success_rate  # noqa: E402


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
    results = evaluate_policy(policy, calc, tasks, max_new_tokens=8, max_turns=2, batch_size=4)
    assert [task_id for task_id, _, _ in results] == [t["task_id"] for t in tasks]
    assert all(isinstance(r, float) and isinstance(ok, bool) for _, r, ok in results)
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
        return torch.tensor([r + [self.tokenizer.pad_token_id] * (width - len(r)) for r in rows])


def test_tool_calls_are_played_turn_by_turn_and_scored_by_the_episode(calc, tasks, policy):
    from transformers import AutoTokenizer

    steps_tasks = [t for t in calc.load_tasks(split="test", n=60) if t["spec"]["form"] == "steps"][:12]
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    model = Scripted(tokenizer, steps_tasks)
    longest = max(len(t["spec"]["steps"]) for t in steps_tasks)
    results = evaluate_policy(policy, calc, steps_tasks, max_turns=longest + 1, batch_size=5, model=model,
                              tokenizer=tokenizer)
    expected = ["multiply" not in t["prompt"] for t in steps_tasks]
    assert [ok for _, _, ok in results] == expected and any(expected) and not all(expected)
    # with one model turn only the one-call tasks can be solved
    short = evaluate_policy(policy, calc, steps_tasks, max_turns=1, model=model, tokenizer=tokenizer)
    assert [ok for _, _, ok in short] == [ok and len(t["spec"]["steps"]) == 1 for ok, t in zip(expected, steps_tasks)]
