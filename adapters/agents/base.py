"""The agent contract: a policy that answers a chat with text or tool calls.

An agent implements ``complete(messages, tools) -> ModelReply`` (or, to answer many episodes at once,
``respond(plays)``), and inherits the episode player (``player.Play``) through ``run`` (start a fresh episode of
a task and play it) and ``run_episode`` (play an episode already started). ``complete`` raises ``AgentFault``
for anything that is not the model's own answer: a server error after retries, a timeout, a response that is
not a chat completion. The player turns a fault into a finished ``Rollout`` with ``error`` set; it never raises out of ``run`` for one rollout.

Agents are shared by the worker threads of ``run_rollouts``: ``complete`` must be safe to call
concurrently (hold no per-episode state on the agent).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from . import player
from .rules import (MAX_EXPLORE_STEPS, MAX_MODEL_CALLS_PER_TURN, MAX_NEW_TOKENS, MAX_STEPS, AgentFault, EpisodeLimits,
                    ModelReply)

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.registry import PluginContext
    from coevolve_engine.core.environment import Environment, Episode
    from coevolve_engine.core.rollout import Rollout

# the contract's types are defined in ``rules`` (which the player builds on too) and imported from here
__all__ = ["MAX_EXPLORE_STEPS", "MAX_MODEL_CALLS_PER_TURN", "MAX_NEW_TOKENS", "MAX_STEPS", "Agent", "AgentFault",
           "AgentOptions", "EpisodeLimits", "ModelReply"]

@dataclass(frozen=True)
class AgentOptions:
    """The options every agent is built from (``load_agent``): `coevolve-engine rollout`'s and `eval`'s options,
    or a run's ``[agent]`` and ``[episode]`` sections. Each agent reads those that apply to it."""

    model: str  # a litellm model string, a local model directory, or "reference"
    api_base: str | None = None  # an OpenAI-compatible server (litellm models)
    api_key: str | None = None
    temperature: float = 0.9  # sampling temperature; 0 is greedy
    max_tokens: int = 1024  # tokens per answer
    timeout: float = 60.0  # seconds to wait for one answer from a server
    retries: int = 2  # retries of a call that failed with a retryable error
    max_steps: int = MAX_STEPS  # environment steps per episode; 0: no cap
    max_model_calls_per_turn: int = MAX_MODEL_CALLS_PER_TURN
    chat_template_kwargs: dict | None = None  # local models: template variables; servers: extra_body
    policy: str | None = None  # the policy id recorded with each rollout (default: the model)


class Agent(ABC):
    """A policy that plays episodes. Subclasses set ``policy``, ``limits``, ``system_prompt``."""

    policy: str = "agent"
    limits: EpisodeLimits = EpisodeLimits()
    system_prompt: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: "PluginContext") -> "Agent":
        """How the registry builds one (``Registry.build``): ``cls(**options)``; the built-in agents read
        ``AgentOptions`` instead."""
        return cls(**options)

    @abstractmethod
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """Answer the chat so far. Raises AgentFault when no usable answer came back."""

    #: whether ``respond`` answers a batch of episodes in one go (play them together rather than in threads)
    batched: bool = False

    def respond(self, plays: list[Any]) -> list[Any]:
        """One answer per open episode (``player.Play``: its ``messages`` and ``tools``), in order; an entry may be
        the exception that kept that episode from an answer. The default asks ``complete`` for each in turn."""
        replies: list[Any] = []
        for play in plays:
            try:
                replies.append(self.complete(play.messages, play.tools))
            except Exception as exc:  # noqa: BLE001 - this episode only
                replies.append(exc if isinstance(exc, AgentFault) else AgentFault(
                    f"{type(self).__name__}.complete raised {type(exc).__name__}: {exc}"))
        return replies

    def run_episode(self, episode: "Episode", task_id: str | None = None) -> "Rollout":
        """Play a started episode to its end and return the rollout; never raises for one rollout's faults."""
        return player.run_episode(episode, self, task_id=task_id)

    def run(self, env: "Environment", task_id: str, spec: dict[str, Any]) -> "Rollout":
        """Start a fresh episode of the task and play it."""
        return player.run_task(env, task_id, spec, self)
