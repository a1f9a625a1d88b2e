"""An agent backed by any model litellm can call: a hosted API, a vLLM server, an OpenAI-compatible endpoint.

    agent = LiteLLMAgent(Endpoint("hosted_vllm/Qwen/Qwen3-8B", api_base="http://127.0.0.1:8000/v1"), temperature=0.9)
    rollout = agent.run(env, task_id, spec)

Tool calls are read from the response's ``tool_calls``; when there are none, ``<tool_call>{...}</tool_call>``
blocks in the text are read instead (a server started without a tool parser). Retries are ours, not the
client's: a retryable failure (timeout, connection error, 429, 5xx, a body that is not JSON) is tried again
up to ``CallSettings.retries`` times with exponential backoff; after that, and for any other failure, ``complete``
raises ``AgentFault`` and the driver records it on the rollout. ``complete_with_retries`` is that call and its
retries, for every litellm caller (this agent and the engine's ``LLMClient``).

litellm is imported on first use, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set first (unless the caller
set it) so that importing it does not reach the network for its price list.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from coevolve_engine.core.endpoint import CallSettings, Endpoint

from .base import Agent, AgentFault, AgentOptions, EpisodeLimits, ModelReply
from ..calls import ParsedCall, parse_arguments, parse_tool_call_text

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.registry import PluginContext


def import_litellm() -> Any:
    """litellm, imported offline-safe (local price map, no debug banners)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError('LiteLLMAgent needs litellm: pip install "coevolve-engine[agents]"') from exc
    litellm.suppress_debug_info = True
    return litellm


#: the longest wait between two attempts of a call, in seconds: the backoff doubles up to it, so many retries
#: keep trying once a minute instead of waiting for years
MAX_RETRY_WAIT_S = 60.0


def retry_wait(backoff_s: float, attempt: int) -> float:
    """Seconds to wait after failed attempt ``attempt`` (0-based): ``backoff_s`` doubled each time, at most
    ``MAX_RETRY_WAIT_S``."""
    return min(backoff_s * 2 ** min(attempt, 32), MAX_RETRY_WAIT_S)


def retryable_errors(litellm: Any) -> tuple[type[BaseException], ...]:
    """litellm's transport faults worth another attempt (timeouts, connection errors, 5xx, rate limits)."""
    names = (
        "Timeout",
        "APIConnectionError",
        "InternalServerError",
        "ServiceUnavailableError",
        "BadGatewayError",
        "RateLimitError",
    )
    return tuple(cls for name in names if isinstance(cls := getattr(litellm, name, None), type))


def completion_cost(litellm: Any, response: Any) -> float | None:
    """What litellm prices a response at, or None for a model it has no price for (a local server)."""
    try:
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # noqa: BLE001 - an unpriced model has no known cost
        return None


class BadResponse(Exception):
    """A response not worth keeping (no assistant message, not JSON data): retried as a transport fault is."""


class CallFailed(Exception):
    """A litellm call that gave no usable response: ``error`` is the last failure, ``attempts`` the calls made,
    ``retryable`` whether that failure was one worth trying again (so the retries ran out)."""

    def __init__(self, error: BaseException, attempts: int, retryable: bool) -> None:
        super().__init__(describe_failure(error))
        self.error, self.attempts, self.retryable = error, attempts, retryable


def describe_failure(error: BaseException) -> str:
    """One line for a failed call: the response's fault, or the error's type and (the start of) its message."""
    return str(error) if isinstance(error, BadResponse) else f"{type(error).__name__}: {str(error)[:500]}"


def transport(endpoint: Endpoint, calls: CallSettings) -> dict[str, Any]:
    """The fields of a ``litellm.completion`` request that say where it goes and how long one attempt may take;
    the OpenAI client's own retries are off, so that ours count and back off visibly."""
    return {**endpoint.request(), "timeout": calls.timeout, "max_retries": 0}


