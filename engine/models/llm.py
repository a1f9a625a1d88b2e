"""LLM calls for the engine's own work (pattern summaries, exploration, judging), logged and cached in the store.

    client = LLMClient("coevolve.duckdb", Endpoint("openai/gpt-4o-mini"))
    result = client.complete("summary", "summary@1", messages, json_schema=SUMMARY_SCHEMA)
    result.data          # the validated JSON object

Every request the client makes or answers is one row of ``llm_calls``: what it was for, the prompt version,
the request (model, messages, tools, sampling parameters) and its sha256, the response, tokens, cost, latency,
the error if any, and whether it was answered from the table. The store is opened for each write only, never
held during an HTTP call, so ``coevolve-engine query`` can read it meanwhile.

Cache: a request identical to one that earlier got a response (same ``request_hash``) is answered from the
table and logged again with ``cached = true`` and no tokens or cost, so a rerun is reproducible and free.

Two kinds of retry, both logged call by call:

- transport faults (timeout, connection error, 429, 5xx, a body that is not JSON) are retried
  ``CallSettings.retries`` times with exponential backoff, then ``LLMError`` names the cause;
- with ``json_schema``, an answer that is not a JSON object (bare, or in a ```json fence) or does not match the
  schema is shown back to the model with the problem, up to ``max_attempts`` answers, then ``LLMError`` says
  what was wrong with the last one. A rejected answer still counts as a successful call in ``llm_calls``
  (``error`` is for calls that got no response); the rejection is the next request's last message.

Model output is parsed as JSON and nothing else: it is never evaluated.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from coevolve_engine.adapters.agents.litellm_agent import (BadResponse, CallFailed, complete_with_retries,
                                                         completion_cost, describe_failure, import_litellm,
                                                         transport)
from coevolve_engine.core.endpoint import CallSettings, Endpoint
from coevolve_engine.core.ids import canonical_json  # the request hash's input: one text per value
from coevolve_engine.core.json_input import read_json
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.store import DEFAULT_WAIT_SECONDS, Store

DEFAULT_MAX_ATTEMPTS = 3


class LLMError(CoevolveError):
    """An LLM request gave no usable answer: a transport fault after its retries, or answers that never
    matched the schema. ``usage`` counts the calls spent on it."""

    def __init__(self, message: str, *, usage: "LLMUsage | None" = None) -> None:
        super().__init__(message)
        self.usage = usage or LLMUsage()


@dataclass
class LLMUsage:
    """What some LLM work cost. ``requests`` went over the network; ``cached`` were answered from llm_calls.

    ``cost`` adds up the calls litellm could price; ``unpriced`` counts answered calls it could not (a local
    server), whose cost is unknown rather than zero.
    """

    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    latency_s: float = 0.0

    def add(self, other: "LLMUsage") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class LLMResult:
    """The accepted answer of ``LLMClient.complete``.

    text: the assistant's text (None when it only called tools). message: the assistant message as a dict.
    data: the validated JSON object when a schema was given. call_id: its llm_calls row. cached: whether
    that answer came from the table. attempts: answers it took (schema retries included). usage: all calls.
    """

    text: str | None
    message: dict[str, Any]
    data: dict[str, Any] | None
    call_id: int
    cached: bool
    attempts: int
    usage: LLMUsage = field(default_factory=LLMUsage)


def request_hash(request: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(request).encode("utf-8")).hexdigest()


# -- reading JSON answers ---------------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


def parse_json_answer(text: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(the JSON object in an answer, None) or (None, what is wrong). The object may stand alone or sit in a
    ```json fence; a leading <think>...</think> block is ignored. Nothing is evaluated."""
    if text is None or not text.strip():
        return None, "the answer is empty; expected a JSON object"
    body = _THINK.sub("", text).strip()
    candidates = [body] + [m.group(1).strip() for m in _FENCE.finditer(body)]
    first_error = None
    for candidate in candidates:
        try:
            value = read_json(candidate)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"the answer is not valid JSON ({exc.msg} at line {exc.lineno} " \
                                         f"column {exc.colno})"
            continue
        if isinstance(value, dict):
            return value, None
        first_error = f"the answer is JSON but a {type(value).__name__}, not an object"
    return None, first_error


