"""The episode player: the one way a task is played, wherever it is played.

Training rollouts (trl-grpo), SFT demonstrations, the run's eval phase, ``eval``, ``rollout`` and validation's
agent attempts all play a task through ``Play``: every user turn, the tools the episode itself shows
(``Episode.tools()``: for BFCL its shipped function docs, converted as BFCL converts them), one tool-call parser
(``adapters.calls``) and one set of limits (``EpisodeLimits``). The policy behind it is pluggable: anything with
``respond(plays) -> [ModelReply]`` (every ``Agent``: a litellm model answers one chat at a time, a local
transformers model answers a batch of episodes with one ``generate``, the trainer's model during training).

    plays = [Play(env.start(task_id, spec), task_id=task_id, policy=agent.policy, limits=agent.limits)
             for task_id, spec in tasks]
    play_all(plays, agent)                 # one respond() per round of model calls, across every open episode
    rollouts = [play.finish() for play in plays]

Rules, in one place (as BFCL's own multi-turn inference loop plays a task, ``inference_multi_turn_FC`` in
``bfcl_eval/model_handler/base_handler.py``; the reference test plays both side by side):

- For each user turn the model is asked again and again; an answer with tool calls runs them and asks again, an
  answer without tool calls ends the turn (its text is the turn's reply) and the next user message follows.
- An answer with a tool call that cannot be parsed (arguments that are not a JSON object, no function name) also
  ends the turn, as BFCL's decode failure does: none of its calls runs, no error is fed back, and the next user
  message follows. Each such call counts in ``tool_errors``. Which calls of an answer count is the decoder's: a
  served model's OpenAI tool calls as the FC loop reads them (``litellm_agent``), a token-level policy's text as
  BFCL's handler for its family does (``answer_format``: for Qwen, blocks that do not parse are dropped and the
  rest run; ``ModelReply.dropped_calls`` also count in ``tool_errors``).
- ``limits.max_model_calls_per_turn`` answers are allowed in a turn (BFCL: 21, its ``count > 20``); when the
  last one allowed calls tools, they run and the episode ends there (stop "max_model_calls"): a failure, unless
  that was the episode's last turn, which the environment then scores as played (BFCL's checker sees every
  turn of such an episode and scores it).
- An environment step is one tool call executed; ``limits.max_steps`` are allowed per episode (0, the default:
  no cap, as in BFCL); a call beyond them fails the task (stop "max_steps", reward 0) before it runs.
- A policy may stop an episode itself (``Play.stop``): e.g. the trainer's token budget ran out (stop
  "max_tokens", reward 0).
- A fault (``AgentFault`` from the model, an exception from the environment) ends the rollout with ``error``
  naming what failed and where; reward 0, stop "error".
- ``Rollout.turns`` is how many user turns were reached; ``Rollout.failed_turn`` the turn where the episode
  first failed (the environment's ``Score.failed_turn``, or the turn a limit or fault stopped it), None on success.
- ``Play.tools`` are the tools the episode shows at the current turn (BFCL's miss_func functions join at the
  turn that releases them): a served model gets them with every request, as BFCL's FC loop sends them; a
  token-level policy reads the newly released ones in that turn's user message (``chat_tokens``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from coevolve_engine.core.environment import Observation, ToolCall
from .rules import AgentFault, EpisodeLimits, ModelReply
from coevolve_engine.core.rollout import STOP_DONE, STOP_ERROR, STOP_MAX_MODEL_CALLS, STOP_MAX_STEPS, Rollout

if TYPE_CHECKING:  # pragma: no cover
    from ..calls import ParsedCall
    from coevolve_engine.core.environment import Environment, Episode


def assistant_message(reply: ModelReply, call_ids: list[str]) -> dict[str, Any]:
    """The OpenAI-style assistant message for a reply; arguments are kept as the model wrote them."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.raw_arguments}}
            for call, call_id in zip(reply.calls, call_ids)
        ]
    return message


