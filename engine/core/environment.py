"""The environment contract.

An *environment* turns a task spec (a JSON object stored in ``tasks.spec``) into *episodes*. An episode is
one attempt at one task with its own fresh state: nothing is shared between episodes, so K rollouts of a
group never see each other's side effects.

The driver (an agent, a validator replaying a ground truth, a trainer) runs an episode like this::

    episode = env.start(task_id, spec)
    while (user_message := episode.next_turn()) is not None:
        ...  # show user_message and episode.tools() to the agent
        observation = episode.execute(ToolCall("cd", {"folder": "docs"}))   # any number of times
        episode.end_turn(reply_text)                                         # the agent's answer
    score = episode.score()

``execute`` never raises for anything the agent did: an unknown tool, bad arguments or an exception inside
the tool come back as an ``Observation`` with ``error`` set, and the episode goes on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Mapping

if TYPE_CHECKING:
    from coevolve_engine.core.registry import PluginContext


@dataclass(frozen=True)
class ToolCall:
    """One call the agent asked for: a tool name and literal keyword arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True)
class Observation:
    """What the environment answers to a call. ``error`` is set when the call failed or was refused."""

    content: str
    error: str | None = None


@dataclass(frozen=True)
class Score:
    """The terminal verdict on an episode: reward in [0, 1], success, why, and (when the environment can tell)
    the user turn, 1-based, where it first went wrong."""

    reward: float
    success: bool
    reason: str
    failed_turn: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.reward <= 1.0:
            raise ValueError(f"reward must be in [0, 1], got {self.reward}")


class SpecError(ValueError):
    """A task spec that is not well-formed for its environment; ``problems`` lists each defect."""

    def __init__(self, task_id: str, problems: list[str]) -> None:
        self.task_id = task_id
        self.problems = problems
        super().__init__(f"task {task_id!r}: " + "; ".join(problems))


class Episode(ABC):
    """One attempt at one task, with state of its own."""

    task_id: str

    def system_prompt(self) -> str | None:
        """Extra instructions for the agent, if the environment has any."""
        return None

    @abstractmethod
    def next_turn(self) -> str | None:
        """Advance to the next user turn and return its message, or None when no turns remain."""

    @abstractmethod
    def tools(self) -> list[dict[str, Any]]:
        """OpenAI-style tool schemas (``{"type": "function", "function": {...}}``) available now."""

    @abstractmethod
    def execute(self, call: ToolCall) -> Observation:
        """Run one tool call in this episode's state. Never raises for the agent's mistakes."""

    @abstractmethod
    def end_turn(self, reply: str | None) -> None:
        """Record the agent's final text reply for the current turn."""

    @abstractmethod
    def score(self) -> Score:
        """Score the episode as it stands (normally after the last turn)."""

    def close(self) -> None:
        """Release anything the episode holds."""


class Environment(ABC):
    """A family of tasks that can be started as episodes, checked and scored."""

    name: ClassVar[str]

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: "PluginContext") -> "Environment":
        """How the registry builds one (``Registry.build``): ``cls(**options)``; override to use the context."""
        return cls(**options)

    @abstractmethod
    def check_spec(self, spec: dict[str, Any]) -> list[str]:
        """Every defect that makes ``spec`` unusable for this environment; empty when well-formed."""

    @abstractmethod
    def start(self, task_id: str, spec: dict[str, Any]) -> Episode:
        """A fresh episode of the task. Raises SpecError when the spec is not well-formed."""

    def load_tasks(self, **options: Any) -> Iterator[dict[str, Any]]:
        """Task records shipped with the environment: dicts with task_id, env, prompt, spec, source."""
        return iter(())

    def reference_solution(self, spec: dict[str, Any]) -> list[list[ToolCall]] | None:
        """Calls that solve the task, one list per turn, when the spec carries a ground truth; else None."""
        return None

    # -- for LLM synthesis: exploring around a seed task and turning a written draft into a task --------

    def exploration_spec(self, seed_spec: dict[str, Any], instruction: str) -> dict[str, Any]:
        """A spec for an exploration episode: the seed task's world and tools, one turn of ``instruction``."""
        raise NotImplementedError(f"environment {self.name!r} does not support LLM exploration")

    def exploration_worlds(self, n: int, seed: int) -> list[dict[str, Any]]:
        """``n`` seed specs for unguided exploration (bootstrapping D_0): worlds built from the environment
        itself, never from a shipped task, so the explored tasks stay apart from the held-out eval set. Each
        can be passed to ``exploration_spec`` and ``spec_from_draft`` as ``seed_spec``. Deterministic in
        ``seed``; world ``i`` must not change when more are asked for."""
        raise NotImplementedError(
            f"environment {self.name!r} has no worlds for unguided exploration (Environment.exploration_worlds), "
            "so it cannot be bootstrapped; import a train task set instead")

    def draft_schema(self) -> dict[str, Any]:
        """JSON schema of one task draft as an LLM writes it for this environment."""
        raise NotImplementedError(f"environment {self.name!r} does not support LLM-written tasks")

    def spec_from_draft(self, seed_spec: dict[str, Any], draft: dict[str, Any]) -> dict[str, Any]:
        """The task spec of a draft (matching ``draft_schema``) set in the seed task's world."""
        raise NotImplementedError(f"environment {self.name!r} does not support LLM-written tasks")

    def draft_kinds(self) -> dict[str, str]:
        """The kinds of task a draft can be written as, each with what the writing model is told about it
        (the abstraction prompt's ``$kinds``). Every environment writes ``base`` tasks."""
        return {"base": "every turn's user message states every value its calls need."}

    def kind_problems(self, spec: dict[str, Any]) -> list[str]:
        """Why a spec written as one of ``draft_kinds`` breaks that kind's rules; empty when it keeps them."""
        return []


def replay(
    environment: Environment, task_id: str, spec: dict[str, Any], solution: list[list[ToolCall]]
) -> Score:
    """Play ``solution`` (one list of calls per turn) in a fresh episode and return its score."""
    episode = environment.start(task_id, spec)
    try:
        turn = 0
        while episode.next_turn() is not None:
            for call in solution[turn] if turn < len(solution) else []:
                episode.execute(call)
            episode.end_turn(None)
            turn += 1
        return episode.score()
    finally:
        episode.close()
