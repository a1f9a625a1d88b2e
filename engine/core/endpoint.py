"""How a model is reached: the endpoint a call goes to and the settings every call is made with.

    from coevolve_engine.core.endpoint import CallSettings, Endpoint
    judge = Endpoint("hosted_vllm/Qwen/Qwen3-32B", api_base="http://127.0.0.1:8000/v1", api_key="none")
    client = LLMClient("coevolve.duckdb", judge, calls=CallSettings(timeout=30, retries=0))

Every caller of a model (the engine's ``LLMClient``, the ``LiteLLMAgent``, the synthesizers and the bootstrap
built on them) takes one ``Endpoint`` per model and one ``CallSettings``, never the model, server and key as
separate arguments. A run's ``[models]`` table is read into endpoints by ``ModelEndpoint.connect``, which takes
the key from the environment variable the config names, so a key is never written in a config or the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping


@dataclass(frozen=True)
class Endpoint:
    """One model and where it is served: a litellm model string, the base URL of its OpenAI-compatible server
    (None: the provider's default) and its key (None: the provider's usual variable, e.g. OPENAI_API_KEY).
    The key is left out of ``repr`` so that it is never printed or logged."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"model must be a litellm model string such as 'openai/gpt-4o-mini', got {self.model!r}")

    @classmethod
    def of(cls, model: "Endpoint | str") -> "Endpoint":
        """``model`` as an endpoint: a bare model string is served where its provider serves it."""
        return model if isinstance(model, Endpoint) else cls(model)

    def where(self) -> str:
        """The model and, when set, its server, for messages ('openai/x at http://127.0.0.1:8000/v1')."""
        return self.model + (f" at {self.api_base}" if self.api_base else "")

    def request(self) -> dict[str, Any]:
        """The fields of a ``litellm.completion`` request that say where it goes: the model, and the server and
        key when they are set."""
        where: dict[str, Any] = {"model": self.model}
        if self.api_base is not None:
            where["api_base"] = self.api_base
        if self.api_key is not None:
            where["api_key"] = self.api_key
        return where


@dataclass(frozen=True)
class CallSettings:
    """How each call to a model is made: ``timeout`` seconds per HTTP attempt; ``retries`` extra attempts after a
    transport fault (a timeout, a connection error, 429, 5xx, a body that is not JSON); ``retry_backoff_s`` the
    first wait between attempts, doubled each time up to a minute."""

    timeout: float = 60.0
    retries: int = 2
    retry_backoff_s: float = 1.0

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if not self.retry_backoff_s >= 0:
            raise ValueError(f"retry_backoff_s must be >= 0 seconds, got {self.retry_backoff_s}")


def call_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with the ``CallSettings`` fields a config names (``timeout``, ``retries``, ...) read into one
    ``calls``."""
    keys = {f.name for f in fields(CallSettings)}
    named = {key: options[key] for key in keys if key in options}
    rest = {key: value for key, value in options.items() if key not in keys}
    if named:
        rest["calls"] = replace(rest.get("calls", CallSettings()), **named)
    return rest
