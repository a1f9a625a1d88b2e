"""Device and dtype are chosen in one place (core.device) for the trainer, the eval phase and local agents: with
an accelerator present (a faked CUDA check here, nothing is moved to it) all of them take it, in bf16."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from coevolve_engine.core.device import Placement, placement  # noqa: E402


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)


class Loaded(Exception):
    """Raised by the spy once the model would be moved: the test stops there."""


@pytest.fixture
def loads(monkeypatch):
    """Where and how every checkpoint load asks for its model (from_pretrained's dtype, then .to's device)."""
    import transformers

    seen: list[tuple] = []

    class Spy:
        def __init__(self, dtype):
            self.dtype = dtype

        def to(self, device):
            seen.append((str(device), self.dtype))
            raise Loaded

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda path, **kwargs: Spy(kwargs.get("dtype")))
    return seen


def test_the_accelerator_when_there_is_one_in_bf16(fake_cuda, monkeypatch):
    assert placement() == Placement("cuda", "bfloat16")
    assert placement(use_cpu=True) == Placement("cpu", "float32")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    assert placement() == Placement("cuda", "float16")


def test_without_one_the_cpu_in_float32(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert placement() == Placement("cpu", "float32")


def test_the_eval_phase_loads_the_checkpoint_on_the_accelerator_in_the_trainers_precision(fake_cuda, loads,
                                                                                             tmp_path):
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.eval.checkpoint import evaluate_policy
    from coevolve_engine.trainers.tiny_policy import build_tokenizer, qwen3_chat_template
    from coevolve_engine.trainers.trl_grpo.trainer import precision_settings

    build_tokenizer([qwen3_chat_template(), "add 1 and 2"], vocab_size=300).save_pretrained(tmp_path)
    environment = load_environment("calc")
    tasks = list(environment.load_tasks(split="test"))[:1]
    with pytest.raises(Loaded):
        evaluate_policy(tmp_path, environment, tasks)
    assert loads == [("cuda", torch.bfloat16)]
    # the trainer's TRL settings come from the same choice: bf16 mixed precision on the accelerator
    assert precision_settings(placement()) == {"use_cpu": False, "bf16": True, "fp16": False}


def test_a_local_agent_loads_where_the_eval_does(fake_cuda, loads, tmp_path):
    from coevolve_engine.adapters.agents.local_agent import LocalAgent
    from coevolve_engine.trainers.tiny_policy import build_tokenizer, qwen3_chat_template

    build_tokenizer([qwen3_chat_template(), "add 1 and 2"], vocab_size=300).save_pretrained(tmp_path)
    with pytest.raises(Loaded):
        LocalAgent(tmp_path).load()
    assert loads == [("cuda", "bfloat16")]