def complete_with_retries(litellm: Any, request: dict[str, Any], calls: CallSettings, *,
                          read: Callable[[Any], Any] | None = None,
                          on_failure: Callable[[BaseException, float], None] | None = None) -> tuple[Any, Any, int, float]:
    """``litellm.completion(**request)``, tried again after a retryable failure up to ``calls.retries`` more times,
    waiting ``retry_wait(calls.retry_backoff_s, attempt)`` in between.

    Retryable: litellm's transport faults (``retryable_errors``) and ``BadResponse``, which ``read`` (applied to
    each response; default: keep it as it is) raises for a response not worth keeping. Any other error ends the
    call at once. ``on_failure(error, seconds)`` hears of every failed attempt (e.g. to log it).
    Returns (what ``read`` made of the response, the raw response, the retries spent, the answered attempt's
    seconds); raises ``CallFailed``.
    """
    retryable = (*retryable_errors(litellm), BadResponse)
    attempts = calls.retries + 1
    for attempt in range(attempts):
        started = time.perf_counter()
        try:
            raw = litellm.completion(**request)
            answer = raw if read is None else read(raw)
        except Exception as exc:  # noqa: BLE001 - bad request, auth, unknown model...: not retried
            if on_failure is not None:
                on_failure(exc, time.perf_counter() - started)
            again = isinstance(exc, retryable)
            if not again or attempt + 1 == attempts:
                raise CallFailed(exc, attempt + 1, again) from exc
            time.sleep(retry_wait(calls.retry_backoff_s, attempt))
            continue
        return answer, raw, attempt, time.perf_counter() - started
    raise AssertionError("unreachable")  # pragma: no cover


UNNAMED_CALL = "unnamed_tool_call"


def wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat as sent to the server: unreadable tool calls made acceptable to strict servers.

    Arguments that are not a JSON object become "{}" and an empty function name becomes
    ``UNNAMED_CALL``. The recorded chat keeps what the model wrote; servers such as vLLM decode assistant
    arguments with ``json.loads`` and would reject the whole request. The model still sees its raw text
    in the error message answering that call.
    """
    wired: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and calls:
            fixed = []
            for call in calls:
                function = call["function"]
                raw = function.get("arguments")
                arguments, error = parse_arguments(raw)
                name = function.get("name") or UNNAMED_CALL
                wire_arguments = raw if error is None and isinstance(raw, str) else json.dumps(arguments or {})
                if (name, wire_arguments) != (function.get("name"), raw):
                    call = {**call, "function": {**function, "name": name, "arguments": wire_arguments}}
                fixed.append(call)
            message = {**message, "tool_calls": fixed}
        wired.append(message)
    return wired


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def parse_completion(response: Any, *, parse_text_tool_calls: bool = True) -> ModelReply:
    """A ModelReply from a chat-completion response; AgentFault when it has no assistant message."""
    choices = _field(response, "choices")
    if not choices:
        raise AgentFault(f"malformed response: no choices in {str(response)[:200]!r}")
    choice = choices[0]
    message = _field(choice, "message")
    if message is None:
        raise AgentFault(f"malformed response: choice has no message: {str(choice)[:200]!r}")
    content = _field(message, "content")
    if content is not None and not isinstance(content, str):
        content = str(content)
    calls: list[ParsedCall] = []
    for tool_call in _field(message, "tool_calls") or []:
        function = _field(tool_call, "function")
        name = _field(function, "name") if function is not None else None
        raw = _field(function, "arguments") if function is not None else None
        arguments, error = parse_arguments(raw)
        if not name:
            arguments, error = None, error or "tool call has no function name"
        calls.append(
            ParsedCall(
                name=name or "",
                arguments=arguments if error is None else None,
                raw_arguments=raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {}),
                call_id=_field(tool_call, "id"),
                error=error,
            )
        )
    if not calls and parse_text_tool_calls:
        content, calls = parse_tool_call_text(content)
    usage = _field(response, "usage")
    return ModelReply(
        content=content,
        calls=calls,
        prompt_tokens=_field(usage, "prompt_tokens") if usage is not None else None,
        completion_tokens=_field(usage, "completion_tokens") if usage is not None else None,
        finish_reason=_field(choice, "finish_reason"),
    )


class LiteLLMAgent(Agent):
    """Calls ``litellm.completion`` with the chat and the turn's tools.

    endpoint: the model and where it is served (``Endpoint``; a bare litellm model string such as
    "openai/..." or "anthropic/..." is served where its provider serves it).
    calls: timeout and retries of each call (``CallSettings``).
    temperature, max_tokens, seed: sampling; seed is sent only when set.
    limits: the episode's bounds (``EpisodeLimits``).
    system_prompt: put before the environment's own system prompt.
    policy: the name recorded on trajectories (default: the model string).
    cost_per_token: (input, output) USD per token, for models litellm has no price for (else cost is None).
    parse_text_tool_calls: read ``<tool_call>`` blocks from the text when the response has no tool_calls.
    completion_kwargs: anything else to pass to ``litellm.completion`` (e.g. ``extra_body``).

    It takes eleven parameters because, beyond the endpoint, the calls and the limits (one object each), every
    one is a single setting of its own a user names when building an agent by hand; ``load_agent`` builds it
    from ``AgentOptions``.
    """

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: "PluginContext") -> "LiteLLMAgent":
        o = AgentOptions(**options)
        extra = {"extra_body": {"chat_template_kwargs": o.chat_template_kwargs}} if o.chat_template_kwargs else None
        return cls(Endpoint(o.model, o.api_base, o.api_key), calls=CallSettings(o.timeout, o.retries),
                   temperature=o.temperature, max_tokens=o.max_tokens,
                   limits=EpisodeLimits(o.max_steps, o.max_model_calls_per_turn), policy=o.policy,
                   completion_kwargs=extra)

    def __init__(
        self,
        endpoint: Endpoint | str,
        *,
        calls: CallSettings = CallSettings(),
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
        limits: EpisodeLimits = EpisodeLimits(),
        system_prompt: str | None = None,
        policy: str | None = None,
        cost_per_token: tuple[float, float] | None = None,
        parse_text_tool_calls: bool = True,
        completion_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if importlib.util.find_spec("litellm") is None:
            raise ImportError('LiteLLMAgent needs litellm: pip install "coevolve-engine[agents]"')
        self.endpoint = Endpoint.of(endpoint)
        self.calls = calls
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.limits = limits
        self.system_prompt = system_prompt
        self.policy = policy or self.endpoint.model
        self.cost_per_token = cost_per_token
        self.parse_text_tool_calls = parse_text_tool_calls
        self.completion_kwargs = dict(completion_kwargs or {})

    @property
    def model(self) -> str:
        """The model's litellm string."""
        return self.endpoint.model

    def __repr__(self) -> str:
        return f"LiteLLMAgent({self.endpoint!r})"

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        request: dict[str, Any] = {
            **transport(self.endpoint, self.calls),
            "messages": wire_messages(messages),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if tools:
            request["tools"] = tools
        if self.seed is not None:
            request["seed"] = self.seed
        request.update(self.completion_kwargs)
        return request

    def _cost(self, litellm: Any, response: Any, reply: ModelReply) -> float | None:
        if self.cost_per_token is not None:
            input_cost, output_cost = self.cost_per_token
            return (reply.prompt_tokens or 0) * input_cost + (reply.completion_tokens or 0) * output_cost
        return completion_cost(litellm, response)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        litellm = import_litellm()
        request = self._request(messages, tools)
        started = time.perf_counter()
        try:
            response, _, retries, _ = complete_with_retries(litellm, request, self.calls)
        except CallFailed as failed:
            where = self.endpoint.where()
            tries = f" after {failed.attempts} attempt{'s' if failed.attempts != 1 else ''}"
            raise AgentFault(f"{where}{tries}: {failed}") from failed.error
        reply = parse_completion(response, parse_text_tool_calls=self.parse_text_tool_calls)
        reply.latency_s = time.perf_counter() - started
        reply.retries = retries
        reply.cost = self._cost(litellm, response, reply)
        return reply
