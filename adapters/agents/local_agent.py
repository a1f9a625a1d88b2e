"""An agent that runs a ``transformers`` causal LM from a local path, in process.

    agent = LocalAgent("/models/qwen3-0.6b", temperature=0.0, max_new_tokens=256)
    rollout = agent.run(env, task_id, spec)

The chat and the turn's tools go through the tokenizer's chat template (``apply_chat_template(...,
tools=...)``); the model's text is read for Qwen / Hermes ``<tool_call>{"name": ..., "arguments": ...}
</tool_call>`` blocks. The model loads on first use. Generation holds a lock, so one agent shared by
several rollout threads generates one reply at a time.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path
from typing import Any

from .base import Agent, AgentFault, EpisodeLimits, ModelReply
from .tool_parsing import parse_tool_call_text


class LocalAgent(Agent):
    """A local Hugging Face causal LM as a policy.

    path: a directory holding the model and a tokenizer with a chat template that renders tools.
    temperature: 0 means greedy decoding; above 0 samples (with top_p).
    max_new_tokens: per reply. device, torch_dtype: where and how to load the model ("cpu", "auto", ...).
    seed: seeds torch once at load, for repeatable sampling.
    chat_template_kwargs: extra template variables (e.g. {"enable_thinking": False} for Qwen3).
    max_steps, max_model_calls_per_turn: episode bounds (see EpisodeLimits).
    policy: the name recorded on trajectories (default: the path).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 256,
        device: str = "cpu",
        torch_dtype: str | None = None,
        seed: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        max_steps: int = 30,
        max_model_calls_per_turn: int = 10,
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

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        """The prompt text the model sees for this chat and these tools."""
        _, tokenizer = self.load()
        return tokenizer.apply_chat_template(
            messages,
            tools=tools or None,
            add_generation_prompt=True,
            tokenize=False,
            **self.chat_template_kwargs,
        )

    def _stop_texts(self, tokenizer: Any) -> list[str]:
        return [t for t in {tokenizer.eos_token, tokenizer.pad_token} if t]

    def generate(self, prompt: str) -> tuple[str, int, int]:
        """(reply text, prompt tokens, completion tokens) for a rendered prompt."""
        import torch

        model, tokenizer = self.load()
        inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(self.device)
        sampling: dict[str, Any] = {"do_sample": self.temperature > 0}
        if self.temperature > 0:
            sampling.update(temperature=self.temperature, top_p=self.top_p)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=self.max_new_tokens, pad_token_id=pad_id, **sampling)
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = output[0, prompt_len:]
        text = tokenizer.decode(new_tokens, skip_special_tokens=False)
        for stop in self._stop_texts(tokenizer):  # cut at the end-of-turn token; keep <tool_call> tags
            text = text.split(stop)[0]
        return text, int(prompt_len), int(new_tokens.shape[0])

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        started = time.perf_counter()
        try:
            with self._lock:
                prompt = self.render(messages, tools)
                text, prompt_tokens, completion_tokens = self.generate(prompt)
        except (ImportError, FileNotFoundError, OSError, ValueError, RuntimeError) as exc:
            raise AgentFault(f"local model {self.path}: {type(exc).__name__}: {exc}") from exc
        content, calls = parse_tool_call_text(text)
        return ModelReply(
            content=content,
            calls=calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=None,  # no price for a local model
            latency_s=time.perf_counter() - started,
        )
