"""The episode driver every agent shares.

For each user turn: send the chat and the turn's tools to the model; if the answer has tool calls, run
each one in the episode, append the results and ask again; if it is plain text, that text ends the turn.
Then score the episode.

Decisions, in one place:

- An environment step is one tool call executed by the episode. ``limits.max_steps`` steps are allowed;
  a call beyond them ends the rollout as a failure (stop "max_steps", reward 0), before it runs.
- A turn may use ``limits.max_model_calls_per_turn`` model calls; needing more ends the rollout as a
  failure (stop "max_model_calls", reward 0).
- A tool call whose arguments cannot be parsed (bad JSON, not an object, a garbled ``<tool_call>``) is not
  executed and is not an action: the model gets a tool message starting with "Error:" that says what was
  wrong, and the turn goes on. It counts in ``tool_errors`` and in the turn's model calls, not in steps.
- A plain-text answer where tools were expected is a legitimate answer: it ends the turn and the
  environment's score judges it. It is not an error.
- A fault (``AgentFault`` from the model, an exception from the environment, which the contract says
  should not happen) ends the rollout with ``error`` naming what failed and where; reward 0, stop "error".
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..environments.base import Observation, ToolCall
from .base import AgentFault, ModelReply
from .rollout import STOP_DONE, STOP_ERROR, STOP_MAX_MODEL_CALLS, STOP_MAX_STEPS, Rollout
from .tool_parsing import ParsedCall

if TYPE_CHECKING:  # pragma: no cover
    from ..environments.base import Environment, Episode
    from .base import Agent


class _Stop(Exception):
    """Internal: the rollout ends early with this stop kind and reason."""

    def __init__(self, stop: str, reason: str, error: str | None = None) -> None:
        super().__init__(reason)
        self.stop, self.reason, self.error = stop, reason, error


def assistant_message(reply: ModelReply, call_ids: list[str]) -> dict[str, Any]:
    """The OpenAI-style assistant message for a reply; arguments are kept as the model wrote them."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.raw_arguments}}
            for call, call_id in zip(reply.calls, call_ids)
        ]
    return message


def tool_message(call: ParsedCall, call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": call.name, "content": content}


def render_observation(observation: Observation) -> str:
    """What the model reads back from a call: the content, or "Error: ..." when the call failed."""
    if observation.error is None:
        return observation.content
    return f"Error: {observation.error}" + (f"\n{observation.content}" if observation.content else "")


def _call_ids(reply: ModelReply, model_call: int) -> list[str]:
    """The model's ids where given and unique, else ids made from the call's position."""
    ids: list[str] = []
    for i, call in enumerate(reply.calls):
        call_id = call.call_id or f"call_{model_call}_{i}"
        ids.append(call_id if call_id not in ids else f"call_{model_call}_{i}")
    return ids


def _env(what: str, fn: Any, *args: Any) -> Any:
    """Call the environment; an exception becomes a fault naming the operation."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - any environment failure ends this rollout only
        raise _Stop(
            STOP_ERROR, f"environment failed in {what}", f"environment {what} raised {type(exc).__name__}: {exc}"
        )


def _play(episode: "Episode", agent: "Agent", rollout: Rollout) -> None:
    limits = agent.limits
    messages = rollout.messages
    prompts = [p for p in (agent.system_prompt, _env("system_prompt()", episode.system_prompt)) if p]
    if prompts:
        messages.append({"role": "system", "content": "\n\n".join(prompts)})
    turn = 0
    while (user := _env("next_turn()", episode.next_turn)) is not None:
        turn += 1
        messages.append({"role": "user", "content": user})
        tools = _env("tools()", episode.tools)
        for _ in range(limits.max_model_calls_per_turn):
            model_call = rollout.usage.llm_calls + 1
            try:
                reply = agent.complete(messages, tools)
            except AgentFault as exc:
                raise _Stop(STOP_ERROR, "model call failed", f"model call {model_call} (turn {turn}): {exc}")
            except Exception as exc:  # noqa: BLE001 - a bug in the agent still ends only this rollout
                raise _Stop(
                    STOP_ERROR,
                    "model call failed",
                    f"model call {model_call} (turn {turn}): {type(agent).__name__}.complete raised "
                    f"{type(exc).__name__}: {exc}",
                )
            rollout.usage.add(reply.prompt_tokens, reply.completion_tokens, reply.cost, reply.latency_s, reply.retries)
            call_ids = _call_ids(reply, model_call)
            messages.append(assistant_message(reply, call_ids))
            if not reply.calls:
                _env("end_turn()", episode.end_turn, reply.content)
                break
            for call, call_id in zip(reply.calls, call_ids):
                if call.error is not None or call.arguments is None:
                    rollout.tool_errors += 1
                    messages.append(tool_message(call, call_id, f"Error: {call.error}"))
                    continue
                if rollout.env_steps >= limits.max_steps:
                    raise _Stop(STOP_MAX_STEPS, f"exceeded max_steps={limits.max_steps} environment steps")
                rollout.env_steps += 1
                observation = _env(
                    f"execute({call.name!r})", episode.execute, ToolCall(call.name, call.arguments, call_id)
                )
                rollout.actions.append({"name": call.name, "arguments": call.arguments})
                if observation.error is not None:
                    rollout.tool_errors += 1
                messages.append(tool_message(call, call_id, render_observation(observation)))
        else:
            raise _Stop(
                STOP_MAX_MODEL_CALLS,
                f"turn {turn} needed more than max_model_calls_per_turn={limits.max_model_calls_per_turn} model calls",
            )
    score = _env("score()", episode.score)
    rollout.reward, rollout.success, rollout.reason = float(score.reward), bool(score.success), score.reason


def run_episode(episode: "Episode", agent: "Agent", *, task_id: str | None = None) -> Rollout:
    """Play ``episode`` with ``agent`` to the end. Never raises for this rollout's faults (see module doc)."""
    started = time.perf_counter()
    rollout = Rollout(task_id=task_id or getattr(episode, "task_id", "") or "", policy=agent.policy)
    try:
        _play(episode, agent, rollout)
        rollout.stop = STOP_DONE
    except _Stop as stop:
        rollout.stop, rollout.error = stop.stop, stop.error
        rollout.reward, rollout.success = 0.0, False
        rollout.reason = stop.reason if stop.error is None else f"{stop.reason}: {stop.error}"
    except Exception as exc:  # noqa: BLE001 - last resort (e.g. a reply with nonsense usage): this rollout only
        rollout.stop, rollout.reward, rollout.success = STOP_ERROR, 0.0, False
        rollout.error = f"episode driver failed: {type(exc).__name__}: {exc}"
        rollout.reason = rollout.error
    finally:
        try:
            episode.close()
        except Exception as exc:  # noqa: BLE001
            if rollout.error is None:
                rollout.error = f"environment close() raised {type(exc).__name__}: {exc}"
        rollout.duration_s = time.perf_counter() - started
    return rollout


def run_task(env: "Environment", task_id: str, spec: dict[str, Any], agent: "Agent") -> Rollout:
    """Start a fresh episode of one task and play it; a task that cannot start is a rollout with an error."""
    started = time.perf_counter()
    try:
        episode = env.start(task_id, spec)
    except Exception as exc:  # noqa: BLE001 - SpecError or an environment bug: this rollout only
        error = f"environment start({task_id!r}) raised {type(exc).__name__}: {exc}"
        return Rollout(
            task_id=task_id,
            policy=agent.policy,
            stop=STOP_ERROR,
            error=error,
            reason=f"episode could not start: {error}",
            duration_s=time.perf_counter() - started,
        )
    return run_episode(episode, agent, task_id=task_id)