def schema_problem(value: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """What makes ``value`` fail ``schema`` (up to three problems, each with its place), or None."""
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: [str(p) for p in e.path])
    if not errors:
        return None
    described = []
    for error in errors[:3]:
        where = "/".join(str(p) for p in error.absolute_path)
        described.append(f"at {where!r}: {error.message}" if where else error.message)
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "the JSON object does not match the schema: " + "; ".join(described) + more


# -- the client ------------------------------------------------------------------------------------------


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else None


class LLMClient:
    """Calls one model through ``litellm.completion``, logging every call to ``llm_calls`` in ``store_path``.

    endpoint: the model and where it is served (``Endpoint``; a bare litellm model string such as "openai/..."
    is served where its provider serves it). Only the model is part of the request's hash; the server and the
    key are never written to the store.
    calls: timeout and retries of each call (``CallSettings``).
    temperature, max_tokens, seed: sampling; part of the request and so of its hash.
    cache: answer a request identical to an earlier answered one from the table.
    wait: seconds to wait for the store while another process holds it.
    completion_kwargs: anything else for ``litellm.completion`` (e.g. ``extra_body``); part of the hash.
    """

    def __init__(
        self,
        store_path: str | os.PathLike[str],
        endpoint: Endpoint | str,
        *,
        calls: CallSettings = CallSettings(),
        temperature: float = 0.0,
        max_tokens: int = 2048,
        seed: int | None = None,
        cache: bool = True,
        wait: float = DEFAULT_WAIT_SECONDS,
        completion_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.store_path = store_path
        self.endpoint = Endpoint.of(endpoint)
        self.calls = calls
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.cache = cache
        self.wait = wait
        self.completion_kwargs = dict(completion_kwargs or {})
        self.usage = LLMUsage()  # everything this client has spent

    @property
    def model(self) -> str:
        """The model's litellm string, as ``llm_calls.model`` records it."""
        return self.endpoint.model

    def __repr__(self) -> str:
        return f"LLMClient({self.endpoint!r}, cache={self.cache})"

    # -- public ------------------------------------------------------------------------------------------

    def complete(
        self,
        purpose: str,
        prompt_version: str | None,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        json_schema: dict[str, Any] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> LLMResult:
        """One answer to ``messages``; with ``json_schema``, a JSON object that matches it.

        purpose: what the call is for ('summary', 'exploration', ...). prompt_version: e.g. 'summary@1'.
        max_attempts: answers to ask for before giving up on the schema. Raises LLMError.
        """
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        if json_schema is not None:
            from jsonschema import Draft202012Validator

            Draft202012Validator.check_schema(json_schema)
        usage = LLMUsage()
        chat = list(messages)
        problem = None
        try:
            for attempt in range(1, max_attempts + 1):
                call_id, response, cached = self._answer(purpose, prompt_version, chat, tools, usage)
                message = response["choices"][0]["message"]
                text = message.get("content")
                if text is not None and not isinstance(text, str):  # content parts from some providers
                    text = json.dumps(text, ensure_ascii=False)
                if json_schema is None:
                    return LLMResult(text, message, None, call_id, cached, attempt, usage)
                data, problem = parse_json_answer(text)
                if data is not None:
                    problem = schema_problem(data, json_schema)
                if problem is None:
                    return LLMResult(text, message, data, call_id, cached, attempt, usage)
                chat = chat + [
                    {"role": "assistant", "content": text or ""},
                    {"role": "user", "content": f"Your answer was not accepted: {problem}. Answer again with "
                                                "only the corrected JSON object."},
                ]
        finally:
            self.usage.add(usage)
        raise LLMError(
            f"{purpose}: {self.endpoint.where()} gave no acceptable answer in {max_attempts} "
            f"attempt{'s' if max_attempts != 1 else ''}; the last one was rejected because {problem}",
            usage=usage,
        )

    # -- one request: from the cache, or over the network with transport retries --------------------------

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if tools:
            request["tools"] = tools
        if self.seed is not None:
            request["seed"] = self.seed
        request.update(self.completion_kwargs)
        return request

    def _answer(self, purpose, prompt_version, messages, tools, usage: LLMUsage) -> tuple[int, dict, bool]:
        """(call_id, response dict, cached) for one request; raises LLMError on a transport failure."""
        request = self._request(messages, tools)
        try:
            request_json = canonical_json(request)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the request for {purpose!r} is not JSON-serialisable: {exc}") from exc
        digest = hashlib.sha256(request_json.encode("utf-8")).hexdigest()
        row = dict(purpose=purpose, model=self.model, prompt_version=prompt_version, request_hash=digest,
                   request=request_json)
        if self.cache:
            hit = self._replay(row)
            if hit is not None:
                usage.cached += 1
                return hit[0], hit[1], True
        def failed(error: BaseException, latency: float) -> None:  # every failed attempt is a row of llm_calls
            usage.requests += 1
            usage.latency_s += latency
            self._log(row, response=None, tokens=(None, None), cost=None, latency=latency,
                      error=describe_failure(error))

        litellm = import_litellm()
        try:
            # the server, key and timeout reach litellm but neither the log nor the hash
            response, raw, _, latency = complete_with_retries(
                litellm, {**request, **transport(self.endpoint, self.calls)}, self.calls, read=_response_dict,
                on_failure=failed)
        except CallFailed as failure:
            tries = f"{failure.attempts} attempt{'s' if failure.attempts != 1 else ''}"
            raise LLMError(f"{purpose}: {self.endpoint.where()} failed after {tries}: {failure}",
                           usage=usage) from failure.error
        prompt_tokens, completion_tokens = _tokens(response)
        cost = completion_cost(litellm, raw)
        usage.requests += 1
        usage.prompt_tokens += prompt_tokens or 0
        usage.completion_tokens += completion_tokens or 0
        usage.latency_s += latency
        if cost is None:
            usage.unpriced += 1
        else:
            usage.cost += cost
        call_id = self._log(row, response=response, tokens=(prompt_tokens, completion_tokens), cost=cost,
                            latency=latency, error=None)
        return call_id, response, False

    # -- the table ------------------------------------------------------------------------------------

    _INSERT = (
        "INSERT INTO llm_calls (purpose, model, prompt_version, request_hash, request, response, prompt_tokens, "
        "completion_tokens, cost, latency_s, error, cached) VALUES ($purpose, $model, $prompt_version, "
        "$request_hash, $request, $response, $prompt_tokens, $completion_tokens, $cost, $latency_s, $error, "
        "$cached) RETURNING call_id"
    )

    def _log(self, row: dict[str, Any], *, response, tokens, cost, latency, error) -> int:
        with Store(self.store_path, wait=self.wait) as store:
            return store.execute(self._INSERT, {
                **row, "response": canonical_json(response) if response is not None else None,
                "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "cost": cost, "latency_s": latency,
                "error": error, "cached": False,
            }).fetchall()[0][0]

    def _replay(self, row: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """(new call_id, response) when an identical request was answered before; logs the cached answer."""
        started = time.perf_counter()
        with Store(self.store_path, wait=self.wait) as store:
            found = store.execute(
                "SELECT response FROM llm_calls WHERE request_hash = $h AND error IS NULL AND response IS NOT NULL "
                "ORDER BY call_id DESC LIMIT 1", {"h": row["request_hash"]},
            ).fetchall()
            if not found:
                return None
            response = json.loads(found[0][0])
            call_id = store.execute(self._INSERT, {
                **row, "response": found[0][0], "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0,
                "latency_s": time.perf_counter() - started, "error": None, "cached": True,
            }).fetchall()[0][0]
        return call_id, response


def _response_dict(raw: Any) -> dict[str, Any]:
    """The response as plain JSON data; ``BadResponse`` (retried) when it carries no assistant message."""
    try:
        response = raw.model_dump(mode="json") if hasattr(raw, "model_dump") else json.loads(json.dumps(raw))
    except (TypeError, ValueError) as exc:
        raise BadResponse(f"malformed response: {exc}") from exc
    choices = _field(response, "choices")
    message = _field(choices[0], "message") if isinstance(choices, list) and choices else None
    if not isinstance(message, dict):
        raise BadResponse(f"malformed response: no assistant message in {str(response)[:300]!r}")
    return response


def _tokens(response: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = _field(response, "usage") or {}
    return _field(usage, "prompt_tokens"), _field(usage, "completion_tokens")
