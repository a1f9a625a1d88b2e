"""What the episode player and every agent agree on: what one model answer is (``ModelReply``), what a model call
that gave no usable answer raises (``AgentFault``), and the limits an episode is played under (``EpisodeLimits``,
with BFCL's defaults).

``base`` (the agent contract, which plugin authors import these from) and ``player`` (which enforces them) both
build on this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..calls import ParsedCall


class AgentFault(RuntimeError):
    """A model call that produced no usable answer (server error, timeout, malformed response)."""


#: BFCL's turn cap: its inference loop counts the answers with tool calls in a turn and quits the episode once the
#: count exceeds ``MAXIMUM_STEP_LIMIT`` (20), i.e. after the 21st; the turn's answer without tool calls is not
#: counted. The player's ``max_model_calls_per_turn`` counts every answer, and only a tool-calling answer can be
#: followed by another, so BFCL's rule is ``max_model_calls_per_turn = 21``.
MAX_MODEL_CALLS_PER_TURN = 21
#: No cap on the tool calls of a whole episode (0), as in BFCL's loop: two long_context ground truths make 35
#: calls, so any cap below that would fail tasks that BFCL scores as solvable.
MAX_STEPS = 0
#: Tokens the policy may write per answer, in training and evaluation alike.
MAX_NEW_TOKENS = 256
#: Environment steps an explorer model takes through an environment before it writes a task (synthesis and
#: bootstrap); its turn may have one model answer more than that, the answer that ends it.
MAX_EXPLORE_STEPS = 12


@dataclass(frozen=True)
class EpisodeLimits:
    """Bounds on one episode; exceeding either ends the rollout as a failure."""

    max_steps: int = field(default=MAX_STEPS, metadata={
        "help": "environment steps (tool calls executed) per episode; one more fails the task; 0: no cap (BFCL)"})
    max_model_calls_per_turn: int = field(default=MAX_MODEL_CALLS_PER_TURN, metadata={
        "help": "model answers within one user turn; a turn not ended by then fails the task (BFCL's inference: 21, "
                "its 'count > 20')"})

    def __post_init__(self) -> None:
        if self.max_steps < 0:
            raise ValueError(f"max_steps must be >= 0 (0: no cap), got {self.max_steps}")
        if self.max_model_calls_per_turn < 1:
            raise ValueError(
                f"max_model_calls_per_turn must be >= 1 (the model must answer each turn at least once), "
                f"got {self.max_model_calls_per_turn}"
            )


@dataclass
class ModelReply:
    """One model answer: the text outside tool calls, the calls in order, and what the call cost."""

    content: str | None
    calls: list[ParsedCall] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    latency_s: float = 0.0
    retries: int = 0
    finish_reason: str | None = None
    dropped_calls: int = 0  # tool-call blocks the decoder dropped (BFCL's Qwen handler drops what does not parse)
