"""What one rollout produced: the conversation, the actions, the verdict and what it cost.

A ``Rollout`` is one attempt at one task by one agent. It maps onto a row of the store's
``trajectories`` table through ``to_record()``; everything that has no column of its own goes to ``meta``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Why a rollout stopped.
STOP_DONE = "done"  # every user turn was answered; the reward is the environment's score
STOP_MAX_STEPS = "max_steps"  # the agent asked for more environment steps than allowed: a failure
STOP_MAX_MODEL_CALLS = "max_model_calls"  # one turn took more model calls than allowed: a failure, unless it was
#                                           the last turn (scored as played, as BFCL's checker scores it)
STOP_MAX_TOKENS = "max_tokens"  # the trainer's token budget for the episode ran out: a failure
STOP_ERROR = "error"  # a fault (model server, parsing the response, the environment) ended it: see ``error``
STOPS = (STOP_DONE, STOP_MAX_STEPS, STOP_MAX_MODEL_CALLS, STOP_MAX_TOKENS, STOP_ERROR)


@dataclass
class Usage:
    """What the model calls of one rollout cost."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0  # USD; None as soon as one call's cost is unknown (an unpriced model)
    latency_s: float = 0.0  # seconds spent waiting for the model, retries included
    llm_calls: int = 0  # model calls that returned an answer
    retries: int = 0  # failed attempts that were retried

    def add(
        self,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        cost: float | None,
        latency_s: float,
        retries: int = 0,
    ) -> None:
        """Account for one answered model call."""
        self.prompt_tokens += prompt_tokens or 0
        self.completion_tokens += completion_tokens or 0
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        self.latency_s += latency_s
        self.llm_calls += 1
        self.retries += retries

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Rollout:
    """One attempt at one task.

    messages: the OpenAI-style chat as it happened (system, user, assistant with ``tool_calls``, tool results).
    actions: the environment steps taken, ``{"name", "arguments"}`` in call order; calls whose arguments
        could not be parsed were never executed and are not actions (they are counted in ``tool_errors``).
    reward, success, reason: the environment's verdict, or 0 / False / why when the rollout was cut short.
    error: the fault that ended the rollout (model server, malformed response, environment), else None.
    stop: one of ``STOPS``.
    """

    task_id: str
    policy: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    success: bool = False
    reason: str = ""
    error: str | None = None
    stop: str = STOP_DONE
    env_steps: int = 0
    tool_errors: int = 0  # tool calls answered with an error (unparsable arguments or refused by the environment)
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    group_id: str | None = None
    step: int | None = None  # the training step the rollout belongs to (set by the caller)
    sample_index: int = 0  # its index within its group
    turns: int = 0  # user turns reached (the last one may be unfinished)
    failed_turn: int | None = None  # the user turn (1-based) where the episode first failed; None when it succeeded

    @property
    def action_pattern(self) -> str:
        """Tool names in call order, consecutive repeats collapsed, joined by '>' (the 'rare' signal's key)."""
        names: list[str] = []
        for action in self.actions:
            if not names or names[-1] != action["name"]:
                names.append(action["name"])
        return ">".join(names)

    def to_record(self, *, step: int | None = None, group_id: str | None = None) -> dict[str, Any]:
        """The store's trajectory record: task_id, step, group_id, reward, success, actions, messages, policy,
        error (the fault that cut it short, which keeps it out of the signals) and meta."""
        return {
            "task_id": self.task_id,
            "step": self.step if step is None else step,
            "group_id": self.group_id if group_id is None else group_id,
            "reward": float(self.reward),
            "success": bool(self.success),
            "actions": self.actions,
            "messages": self.messages,
            "policy": self.policy,
            "error": self.error,
            "meta": {
                "reason": self.reason,
                "stop": self.stop,
                "env_steps": self.env_steps,
                "tool_errors": self.tool_errors,
                "sample_index": self.sample_index,
                "turns": self.turns,
                "failed_turn": self.failed_turn,
                "duration_s": round(self.duration_s, 6),
                "usage": asdict(self.usage),
            },
        }
