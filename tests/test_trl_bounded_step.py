"""One trl-grpo step played in bounded generate calls and trained in micro-batches smaller than a group is the
step played and trained whole: the same loss and the same gradients (float tolerance).

The policy's answers are written by a script (thinking on: reasoning, then a tool call or a final answer; the
reasoning's length set by the order in which the episodes' answers are asked for, so that the episodes of a group
differ) and scored by the tiny Qwen3 itself, so both runs train on the same episodes whatever the batching.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

import torch  # noqa: E402

from coevolve_engine.core.store import Store  # noqa: E402
from coevolve_engine.trainers import BatchSource  # noqa: E402

K, GROUPS = 4, 2
TURNS = ["Add 2 to the counter.", "Now add 3.", "Read the counter."]
AFTER_TOOL = "</tool_response><|im_end|>\n<|im_start|>assistant\n"


def answer(text: str, n: int) -> str:
    """The scripted answer to a prompt ``text``, the ``n``-th answer asked for in the step."""
    reasoning = " ".join(["hmm"] * (1 + n % 5))
    if text.endswith(AFTER_TOOL):
        return f"<think>\n{reasoning}\n</think>\n\nDone."
    return f"<think>\n{reasoning}\n</think>\n\n<tool_call>\n" + json.dumps(
        {"name": "add", "arguments": {"amount": 1 + n % 3}}) + "\n</tool_call>"


def shorter_is_better(completions, **row):
    return [1.0 / (1.0 + len(json.dumps(completion))) for completion in completions]


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    from toy_env import TOOLS

    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, qwen3_chat_template

    texts = [answer(end, n) for n in range(5) for end in ("", AFTER_TOOL)]
    corpus = [qwen3_chat_template(), json.dumps(TOOLS), *TURNS, *texts] * 3
    return build_tiny_qwen3(tmp_path_factory.mktemp("policy") / "policy", corpus, vocab_size=400)


def one_step(policy, tmp, **bounds):
    """Train one step; returns (the logged loss, the gradients before the optimizer step, generate batch sizes)."""
    from toy_env import CounterEnvironment, counter_task
    from transformers import TrainerCallback

    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig, TRLGRPOTrainer

    task = counter_task("counter/bounded", TURNS, target=5)
    tmp.mkdir()
    db = tmp / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", [task])
    config = TRLGRPOConfig(model=str(policy), output_dir=str(tmp / "out"), group_size=K, groups_per_step=GROUPS,
                           learning_rate=1e-2, beta=1e-3, max_completion_length=400, max_new_tokens=64,
                           policy_name="tiny", save_checkpoint=False, trl_args={"max_grad_norm": 0.0}, **bounds)
    trainer = TRLGRPOTrainer.from_store(db, config, CounterEnvironment(), BatchSource({task["task_id"]: 1.0}),
                                        reward_funcs=[shorter_is_better])
    grpo, model = trainer._grpo, trainer.model
    tokenizer = grpo.processing_class
    calls: list[int] = []

    def generate(input_ids, attention_mask, max_new_tokens, **kwargs):
        texts = [tokenizer.decode([t for t, a in zip(row, att) if a], skip_special_tokens=False)
                 for row, att in zip(input_ids.tolist(), attention_mask.tolist())]
        first = sum(calls)
        calls.append(len(texts))
        new = [tokenizer(answer(text, first + row) + "<|im_end|>", add_special_tokens=False)["input_ids"]
               for row, text in enumerate(texts)]
        width = max(map(len, new))
        pad = tokenizer.pad_token_id
        tail = torch.tensor([ids + [pad] * (width - len(ids)) for ids in new])
        sequences = torch.cat([input_ids, tail], dim=1)
        attention = torch.cat([attention_mask, torch.tensor([[1] * len(ids) + [0] * (width - len(ids))
                                                              for ids in new])], dim=1)
        with torch.no_grad():
            logits = model(input_ids=sequences, attention_mask=attention).logits
        for t in range(width):  # generate's logits processors, step by step
            kwargs["logits_processor"](sequences[:, :input_ids.size(1) + t], logits[:, input_ids.size(1) - 1 + t])
        return SimpleNamespace(sequences=sequences)

    model.generate = generate
    grads: dict[str, torch.Tensor] = {}

    class Gradients(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            grads.update({name: p.grad.detach().clone() for name, p in model.named_parameters()
                          if p.grad is not None})

    grpo.add_callback(Gradients())
    trainer.train(1)
    loss = next(entry["loss"] for entry in reversed(grpo.state.log_history) if "loss" in entry)
    return loss, grads, calls, grpo.args


def test_bounded_generation_and_micro_batches_give_the_unbounded_steps_loss_and_gradients(policy, tmp_path):
    loss, grads, calls, args = one_step(policy, tmp_path / "whole")
    assert args.per_device_train_batch_size == K * GROUPS and args.gradient_accumulation_steps == 1
    assert calls[0] == K * GROUPS  # every episode in one generate
    bounded_loss, bounded_grads, bounded_calls, bounded_args = one_step(
        policy, tmp_path / "bounded", generation_batch_size=3, micro_batch_size=2)
    assert bounded_args.per_device_train_batch_size == 2 and bounded_args.gradient_accumulation_steps == 4
    assert bounded_args.steps_per_generation == 4
    assert max(bounded_calls) == 3 and sum(bounded_calls) == sum(calls)  # the same answers, 3 at most per call
    assert sorted(grads) == sorted(bounded_grads) and len(grads) > 5
    norm = torch.sqrt(sum((g.float() ** 2).sum() for g in grads.values()))
    assert norm > 1e-4  # the step learns something: the comparison is not between zeros
    for name, grad in grads.items():
        assert torch.allclose(bounded_grads[name], grad, atol=1e-6, rtol=1e-4), name
    assert bounded_loss == pytest.approx(loss, rel=1e-4, abs=1e-7)


def test_a_micro_batch_that_does_not_divide_the_step_is_refused(policy, tmp_path):
    from coevolve_engine.trainers.trl_grpo import TRLGRPOConfig

    with pytest.raises(ValueError, match=r"micro_batch_size = 3 must divide .* 8 episodes \(e\.g\. 2\)"):
        TRLGRPOConfig(model=str(policy), output_dir=str(tmp_path), group_size=K, groups_per_step=GROUPS,
                      micro_batch_size=3)
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        TRLGRPOConfig(model=str(policy), output_dir=str(tmp_path), trl_args={"gradient_accumulation_steps": 2})
