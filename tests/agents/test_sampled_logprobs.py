"""The sampled tokens' log-probabilities, read as generate draws them (``SampledLogprobs``), equal what the
whole per-step scores give (``generate(output_scores=True)`` then a log-softmax per token), on the same draws."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("trl")  # ships the Qwen3 chat template the tiny tokenizer uses

from tiny_qwen import build_tiny_qwen3, qwen3_chat_template  # noqa: E402
from toy_env import TOOLS  # noqa: E402

from coevolve_engine.adapters.agents.local_agent import TokenPolicy  # noqa: E402
from coevolve_engine.adapters.agents.sampled_logprobs import SampledLogprobs  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    corpus = ["Add 2 to the counter.", json.dumps(TOOLS), "The counter is 5.", qwen3_chat_template()] * 3
    path = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"), corpus)
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def scores_path(model, input_ids, attention, temperature, top_p, new):
    """The per-step scores way: every step's processed scores kept, then one log-softmax per sampled token."""
    sampling = {"do_sample": temperature > 0}
    if temperature > 0:
        sampling.update(temperature=temperature, top_p=top_p, top_k=0)
    out = model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=new, output_scores=True,
                         return_dict_in_generate=True, pad_token_id=0, eos_token_id=None, **sampling)
    generated = out.sequences[:, input_ids.size(1):]
    logprobs = [[float(torch.log_softmax(out.scores[t][row].float(), -1)[token]) for t, token in enumerate(ids)]
                for row, ids in enumerate(generated.tolist())]
    return generated, torch.tensor(logprobs)


def recorder_path(model, input_ids, attention, temperature, top_p, new):
    recorder = SampledLogprobs(temperature, top_p)
    out = model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=new,
                         return_dict_in_generate=True, pad_token_id=0, eos_token_id=None,
                         do_sample=temperature > 0, logits_processor=recorder.processors(), **recorder.neutral())
    generated = out.sequences[:, input_ids.size(1):]
    return generated, recorder.finish(generated)


@pytest.mark.parametrize("temperature, top_p", [(0.9, 1.0), (0.7, 0.8), (0.0, 1.0)])
def test_the_recorded_logprobs_equal_the_scores_path(tiny, temperature, top_p):
    model, tokenizer = tiny
    rows = [tokenizer.encode("Add 2 to the counter."), tokenizer.encode("The counter is 5. Add 2")]
    width = max(map(len, rows))
    input_ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
    attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    with torch.no_grad():
        torch.manual_seed(3)
        old_ids, old = scores_path(model, input_ids, attention, temperature, top_p, 24)
        torch.manual_seed(3)
        new_ids, new = recorder_path(model, input_ids, attention, temperature, top_p, 24)
    assert torch.equal(old_ids, new_ids)  # the same draws
    assert new.shape == old.shape == (2, 24)
    assert torch.allclose(new, old, atol=1e-4, rtol=0)
    assert (new <= 0).all() and (new < -1e-3).any()


def test_a_bounded_generation_batch_plays_the_same_tokens(tiny):
    """Greedy answers to four chats in generates of at most 1 and of 3 episodes keep the same ids and
    log-probabilities as one generate for all four (within float tolerance)."""
    from types import SimpleNamespace

    model, tokenizer = tiny
    played = []
    for size in (0, 1, 3):
        policy = TokenPolicy(model, tokenizer, temperature=0.0, max_new_tokens=8, logprobs=True,
                             generation_batch_size=size)
        calls, real = [], model.generate

        def counting(*args, **kwargs):
            calls.append(kwargs["input_ids"].size(0))
            return real(*args, **kwargs)

        model.generate = counting
        try:
            prompts = ["Add 2 to the counter.", "Now add 3.", "The counter is 5.", "Add 2"]
            plays = [SimpleNamespace(messages=[{"role": "user", "content": p}], tools=TOOLS, state={},
                                     stop=lambda *_: None) for p in prompts]
            policy.respond(plays)
        finally:
            del model.generate
        played.append((calls, [p.state["tokens"] for p in plays]))
    (whole, tokens), (ones, tokens_1), (threes, tokens_3) = played
    assert whole == [4] and ones == [1, 1, 1, 1] and threes == [3, 1]
    for other in (tokens_1, tokens_3):
        for a, b in zip(tokens, other):
            assert a.ids == b.ids
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
            assert sum(a.mask) == 8


def test_a_negative_generation_batch_size_is_refused(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="generation_batch_size must be >= 0"):
        TokenPolicy(model, tokenizer, generation_batch_size=-1)
