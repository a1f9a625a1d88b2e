"""Our environments as TRL ``environment_factory`` environments.

TRL (``GRPOTrainer(environment_factory=...)``) makes one instance per rollout, calls ``reset(**row)`` with the
dataset row, exposes the instance's public methods to the model as tools (their JSON schemas come from the
methods' signatures and Google-style docstrings), runs the tool calls it parses from the completion, and calls
``get_reward()`` once the rollout is over.

Tools differ per task (a BFCL task declares its API classes), while TRL reads an environment's tools from its
class once. So we build one class per distinct tool set, from the OpenAI tool schemas an episode shows the agent,
and pass TRL the ``{tool set name: class}`` mapping; each dataset row names its tool set in ``environment``.
Every generated method just forwards its keyword arguments to ``Episode.execute``: the episode checks and runs
the call, exactly as it does for any other agent, so nothing the model writes is evaluated.

TRL plays one user turn per rollout (it cannot inject a later user message). A task with several user turns is
therefore played and scored on its first turn: the episode is started on ``first_turn_spec(spec)``, the task cut
to its first turn, and scored by the environment's own checker.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import time
from typing import Any, Callable

from coevolve_engine.adapters.agents.rollout import STOP_DONE, Rollout
from coevolve_engine.adapters.environments.base import Environment, Episode, Score, ToolCall

# JSON-schema types -> the Python hints transformers turns back into the same JSON-schema types.
_HINTS: dict[str, Any] = {
    "string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict,
}


def first_turn_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A multi-turn spec cut to its first user turn (ground truth and held-out tools cut to match)."""
    if len(spec.get("turns", [])) <= 1:
        return spec
    cut = dict(spec, turns=spec["turns"][:1])
    if isinstance(spec.get("ground_truth"), list) and spec.get("kind") == "multi_turn":
        cut["ground_truth"] = spec["ground_truth"][:1]
    if isinstance(spec.get("missed_function"), dict):
        cut["missed_function"] = {turn: names for turn, names in spec["missed_function"].items() if turn == "0"}
    return cut


def tool_set_name(tools: list[dict[str, Any]]) -> str:
    """A stable name for a set of tool schemas: how many, and a hash of their content."""
    digest = hashlib.sha256(json.dumps(tools, sort_keys=True).encode()).hexdigest()[:10]
    return f"tools-{len(tools)}-{digest}"


def _one_line(text: Any) -> str:
    text = re.sub(r"\s+", " ", str(text or "")).strip()
    # transformers parses "(choices: [...])" at the end of an argument line as an enum; keep text as text.
    return text.replace("(choices:", "(one of:") or "no description"


