"""The log-probability of each sampled token, kept while ``generate`` samples, without the per-step scores.

``generate(output_scores=True)`` keeps one float row of the whole vocabulary per generated token per sequence
until generation ends (151,936 floats for Qwen3: 32 sequences x 1,024 tokens is about 20 GB). ``SampledLogprobs``
is a logits processor placed last, after the sampling warpers, so it sees exactly the distribution the next
token is drawn from; it holds only the step's log-normaliser and that step's scores (which ``generate`` holds
anyway), and at the next step reads the chosen token's value with one gather over the batch:

    recorder = SampledLogprobs(temperature=0.9, top_p=1.0)
    out = model.generate(..., logits_processor=recorder.processors(), do_sample=True, **recorder.neutral())
    logprobs = recorder.finish(out.sequences[:, width:])   # (batch, generated) float32

Memory: one (batch, vocabulary) row at a time instead of one per generated token.
"""

from __future__ import annotations

from typing import Any


class SampledLogprobs:
    """Temperature and top-p applied by this object (``generate``'s own warpers turned off with ``neutral()``),
    then the sampled token's log-probability recorded step by step. temperature 0: greedy, no warpers."""

    def __init__(self, temperature: float, top_p: float = 1.0) -> None:
        self.temperature, self.top_p = temperature, top_p
        self._steps: list[Any] = []  # one (batch,) tensor per decided token
        self._scores: Any = None  # the last step's processed scores
        self._normaliser: Any = None  # their logsumexp per row

    def neutral(self) -> dict[str, Any]:
        """``generate`` arguments that keep its own warpers out (this object applies them, in the same order)."""
        return {"temperature": 1.0, "top_p": 1.0, "top_k": 0} if self.temperature > 0 else {}

    def processors(self) -> Any:
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

        warpers: list[Any] = []
        if self.temperature > 0:
            if self.temperature != 1.0:
                warpers.append(TemperatureLogitsWarper(self.temperature))
            if self.top_p < 1.0:
                warpers.append(TopPLogitsWarper(top_p=self.top_p))
        return LogitsProcessorList([*warpers, self])

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._scores is not None:  # the token drawn from the previous step's scores is now input_ids[:, -1]
            self._steps.append(self._pick(input_ids[:, -1]))
        self._scores = scores
        self._normaliser = torch.logsumexp(scores.float(), dim=-1)
        return scores

    def _pick(self, tokens: Any) -> Any:
        chosen = self._scores.gather(1, tokens.view(-1, 1).to(self._scores.device)).squeeze(1).float()
        return chosen - self._normaliser

    def finish(self, generated: Any) -> Any:
        """The (batch, generated) log-probabilities of ``generated`` (the ids after the prompt), float32."""
        import torch

        if self._scores is not None and len(self._steps) < generated.size(1):
            self._steps.append(self._pick(generated[:, len(self._steps)]))
        self._scores = self._normaliser = None
        steps = self._steps[:generated.size(1)]
        if not steps:
            return torch.zeros(generated.size(0), 0)
        return torch.stack(steps, dim=1).cpu()