def tool_message(call: "ParsedCall", call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": call.name, "content": content}


def render_observation(observation: Observation) -> str:
    """What the model reads back from a call: the content as the environment wrote it (BFCL's executor result,
    errors included, exactly as its loop feeds it back), or "Error: ..." for a failure that has no content."""
    if observation.content or observation.error is None:
        return observation.content
    return f"Error: {observation.error}"


def _call_ids(reply: ModelReply, model_call: int) -> list[str]:
    """The model's ids where given and unique, else ids made from the call's position."""
    ids: list[str] = []
    for i, call in enumerate(reply.calls):
        call_id = call.call_id or f"call_{model_call}_{i}"
        ids.append(call_id if call_id not in ids else f"call_{model_call}_{i}")
    return ids


class _Stop(Exception):
    """Internal: the rollout ends early with this stop kind and reason."""

    def __init__(self, stop: str, reason: str, error: str | None = None) -> None:
        super().__init__(reason)
        self.stop, self.reason, self.error = stop, reason, error


class Play:
    """One episode in progress: the chat so far, the tools shown now, and the rollout being recorded.

    ``messages`` is the chat the policy answers (system, user, assistant, tool, next user, ...); ``tools`` the
    schemas the episode shows at the current turn; ``done`` whether the episode is over. A policy may keep its
    own per-episode state in ``state`` (the trainer keeps the episode's token ids there).
    """

    def __init__(self, episode: "Episode", *, task_id: str | None = None, policy: str = "agent",
                 limits: EpisodeLimits | None = None, system_prompt: str | None = None) -> None:
        self.episode = episode
        self.limits = limits or EpisodeLimits()
        self.rollout = Rollout(task_id=task_id or getattr(episode, "task_id", "") or "", policy=policy)
        self.messages = self.rollout.messages
        self.tools: list[dict[str, Any]] = []
        self.state: dict[str, Any] = {}
        self.turn = 0
        self.answers_this_turn = 0
        self.done = False
        self._started = time.perf_counter()
        self._guard(self._open, system_prompt)

    # -- what the policy drives ---------------------------------------------------------------------------

    def answer(self, reply: ModelReply) -> None:
        """Play one model answer: run its tool calls, or end the turn and move on to the next user message."""
        if not self.done:
            self._guard(self._answer, reply)

    def fault(self, error: str) -> None:
        """The policy could not answer this episode (e.g. a model server error): the rollout ends with ``error``."""
        if not self.done:
            call = self.rollout.usage.llm_calls + 1
            self._end(_Stop(STOP_ERROR, "model call failed", f"model call {call} (turn {self.turn}): {error}"))

    def stop(self, stop: str, reason: str) -> None:
        """End the episode as a failure for a reason of the policy's (e.g. its token budget ran out)."""
        if not self.done:
            self._end(_Stop(stop, reason))

    def finish(self) -> Rollout:
        """The finished rollout (the episode is closed); call once ``done``."""
        if not self.done:
            raise RuntimeError(f"episode of {self.rollout.task_id} is not over")
        return self.rollout

    # -- the rules ------------------------------------------------------------------------------------------

    def _guard(self, step: Any, *args: Any) -> None:
        try:
            step(*args)
        except _Stop as stop:
            self._end(stop)
        except Exception as exc:  # noqa: BLE001 - last resort (e.g. a reply with nonsense usage): this rollout only
            self._end(_Stop(STOP_ERROR, "episode player failed",
                            f"episode player failed: {type(exc).__name__}: {exc}"))

    def _env(self, what: str, fn: Any, *args: Any) -> Any:
        """Call the environment; an exception becomes a fault naming the operation."""
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - any environment failure ends this rollout only
            raise _Stop(STOP_ERROR, "environment failed in " + what,
                        f"environment {what} raised {type(exc).__name__}: {exc}")

    def _open(self, system_prompt: str | None) -> None:
        prompts = [p for p in (system_prompt, self._env("system_prompt()", self.episode.system_prompt)) if p]
        if prompts:
            self.messages.append({"role": "system", "content": "\n\n".join(prompts)})
        self._next_turn()

    def _next_turn(self) -> None:
        user = self._env("next_turn()", self.episode.next_turn)
        if user is None:
            self._score()
            return
        self.turn += 1
        self.rollout.turns = self.turn
        self.answers_this_turn = 0
        self.messages.append({"role": "user", "content": user})
        self.tools = self._env("tools()", self.episode.tools)

    def _score(self, stop: str = STOP_DONE, prefix: str = "") -> None:
        score = self._env("score()", self.episode.score)
        rollout = self.rollout
        rollout.reward, rollout.success = float(score.reward), bool(score.success)
        rollout.reason = prefix + score.reason
        rollout.failed_turn = None if score.success else (score.failed_turn or self.turn or None)
        rollout.stop = stop
        self._close()

    def _answer(self, reply: ModelReply) -> None:
        rollout = self.rollout
        rollout.usage.add(reply.prompt_tokens, reply.completion_tokens, reply.cost, reply.latency_s, reply.retries)
        self.answers_this_turn += 1
        rollout.tool_errors += reply.dropped_calls
        call_ids = _call_ids(reply, rollout.usage.llm_calls)
        self.messages.append(assistant_message(reply, call_ids))
        malformed = sum(call.error is not None or call.arguments is None for call in reply.calls)
        if not reply.calls or malformed:  # no calls, or calls that do not decode: the turn is over
            rollout.tool_errors += malformed
            self._env("end_turn()", self.episode.end_turn, reply.content)
            self._next_turn()
            return
        for call, call_id in zip(reply.calls, call_ids):
            if self.limits.max_steps and rollout.env_steps >= self.limits.max_steps:
                raise _Stop(STOP_MAX_STEPS, f"exceeded max_steps={self.limits.max_steps} environment steps")
            rollout.env_steps += 1
            observation = self._env(f"execute({call.name!r})", self.episode.execute,
                                    ToolCall(call.name, call.arguments, call_id))
            rollout.actions.append({"name": call.name, "arguments": call.arguments})
            if observation.error is not None:
                rollout.tool_errors += 1
            self.messages.append(tool_message(call, call_id, render_observation(observation)))
        if self.answers_this_turn >= self.limits.max_model_calls_per_turn:
            reason = (f"turn {self.turn} needed more than max_model_calls_per_turn="
                      f"{self.limits.max_model_calls_per_turn} model calls")
            self._env("end_turn()", self.episode.end_turn, None)
            if self._env("next_turn()", self.episode.next_turn) is not None:
                raise _Stop(STOP_MAX_MODEL_CALLS, reason)
            self._score(STOP_MAX_MODEL_CALLS, f"{reason} in the last turn, scored as played: ")

    def _end(self, stop: _Stop) -> None:
        rollout = self.rollout
        rollout.stop, rollout.error = stop.stop, stop.error
        rollout.reward, rollout.success = 0.0, False
        rollout.reason = stop.reason if stop.error is None else f"{stop.reason}: {stop.error}"
        rollout.failed_turn = self.turn or 1
        self._close()

    def _close(self) -> None:
        self.done = True
        try:
            self.episode.close()
        except Exception as exc:  # noqa: BLE001
            if self.rollout.error is None:
                self.rollout.error = f"environment close() raised {type(exc).__name__}: {exc}"
        self.rollout.duration_s = time.perf_counter() - self._started


class Responder(Protocol):
    """What the player needs of an agent (every ``base.Agent`` is one): the policy id and limits it plays under,
    its system prompt, and one answer (or the exception that kept it from one) per open episode."""

    policy: str
    limits: EpisodeLimits
    system_prompt: str | None

    def respond(self, plays: list[Play]) -> list[ModelReply | Exception]: ...


def play_all(plays: Sequence[Play], agent: "Responder", *, batch_size: int | None = None) -> list[Rollout]:
    """Play every episode to its end: each round asks ``agent.respond`` for the open episodes (``batch_size`` at
    a time). Returns the rollouts in order; never raises for one episode's faults."""
    while active := [play for play in plays if not play.done]:
        size = batch_size or len(active)
        for start in range(0, len(active), size):
            chunk = active[start:start + size]
            try:
                replies = agent.respond(chunk)
            except Exception as exc:  # noqa: BLE001 - a policy that fails a whole batch fails those episodes
                message = str(exc) if isinstance(exc, AgentFault) else \
                    f"{type(agent).__name__}.respond raised {type(exc).__name__}: {exc}"
                for play in chunk:
                    play.fault(message)
                continue
            for play, reply in zip(chunk, replies, strict=True):
                if isinstance(reply, BaseException):
                    play.fault(str(reply) if isinstance(reply, AgentFault) else f"{type(reply).__name__}: {reply}")
                elif not play.done:
                    play.answer(reply)
    return [play.finish() for play in plays]


def start_play(env: "Environment", task_id: str, spec: dict[str, Any], agent: "Responder") -> Play:
    """A ``Play`` of a fresh episode of the task; a task that cannot start is a play that is already over."""
    try:
        episode = env.start(task_id, spec)
    except Exception as exc:  # noqa: BLE001 - SpecError or an environment bug: this rollout only
        return _unstartable(task_id, agent, f"environment start({task_id!r}) raised {type(exc).__name__}: {exc}")
    return Play(episode, task_id=task_id, policy=agent.policy, limits=agent.limits, system_prompt=agent.system_prompt)


class _Unstartable(Play):
    def __init__(self, task_id: str, policy: str, error: str) -> None:  # noqa: D107 - no episode to open
        self.rollout = Rollout(task_id=task_id, policy=policy, stop=STOP_ERROR, error=error,
                               reason=f"episode could not start: {error}", failed_turn=1)
        self.messages, self.tools, self.state, self.turn, self.done = self.rollout.messages, [], {}, 0, True


def _unstartable(task_id: str, agent: "Responder", error: str) -> Play:
    return _Unstartable(task_id, agent.policy, error)


def run_episode(episode: "Episode", agent: "Responder", *, task_id: str | None = None) -> Rollout:
    """Play ``episode`` with ``agent`` to the end. Never raises for this rollout's faults."""
    play = Play(episode, task_id=task_id, policy=agent.policy, limits=agent.limits, system_prompt=agent.system_prompt)
    return play_all([play], agent)[0]


def run_task(env: "Environment", task_id: str, spec: dict[str, Any], agent: "Responder") -> Rollout:
    """Start a fresh episode of one task and play it; a task that cannot start is a rollout with an error."""
    return play_all([start_play(env, task_id, spec, agent)], agent)[0]
