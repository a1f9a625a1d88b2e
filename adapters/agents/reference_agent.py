"""An agent that plays the environment's reference solution: demonstrations for SFT and sanity checks.

    agent = ReferenceAgent()
    rollout = agent.run(env, task_id, spec)        # reward 1 whenever the task's ground truth is sound

The calls come from ``Environment.reference_solution(spec)`` (one list of calls per user turn), and they are
played through the shared episode driver, so a reference rollout looks exactly like any agent's: a system and
user message, assistant messages with OpenAI-style ``tool_calls`` (one call per message by default, so each
call is made after reading the previous result), the tool results, and a short final reply ending each turn.

How the agent knows the calls: ``run(env, task_id, spec)`` (what ``run_rollouts`` calls) is the one entry point
that sees the spec. It asks the environment for the solution and plays the episode with a per-episode
``ScriptedTurns`` agent holding that solution, whose ``complete`` reads the turn and the position within it off
the chat so far. The shared ``ReferenceAgent`` holds no per-episode state, so worker threads may share it. A
task without a reference solution (or whose solution cannot be computed) is a rollout with ``error`` set.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Mapping

from .base import MAX_STEPS, Agent, AgentFault, AgentOptions, EpisodeLimits, ModelReply
from coevolve_engine.core.rollout import STOP_ERROR, Rollout
from ..calls import ParsedCall
from .player import run_task

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.registry import PluginContext
    from coevolve_engine.core.environment import Environment, ToolCall

DEFAULT_REPLY = "Done."


class ScriptedTurns(Agent):
    """Plays a fixed list of calls per user turn, then ``reply``; stateless: the position comes from the chat.

    The turn is the number of user messages so far; within a turn, each assistant message already written
    after the last user message consumed one call (or, with ``parallel``, all the turn's calls at once).
    """

    def __init__(self, solution: list[list["ToolCall"]], *, policy: str, limits: EpisodeLimits,
                 reply: str = DEFAULT_REPLY, parallel: bool = False) -> None:
        self.solution = solution
        self.policy = policy
        self.limits = limits
        self.reply = reply
        self.parallel = parallel

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        users = [i for i, message in enumerate(messages) if message.get("role") == "user"]
        if not users:
            raise AgentFault("reference agent: no user message in the chat")
        turn = len(users) - 1
        answered = sum(1 for message in messages[users[-1] + 1:] if message.get("role") == "assistant")
        calls = self.solution[turn] if turn < len(self.solution) else []
        batches = ([calls] if calls else []) if self.parallel else [[call] for call in calls]
        if answered >= len(batches):
            return ModelReply(content=self.reply)
        return ModelReply(content=None, calls=[
            ParsedCall(call.name, dict(call.arguments), json.dumps(call.arguments), call_id=call.call_id)
            for call in batches[answered]
        ])


class ReferenceAgent(Agent):
    """Plays each task's reference solution (``Environment.reference_solution``) through the episode driver.

    reply: the short text that ends each user turn.
    parallel: put all of a turn's calls in one assistant message instead of one message per call.
    max_steps: environment steps per episode (see EpisodeLimits); the per-turn model-call bound is raised to fit
        the longest turn of each solution.
    policy: the name recorded on trajectories.
    """

    def __init__(self, *, reply: str = DEFAULT_REPLY, parallel: bool = False, max_steps: int = MAX_STEPS,
                 policy: str | None = None) -> None:
        self.reply = reply
        self.parallel = parallel
        self.limits = EpisodeLimits(max_steps=max_steps)
        self.policy = policy or "reference"

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: "PluginContext") -> "ReferenceAgent":
        o = AgentOptions(**{"model": "reference", **options})
        return cls(max_steps=o.max_steps, policy=o.policy)

    def __repr__(self) -> str:
        return f"ReferenceAgent(policy={self.policy!r})"

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """Only reached through ``run_episode`` on an episode started elsewhere: that rollout ends with this fault."""
        raise AgentFault("the reference agent plays a task through run(env, task_id, spec): it needs the spec "
                         "to know the reference solution")

    def scripted(self, solution: list[list["ToolCall"]]) -> ScriptedTurns:
        """The per-episode agent that plays ``solution``."""
        longest = max((len(calls) for calls in solution), default=0)
        limits = EpisodeLimits(max_steps=self.limits.max_steps,
                               max_model_calls_per_turn=max(self.limits.max_model_calls_per_turn, longest + 1))
        return ScriptedTurns(solution, policy=self.policy, limits=limits, reply=self.reply, parallel=self.parallel)

    def run(self, env: "Environment", task_id: str, spec: dict[str, Any]) -> Rollout:
        started = time.perf_counter()
        try:
            solution = env.reference_solution(spec)
            problem = None if solution is not None else f"environment {env.name!r} gives no reference solution"
        except Exception as exc:  # noqa: BLE001 - a spec the environment cannot solve: this rollout only
            solution, problem = None, f"environment reference_solution raised {type(exc).__name__}: {exc}"
        if solution is None:
            error = f"task {task_id}: {problem}"
            return Rollout(task_id=task_id, policy=self.policy, stop=STOP_ERROR, error=error, reason=error,
                           duration_s=time.perf_counter() - started)
        return run_task(env, task_id, spec, self.scripted(solution))
