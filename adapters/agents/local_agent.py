"""An agent that runs a ``transformers`` causal LM from a local path, in process.

    agent = LocalAgent("/models/qwen3-0.6b", temperature=0.0, max_new_tokens=256)
    rollout = agent.run(env, task_id, spec)

The chat and the turn's tools go through the tokenizer's chat template, built as token ids one answer at a
time (``chat_tokens``: exactly what the trl-grpo trainer trains on); the model's text is decoded as BFCL's handler
for the model's family decodes it (``answer_format``: for Qwen, the ``<tool_call>`` blocks that parse run). The
agent is batched: ``run_rollouts`` and the eval phase play all their episodes together, one ``generate`` per
round of answers (``TokenPolicy``). The model loads on first use; generation holds a lock.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Mapping

from coevolve_engine.core.device import placement
from coevolve_engine.core.rollout import STOP_MAX_TOKENS
from .base import (MAX_MODEL_CALLS_PER_TURN, MAX_NEW_TOKENS, MAX_STEPS, Agent, AgentFault, AgentOptions, EpisodeLimits,
                   ModelReply)
from .answer_format import answer_decoder, family_of
from .chat_tokens import ChatTokens
from .sampled_logprobs import SampledLogprobs

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.registry import PluginContext


class LocalAgent(Agent):
    """A local Hugging Face causal LM as a policy, answering every open episode of a batch with one ``generate``.

    path: a directory holding the model and a tokenizer with a chat template that renders tools.
    temperature: 0 means greedy decoding; above 0 samples (with top_p).
    max_new_tokens: per reply. device, torch_dtype: where and how to load the model ("cpu", "bfloat16", ...;
    default: ``core.device.placement()``, the accelerator when there is one, as the trainer and the eval phase).
    seed: seeds torch once at load, for repeatable sampling.
    chat_template_kwargs: extra template variables (e.g. {"enable_thinking": False} for Qwen3).
    max_steps, max_model_calls_per_turn: episode bounds (see EpisodeLimits).
    policy: the name recorded on trajectories (default: the path).

    It takes twelve parameters because each is a single setting of its own a user names when building an agent
    by hand; ``load_agent`` builds it from ``AgentOptions``.
    """

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: "PluginContext") -> "LocalAgent":
        o = AgentOptions(**options)
        return cls(o.model, temperature=o.temperature, max_new_tokens=o.max_tokens, max_steps=o.max_steps,
                   max_model_calls_per_turn=o.max_model_calls_per_turn, chat_template_kwargs=o.chat_template_kwargs,
                   policy=o.policy)

    def __init__(
        self,
        path: str | Path,
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = MAX_NEW_TOKENS,
        device: str | None = None,
        torch_dtype: str | None = None,
        seed: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        max_steps: int = MAX_STEPS,
        max_model_calls_per_turn: int = MAX_MODEL_CALLS_PER_TURN,
        system_prompt: str | None = None,
        policy: str | None = None,
    ) -> None:
        missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
        if missing:
            raise ImportError(f'LocalAgent needs {" and ".join(missing)}: pip install "coevolve-engine[local]"')
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"LocalAgent: no model at {self.path}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.device = device
        self.torch_dtype = torch_dtype
        self.seed = seed
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.limits = EpisodeLimits(max_steps=max_steps, max_model_calls_per_turn=max_model_calls_per_turn)
        self.system_prompt = system_prompt
        self.policy = policy or str(path)
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None
        self._core: TokenPolicy | None = None

    batched = True

    def __repr__(self) -> str:
        return f"LocalAgent(path={str(self.path)!r})"

    def load(self) -> tuple[Any, Any]:
        """The (model, tokenizer), loaded on first call."""
        if self._model is None:
            try:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer
            except ImportError as exc:  # pragma: no cover - depends on the installation
                raise ImportError(
                    'LocalAgent needs torch and transformers: pip install "coevolve-engine[local]"'
                ) from exc
            if self.seed is not None:
                torch.manual_seed(self.seed)
            if self.device is None:  # the accelerator when there is one, in the trainer's precision
                where = placement()
                self.device, self.torch_dtype = where.device, self.torch_dtype or where.dtype
            tokenizer = AutoTokenizer.from_pretrained(self.path)
            if tokenizer.chat_template is None:
                raise ValueError(f"LocalAgent: the tokenizer at {self.path} has no chat template")
            kwargs: dict[str, Any] = {}
            if self.torch_dtype is not None:
                kwargs["dtype"] = self.torch_dtype
            model = AutoModelForCausalLM.from_pretrained(self.path, **kwargs).to(self.device)
            model.eval()
            self._model, self._tokenizer = model, tokenizer
        return self._model, self._tokenizer

    def policy_core(self) -> "TokenPolicy":
        """The batched, token-exact policy behind this agent (loads the model on first use)."""
        if self._core is None:
            model, tokenizer = self.load()
            self._core = TokenPolicy(model, tokenizer, temperature=self.temperature, top_p=self.top_p,
                                     max_new_tokens=self.max_new_tokens,
                                     chat_template_kwargs=self.chat_template_kwargs, device=self.device)
        return self._core

    def respond(self, plays: list[Any]) -> list[Any]:
        with self._lock:
            return self.policy_core().respond(plays)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """One answer to a chat given whole (rendered afresh; the player uses ``respond``)."""
        chat = SimpleNamespace(messages=messages, tools=tools, state={}, stop=lambda *_: None)
        try:
            reply = self.respond([chat])[0]
        except (ImportError, FileNotFoundError, OSError, ValueError, RuntimeError) as exc:
            raise AgentFault(f"local model {self.path}: {type(exc).__name__}: {exc}") from exc
        return reply


class TokenPolicy:
    """A transformers causal LM answering a batch of episodes with one ``generate`` per round, on token ids built
    incrementally (``chat_tokens``): the ids each episode keeps in ``play.state["tokens"]`` are exactly what was
    sampled plus what the template put around it (a segment per user turn where the template drops earlier
    turns' reasoning). Used by ``LocalAgent`` (eval, rollout) and by the trl-grpo trainer on the model it trains.

    temperature 0: greedy. max_new_tokens: per answer. max_episode_tokens: tokens after the prompt per episode
    (per segment where it has several; sampled and not); an episode that needs more stops as a failure (stop
    "max_tokens"). logprobs: keep each sampled token's log-probability (for the trainer), read from the sampling
    distribution as each token is drawn (``SampledLogprobs``: no per-step scores kept). generation_batch_size:
    episodes per ``generate`` (0: every open episode of the round at once). generate_kwargs: passed
    to every ``generate`` (the trainer's ``synced_gpus=False`` under ZeRO-3, where each process plays its own
    number of turns).

    It takes eleven parameters because the two callers (``LocalAgent`` and the trl-grpo trainer) set different
    ones of them, each a single setting of its own.
    """

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float = 0.0, top_p: float = 1.0,
                 max_new_tokens: int = MAX_NEW_TOKENS, max_episode_tokens: int | None = None,
                 chat_template_kwargs: dict[str, Any] | None = None, device: str | None = None,
                 logprobs: bool = False, generate_kwargs: dict[str, Any] | None = None,
                 generation_batch_size: int = 0) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.chat = ChatTokens(tokenizer, chat_template_kwargs)
        self.decode = answer_decoder(family_of(tokenizer.chat_template))  # as BFCL's handler of the family does
        self.temperature, self.top_p = temperature, top_p
        self.max_new_tokens, self.max_episode_tokens = max_new_tokens, max_episode_tokens
        self.device = device
        self.logprobs = logprobs
        self.generate_kwargs = dict(generate_kwargs or {})  # further arguments of every generate call
        if generation_batch_size < 0:
            raise ValueError(f"generation_batch_size must be >= 0, got {generation_batch_size}")
        self.generation_batch_size = generation_batch_size  # episodes per generate; 0: all open ones at once
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def _tokens(self, play: Any):
        tokens = play.state.get("tokens")
        if tokens is None:
            tokens = play.state["tokens"] = self.chat.start(play.messages, play.tools)
        else:
            self.chat.sync(tokens, play.messages, play.tools)
        return tokens

    def respond(self, plays: list[Any]) -> list[Any]:
        replies: list[Any] = [ModelReply(content=None) for _ in plays]
        rows, budgets = [], []
        for index, play in enumerate(plays):
            tokens = self._tokens(play)
            budget = self.max_new_tokens
            if self.max_episode_tokens is not None:
                budget = min(budget, self.max_episode_tokens - len(tokens.completion_ids))
                if budget <= 0:
                    play.stop(STOP_MAX_TOKENS, f"the episode needed more than max_completion_length="
                                               f"{self.max_episode_tokens} tokens")
                    continue
            rows.append(index)
            budgets.append(budget)
        if not rows:
            return replies
        size = self.generation_batch_size or len(rows)
        for first in range(0, len(rows), size):  # at most generation_batch_size episodes per generate
            self._answer(plays, rows[first:first + size], budgets[first:first + size], replies)
        return replies

    def _answer(self, plays: list[Any], rows: list[int], budgets: list[int], replies: list[Any]) -> None:
        """One ``generate`` for the episodes ``rows`` of ``plays``; their replies go into ``replies``."""
        import torch

        started = time.perf_counter()
        sequences = [plays[i].state["tokens"].ids for i in rows]
        width = max(len(ids) for ids in sequences)
        device = self.device or getattr(self.model, "device", "cpu")
        input_ids = torch.tensor([[self.pad_id] * (width - len(ids)) + ids for ids in sequences], device=device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in sequences], device=device)
        sampling: dict[str, Any] = {"do_sample": self.temperature > 0}
        recorder = SampledLogprobs(self.temperature, self.top_p) if self.logprobs else None
        if recorder is not None:  # the recorder applies temperature and top-p itself, then reads each drawn token
            sampling.update(recorder.neutral(), logits_processor=recorder.processors())
        elif self.temperature > 0:
            sampling.update(temperature=self.temperature, top_p=self.top_p, top_k=0)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                out = self.model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=max(budgets),
                                          pad_token_id=self.pad_id, eos_token_id=self.tokenizer.eos_token_id,
                                          return_dict_in_generate=True, **sampling, **self.generate_kwargs)
        finally:
            if was_training:
                self.model.train()
        generated = out.sequences[:, width:]
        chosen = recorder.finish(generated).tolist() if recorder is not None else None
        new = generated.tolist()
        latency = (time.perf_counter() - started) / len(rows)
        for position, (index, budget) in enumerate(zip(rows, budgets)):
            ids = new[position][:budget]
            if self.tokenizer.eos_token_id in ids:
                ids = ids[:ids.index(self.tokenizer.eos_token_id) + 1]
            logprobs = chosen[position][:len(ids)] if chosen is not None else None
            tokens = plays[index].state["tokens"]
            tokens.add(ids, sampled=True, logprobs=logprobs)
            text = self.tokenizer.decode([t for t in ids if t not in (self.tokenizer.eos_token_id, self.pad_id)],
                                         skip_special_tokens=False)
            reply = self.decode(text)
            reply.prompt_tokens, reply.completion_tokens, reply.latency_s = len(sequences[position]), len(ids), latency
            replies[index] = reply