def _tool_method(schema: dict[str, Any]) -> Callable[..., str]:
    """A method named after the tool, with a signature and docstring describing its parameters."""
    function = schema["function"]
    name = function["name"]
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])

    def tool(self, **arguments: Any) -> str:
        return self._call(name, arguments)

    ordered = sorted(properties, key=lambda p: p not in required)  # required parameters first
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for param in ordered:
        hint = _HINTS.get((properties[param] or {}).get("type"), str)
        default = inspect.Parameter.empty if param in required else None
        params.append(inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        annotations[param] = hint
    annotations["return"] = str
    tool.__name__ = tool.__qualname__ = name
    tool.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    lines = [_one_line(function.get("description")), "", "Args:"]
    lines += [f"    {param}: {_one_line((properties[param] or {}).get('description'))}" for param in ordered]
    tool.__doc__ = "\n".join(lines) if ordered else lines[0]
    return tool


class EpisodeEnvironment:
    """Base of the generated classes: one episode of one task per ``reset``; tools are added per tool set."""

    environment: Environment  # set on each generated class

    def __init__(self) -> None:
        self._episode: Episode | None = None
        self._task_id = ""
        self._actions: list[dict[str, Any]] = []
        self._tool_errors = 0
        self._score: Score | None = None
        self._turns = (0, 0)
        self._started = 0.0

    def reset(self, **row: Any) -> None:
        """Start a fresh episode of the row's task (its first user turn is already the prompt)."""
        if self._episode is not None:
            self._episode.close()
        spec = row["spec"] if isinstance(row["spec"], dict) else json.loads(row["spec"])
        played = first_turn_spec(spec)
        self._task_id = row["task_id"]
        self._episode = self.environment.start(self._task_id, played)
        self._episode.next_turn()
        self._actions, self._tool_errors, self._score = [], 0, None
        self._turns = (len(played.get("turns", [])), len(spec.get("turns", [])))
        self._started = time.perf_counter()
        return None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._episode is None:
            return "Error: no episode in progress"
        observation = self._episode.execute(ToolCall(name, dict(arguments)))
        self._actions.append({"name": name, "arguments": dict(arguments)})
        if observation.error is not None:
            self._tool_errors += 1
        return observation.content

    def get_reward(self) -> float:
        """The episode's score once the rollout is over (the turn is ended with no further reply)."""
        return self._finish().reward

    def _finish(self, reply: str | None = None) -> Score:
        if self._score is None:
            if self._episode is None:
                raise RuntimeError("get_reward() before reset(): no episode to score")
            self._episode.end_turn(reply)
            self._score = self._episode.score()
        return self._score

    def _rollout(self, messages: list[dict[str, Any]], policy: str, sample_index: int) -> Rollout:
        """What this rollout produced, as the engine records it."""
        score = self._finish()
        played, total = self._turns
        reason = score.reason if played == total else f"first of {total} turns played: {score.reason}"
        return Rollout(
            task_id=self._task_id, policy=policy, messages=messages, actions=list(self._actions),
            reward=score.reward, success=score.success, reason=reason, stop=STOP_DONE,
            env_steps=len(self._actions), tool_errors=self._tool_errors,
            duration_s=time.perf_counter() - self._started, sample_index=sample_index,
        )


def task_prompt(environment: Environment, task: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What a TRL rollout of ``task`` starts from: the prompt messages (the episode's system prompt, if any, and
    the first user message) and the OpenAI tool schemas the episode shows at that turn."""
    episode = environment.start(task["task_id"], first_turn_spec(task["spec"]))
    try:
        prompt = [{"role": "user", "content": episode.next_turn() or ""}]
        if system := episode.system_prompt():
            prompt.insert(0, {"role": "system", "content": system})
        tools = episode.tools()
    finally:
        episode.close()
    return prompt, tools


def trl_tool_schemas(environment_class: type[EpisodeEnvironment]) -> list[dict[str, Any]]:
    """The JSON schemas of the tools TRL shows for a generated class, in TRL's order: its public methods but
    ``reset`` and ``get_reward``, sorted by name, each through transformers' ``get_json_schema`` (what
    ``apply_chat_template`` does with a callable tool)."""
    from transformers.utils import get_json_schema

    instance = environment_class()
    return [get_json_schema(getattr(instance, name))
            for name, _ in inspect.getmembers(environment_class, predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def environment_classes(
    environment: Environment, tasks: list[dict[str, Any]]
) -> tuple[dict[str, type[EpisodeEnvironment]], dict[str, str]]:
    """One ``EpisodeEnvironment`` class per distinct tool set among ``tasks`` (shown at their first turn),
    and each task's tool set name."""
    classes: dict[str, type[EpisodeEnvironment]] = {}
    task_sets: dict[str, str] = {}
    for task in tasks:
        _, tools = task_prompt(environment, task)
        name = tool_set_name(tools)
        task_sets[task["task_id"]] = name
        if name not in classes:
            classes[name] = tool_set_class(environment, task["task_id"], tools)
    return classes, task_sets


def tool_set_class(environment: Environment, task_id: str, tools: list[dict[str, Any]]) -> type[EpisodeEnvironment]:
    """The ``EpisodeEnvironment`` class whose public methods are ``tools`` (the class TRL is given for that tool
    set); ``task_id`` names the task in the error when a tool name clashes with the class's own methods."""
    name = tool_set_name(tools)
    clashes = [t["function"]["name"] for t in tools
               if t["function"]["name"].startswith("_") or hasattr(EpisodeEnvironment, t["function"]["name"])]
    if clashes:
        raise ValueError(f"task {task_id}: tool names {clashes} clash with the environment's own methods")
    methods = {t["function"]["name"]: _tool_method(t) for t in tools}
    return type(f"Env_{name.replace('-', '_')}", (EpisodeEnvironment,), {"environment": environment, **methods})
