"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests.

It speaks real HTTP, so agents reach it through litellm exactly as they would reach vLLM::

    server = ScriptedServer().start()
    server.play([tool_calls(("add", {"amount": 2})), text("done")])
    litellm.completion(model="openai/scripted", api_base=server.api_base, api_key="dummy", ...)
    server.requests[0]["messages"]    # what the client sent
    server.stop()

Each POST to ``/v1/chat/completions`` (or ``/chat/completions``) takes the next step of the script. A step
is one of the ``Step`` values built by the helpers below, or a function of the request body that returns
one (so concurrent clients can be answered by what they sent, not by arrival order). A server can also be
given a single ``responder`` function that answers every request. When the script runs out the server
answers HTTP 500 with "script exhausted" and sets ``exhausted``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

from coevolve_engine.core.endpoint import Endpoint

MAX_HANG_S = 10.0  # a hang never holds a server thread longer than this


@dataclass(frozen=True)
class Step:
    """One scripted answer.

    kind: "tool_calls" | "text" | "malformed_body" | "http_error" | "hang".
    tool_calls: (name, arguments) pairs; arguments is a dict (sent as JSON) or a raw string (sent verbatim,
    so it may be invalid JSON).
    """

    kind: str
    content: str | None = None
    tool_calls: tuple[tuple[str, Any], ...] = ()
    status: int = 200
    body: str | None = None
    seconds: float = 0.0
    usage: tuple[int, int] | None = None  # (prompt_tokens, completion_tokens); derived from sizes if None


Responder = Callable[[dict[str, Any]], Step]
ScriptItem = Union[Step, Responder]


def text(content: str, *, usage: tuple[int, int] | None = None) -> Step:
    """A plain assistant reply with no tool calls."""
    return Step("text", content=content, usage=usage)


def tool_calls(*calls: tuple[str, Any], content: str | None = None, usage: tuple[int, int] | None = None) -> Step:
    """An assistant reply carrying OpenAI ``tool_calls``; each call is (name, arguments dict or raw string)."""
    return Step("tool_calls", content=content, tool_calls=tuple(calls), usage=usage)


def bad_arguments(name: str, raw: str = '{"amount": 2') -> Step:
    """A tool call whose ``arguments`` string is not valid JSON."""
    return Step("tool_calls", tool_calls=((name, raw),))


def malformed_body(body: str = '{"id": "chatcmpl-x", "choices": [') -> Step:
    """HTTP 200 with a body that is not JSON."""
    return Step("malformed_body", body=body)


def http_error(status: int = 500, message: str = "scripted failure") -> Step:
    """An HTTP error with an OpenAI-style error body."""
    return Step("http_error", status=status, body=message)


def hang(seconds: float, then: str = "too late") -> Step:
    """Sleep (bounded by MAX_HANG_S) before answering with plain text: a client with a shorter timeout gives up."""
    return Step("hang", seconds=min(seconds, MAX_HANG_S), content=then)


def _approx_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


def completion_body(step: Step, request: dict[str, Any], index: int) -> dict[str, Any]:
    """The OpenAI chat.completion object for a text or tool-call step."""
    message: dict[str, Any] = {"role": "assistant", "content": step.content}
    finish_reason = "stop"
    if step.kind == "tool_calls":
        message["tool_calls"] = [
            {
                "id": f"call_{index}_{i}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for i, (name, arguments) in enumerate(step.tool_calls)
        ]
        finish_reason = "tool_calls"
    if step.usage is not None:
        prompt_tokens, completion_tokens = step.usage
    else:
        prompt_tokens = _approx_tokens(request.get("messages", []))
        completion_tokens = _approx_tokens(message)
    return {
        "id": f"chatcmpl-scripted-{index}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass
class ScriptedServer:
    """A threaded HTTP server answering chat completions from a script; see the module docstring."""

    host: str = "127.0.0.1"
    script: list[ScriptItem] = field(default_factory=list)
    responder: Responder | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)  # bodies received, in arrival order
    paths: list[str] = field(default_factory=list)
    usage_sent: list[tuple[int, int]] = field(default_factory=list)  # (prompt, completion) of each answer
    exhausted: bool = False

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------------------

    def start(self) -> "ScriptedServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                server._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/").endswith("/models"):
                    server._send_json(self, 200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    server._send_json(self, 404, {"error": {"message": f"no route {self.path}"}})

        httpd = ThreadingHTTPServer((self.host, 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a hanging handler must not hold up stop()
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="scripted-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def endpoint(self, model: str = "openai/scripted") -> Endpoint:
        """``model`` served here (with the dummy key the OpenAI client wants)."""
        return Endpoint(model, self.api_base, "dummy")

    def play(self, steps: list[ScriptItem]) -> "ScriptedServer":
        """Replace the script (and forget earlier requests)."""
        with self._lock:
            self.script = list(steps)
            self.requests.clear()
            self.paths.clear()
            self.usage_sent.clear()
            self.exhausted = False
        return self

    def respond_with(self, responder: Responder) -> "ScriptedServer":
        """Answer every request with ``responder(request_body)``; the script is ignored."""
        with self._lock:
            self.responder = responder
        return self

    # -- serving -------------------------------------------------------------------------------------

    def _next_step(self, request: dict[str, Any]) -> tuple[Step | None, int]:
        with self._lock:
            self.requests.append(request)
            index = len(self.requests) - 1
            if self.responder is not None:
                item: ScriptItem | None = self.responder
            elif self.script:
                item = self.script.pop(0)
            else:
                self.exhausted = True
                item = None
        if item is not None and not isinstance(item, Step):
            item = item(request)
        return item, index

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?")[0].rstrip("/")
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(handler, 404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        try:
            request = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(handler, 400, {"error": {"message": "request body is not JSON"}})
            return
        with self._lock:
            self.paths.append(path)
        step, index = self._next_step(request)
        if step is None:
            self._send_json(handler, 500, {"error": {"message": "script exhausted", "type": "server_error"}})
        elif step.kind == "http_error":
            self._send_json(handler, step.status, {"error": {"message": step.body, "type": "server_error"}})
        elif step.kind == "malformed_body":
            self._send_raw(handler, 200, (step.body or "").encode())
        else:
            if step.kind == "hang":
                time.sleep(step.seconds)
                step = Step("text", content=step.content)
            body = completion_body(step, request, index)
            with self._lock:
                usage = body["usage"]
                self.usage_sent.append((usage["prompt_tokens"], usage["completion_tokens"]))
            self._send_json(handler, 200, body)

    @staticmethod
    def _send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        ScriptedServer._send_raw(handler, status, json.dumps(payload).encode())

    @staticmethod
    def _send_raw(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer
