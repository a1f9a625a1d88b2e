"""The scripted server itself, over plain HTTP (no litellm)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from scripted_server import bad_arguments, http_error, malformed_body, text, tool_calls


def post(server, body, path="/v1/chat/completions"):
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_steps_are_answered_in_order_and_requests_recorded(scripted_server):
    scripted_server.play(
        [
            tool_calls(("add", {"amount": 2}), usage=(5, 3)),
            bad_arguments("add", "{oops"),
            text("hi"),
            malformed_body("{not json"),
            http_error(503, "busy"),
        ]
    )
    body = {"model": "scripted", "messages": [{"role": "user", "content": "go"}]}
    status, first = post(scripted_server, body)
    first = json.loads(first)
    assert status == 200 and first["object"] == "chat.completion"
    assert first["choices"][0]["message"]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"amount": 2}'}
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert first["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    second = json.loads(post(scripted_server, body, "/chat/completions")[1])
    assert second["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == "{oops"
    assert json.loads(post(scripted_server, body)[1])["choices"][0]["message"]["content"] == "hi"
    assert post(scripted_server, body) == (200, "{not json")
    status, error = post(scripted_server, body)
    assert status == 503 and json.loads(error)["error"]["message"] == "busy"
    status, error = post(scripted_server, body)
    assert status == 500 and "script exhausted" in error and scripted_server.exhausted
    assert len(scripted_server.requests) == 6 and scripted_server.requests[0] == body
    assert scripted_server.paths[1] == "/chat/completions"


def test_a_responder_answers_from_the_request(scripted_server):
    scripted_server.respond_with(lambda request: text(request["messages"][-1]["content"].upper()))
    _, answer = post(scripted_server, {"messages": [{"role": "user", "content": "echo"}]})
    assert json.loads(answer)["choices"][0]["message"]["content"] == "ECHO"


def test_unknown_routes_are_404(scripted_server):
    assert post(scripted_server, {}, "/v1/embeddings")[0] == 404
