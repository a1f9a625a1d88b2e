"""The candidate-task contract: what a synthesizer is given (failure patterns) and what it returns (candidates).

Synthesizers live in ``engine/synthesis`` and in ``adapters/environments/*/synthesizer.py``; both build on
these types. Storing candidates and their verdicts is ``coevolve_engine.synthesis.candidates``.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from coevolve_engine.core.ids import spec_json, synthesized_task_id

if TYPE_CHECKING:
    from coevolve_engine.core.registry import PluginContext
    from coevolve_engine.core.store import Store


@dataclass(frozen=True)
class Candidate:
    """One proposed task. ``provenance`` says how it was made (seed, parent tasks, operators, ...)."""

    candidate_id: str
    round: int | None
    pattern_id: str | None
    signal: str | None
    env: str
    synthesizer: str
    prompt: str
    spec: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, *, round: int | None, pattern_id: str | None, signal: str | None, env: str,
               synthesizer: str, prompt: str, spec: dict[str, Any],
               provenance: Mapping[str, Any] | None = None) -> "Candidate":
        """A candidate whose id is a hash of (round, synthesizer, env, spec): proposing the same task twice
        in one round names the same candidate, so writing it again adds nothing."""
        digest = hashlib.sha256(f"{round}\n{synthesizer}\n{env}\n{spec_json(spec)}".encode("utf-8")).hexdigest()
        return cls(f"cand-{digest[:16]}", round, pattern_id, signal, env, synthesizer, prompt, spec,
                   dict(provenance or {}))

    @property
    def task_id(self) -> str:
        """The task id it gets when accepted: ``provenance['task_id']`` if the synthesizer chose one."""
        chosen = self.provenance.get("task_id")
        return chosen if isinstance(chosen, str) and chosen else synthesized_task_id(self.env, self.spec)


@dataclass(frozen=True)
class PatternMember:
    """A flagged trajectory in a pattern, and the task it attempted."""

    trajectory_id: str
    task_id: str | None
    signals: tuple[str, ...]
    distance: float | None


@dataclass(frozen=True)
class FailurePattern:
    """A row of ``failure_patterns`` with its members and the task records they attempted.

    ``tasks`` maps task_id to the stored record (task_id, env, prompt, spec, source, meta) for every member
    task found in ``tasks``; members are ordered by distance from the centre, then trajectory id.
    """

    pattern_id: str
    round: int
    step: int | None
    size: int
    dominant_signal: str
    signal_counts: dict[str, int]
    representative_trajectory: str | None
    summary: dict[str, Any] | None
    members: tuple[PatternMember, ...]
    tasks: Mapping[str, dict[str, Any]]

    @property
    def task_ids(self) -> list[str]:
        """The distinct member tasks present in the store, closest member first."""
        seen: dict[str, None] = {}
        for member in self.members:
            if member.task_id is not None and member.task_id in self.tasks:
                seen.setdefault(member.task_id, None)
        return list(seen)


class Synthesizer(ABC):
    """Proposes candidate tasks for failure patterns. Implementations must be deterministic given ``seed``.

    A synthesizer declares what it needs, and the loop reads the declarations, never its name or class:

    - ``needs_patterns`` (default True): False for unguided exploration, which also runs for a round without
      patterns; ``synthesize`` then passes it the round too, as ``propose(..., round=R)``;
    - ``reads_summaries``: it reads each pattern's LLM summary, so a run with ``models.summary`` set writes the
      summaries first;
    - ``explores``: it is built with the run's abstraction model as ``model`` and its explorer as ``explorer``
      (each an ``Endpoint``: the model, its server and key), unless its options name them;
    - ``writes_kinds``: it takes ``kinds``, and the run's ``synthesis.kinds`` is handed to it.
    """

    name: ClassVar[str]
    needs_patterns: ClassVar[bool] = True
    reads_summaries: ClassVar[bool] = False
    explores: ClassVar[bool] = False
    writes_kinds: ClassVar[bool] = False

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: "PluginContext") -> "Synthesizer":
        """How the registry builds one (``Registry.build``): ``cls(**options)``; override to use the context."""
        return cls(**options)

    @abstractmethod
    def propose(self, store: "Store", patterns: Sequence[FailurePattern], *, max_candidates: int,
                seed: int) -> list[Candidate]:
        """At most ``max_candidates`` new candidates for ``patterns``; reads the store, never writes it."""


def declares(synthesizer: Any, need: str) -> bool:
    """What a registered synthesizer (a ``Synthesizer`` subclass, or any factory) declares it needs: its own
    attribute, else the base class's default."""
    return bool(getattr(synthesizer, need, getattr(Synthesizer, need)))


def quotas(sizes: list[int], total: int) -> list[int]:
    """``total`` candidates shared among patterns in proportion to their ``sizes`` (largest remainders first,
    ties to the earlier pattern); how the offline synthesizers divide ``max_candidates``."""
    if not sizes or total <= 0:
        return [0] * len(sizes)
    weight = sum(max(size, 1) for size in sizes)
    shares = [total * max(size, 1) / weight for size in sizes]
    parts = [math.floor(share) for share in shares]
    for index in sorted(range(len(sizes)), key=lambda i: (parts[i] - shares[i], i))[: total - sum(parts)]:
        parts[index] += 1
    return parts
