"""The weighted group sampler: the one way tasks are drawn as GRPO groups, by trl-grpo, by
``coevolve-engine sample`` and by verl's weighted dataset.

The rules:

- Draw ``n`` (a run's step ``n``, counted from 0 across rounds) picks ``groups_per_step`` task indices with
  ``torch.multinomial`` over the weights, from a generator seeded with ``draw_seed(seed, n)``. A draw is thus a
  pure function of the weights, the seed and its number: every process draws the same batch, and draw ``n`` is
  the same whichever train() call, round or resumed process makes it.
- A task is drawn with probability proportional to its weight; a task with weight 0 is never drawn. Within a
  draw, tasks are drawn without replacement while at least ``groups_per_step`` tasks have a positive weight, so a
  task has at most one group per step; with replacement otherwise. ``with_replacement=True`` draws with
  replacement always: a draw of more rows than there are tasks, as verl's weighted dataset makes once per epoch,
  each row ``i`` with probability ``w_i / sum(w)``.
- Each drawn index is repeated ``group_size`` times in a row (its GRPO group, never split or interleaved), and
  the step's indices ``repeat_count`` times (TRL's layout: a generation batch reused for several updates).
- The weights are a sequence (indices into it), a mapping from task id to weight (the tasks are then taken in
  ``task_ids`` order, or sorted when ``task_ids`` is not given), or a function returning such a mapping, read
  afresh before every draw (``BatchSource.weights``: new weights take effect at the next draw). A function given
  with ``task_ids`` (a dataset's rows) lays each read out in that order; given without, the indices are the
  sorted task ids of each read, so ``WeightedGroupSampler(source.weights)`` draws, step for step, what
  ``WeightedGroupSampler(source.weights())`` draws, a refresh that adds tasks included (read them with
  ``batch_ids``).
- The sampler's state is the number of its next draw: iterating yields ``num_batches`` steps (forever when None)
  from it and moves it on, so a DataLoader's next epoch continues the run; ``state_dict`` and
  ``load_state_dict`` carry it across a resume, as ``start_step`` does.

torch is imported when the first draw is made, not when this module is.
"""

from __future__ import annotations

from itertools import count
from typing import Any, Callable, Iterator, Mapping, Sequence, Union

import numpy as np

from coevolve_engine.core.weights import check_weights
from coevolve_engine.core.errors import CurriculumError

#: the most indices one batch may hold (groups_per_step * group_size): a batch is drawn and held in memory at once
MAX_BATCH_ROWS = 10_000_000
#: seeds and draw numbers are below this: torch's CPU generator (a Mersenne twister) keeps only the low 32 bits
#: of the number it is seeded with, so a draw's seed is folded into 32 bits
SEED_LIMIT = 2**32
#: odd, so for one draw number distinct seeds give distinct generator seeds (and seed 0 the draw number itself)
SEED_STRIDE = 0x9E3779B1

Weights = Union[Mapping[str, float], Sequence[float], np.ndarray]


class SamplerError(CurriculumError, ValueError):
    """Weights or settings the sampler cannot draw from."""


def draw_seed(seed: int, number: int) -> int:
    """The generator seed of a run's draw (or step) ``number`` under the run's ``seed``, below 2**32: within a run
    distinct numbers give distinct seeds, and for one number distinct seeds do too. Seed 0 gives ``number``."""
    if not (0 <= seed < SEED_LIMIT and 0 <= number < SEED_LIMIT):
        raise SamplerError(f"seed {seed} and draw {number} must be >= 0 and below 2**32")
    return (number + seed * SEED_STRIDE) % SEED_LIMIT


def check_batch_size(group_size: int, groups_per_step: int) -> None:
    """The one check of a batch's size, shared by the sampler and the trainers' settings (so a run's check before
    a round refuses what training would): SamplerError when groups_per_step * group_size is over MAX_BATCH_ROWS."""
    if groups_per_step * group_size > MAX_BATCH_ROWS:
        raise SamplerError(f"a batch of groups_per_step * group_size = {groups_per_step} * {group_size} indices is "
                           f"more than {MAX_BATCH_ROWS:,}; draw several smaller batches (successive steps)")


class WeightedGroupSampler:
    """Indices into the weights (a WeightSet's task_ids, or a dataset's rows in the same order), drawn by the
    rules of the module doc.

    ``iter(sampler)`` yields ``num_batches`` batches from the next draw on, flattened: groups_per_step * group_size
    * repeat_count indices per batch, each task's K copies next to each other.
    """

    def __init__(self, weights: Weights | Callable[[], Mapping[str, float]], *, task_ids: Sequence[str] | None = None,
                 group_size: int = 8, groups_per_step: int = 32, seed: int = 0, start_step: int = 0,
                 num_batches: int | None = None, repeat_count: int = 1, with_replacement: bool = False) -> None:
        for name, value in (("group_size", group_size), ("groups_per_step", groups_per_step), ("repeat_count", repeat_count)):
            if value < 1:
                raise SamplerError(f"{name} must be at least 1, got {value}")
        check_batch_size(group_size, groups_per_step)
        if not (0 <= seed < SEED_LIMIT and 0 <= start_step < SEED_LIMIT):
            raise SamplerError(f"seed and start_step must be >= 0 and below 2**32 (they seed the draws), got seed "
                               f"{seed} and start_step {start_step}")
        if num_batches is not None and num_batches < 0:
            raise SamplerError(f"num_batches must be >= 0 or None (endless), got {num_batches}")
        self.read = weights if callable(weights) else None
        #: the task ids follow the weights read at each draw (a function given without task_ids)
        self.follow = self.read is not None and task_ids is None
        if isinstance(weights, Mapping) and task_ids is None:
            task_ids = sorted(str(task) for task in weights)
        #: the task id of each index (None when the weights came as a plain sequence)
        self.task_ids: list[str] | None = None if task_ids is None else [str(task) for task in task_ids]
        self.group_size, self.groups_per_step, self.repeat_count = group_size, groups_per_step, repeat_count
        self.seed, self.next_step, self.num_batches = seed, start_step, num_batches
        self.with_replacement = with_replacement
        self.fixed = None if self.read is not None else self._vector(weights)
        self._drawn_from: tuple[Any, int] | None = None  # the fixed weights as torch draws from them, once made
        if self.read is not None:
            self._read()  # fails now on weights it could never draw from
        self.num_tasks = len(self.fixed) if self.fixed is not None else len(self.task_ids)

    def _read(self) -> np.ndarray:
        """The weights the function returns now, one per index; following them, their tasks become the indices."""
        weights = self.read()
        if self.follow:
            if not isinstance(weights, Mapping):
                raise SamplerError("weights read afresh at each draw without task_ids must be a mapping from task id "
                                   f"to weight (e.g. BatchSource.weights), got {type(weights).__name__}")
            self.task_ids = sorted(str(task) for task in weights)
            self.num_tasks = len(self.task_ids)
        return self._vector(weights)

    def _vector(self, weights: Weights) -> np.ndarray:
        """One weight per index: a mapping is laid out in task_ids order, 0 for a task it does not name."""
        hint = "; recompute them with `coevolve-engine weights` (e.g. --strategy uniform)"
        if isinstance(weights, Mapping):
            by_id = {str(task): weight for task, weight in weights.items()}
            check_weights(by_id, what="sampler", error=SamplerError, hint=hint)  # the one check names the task
            known = set(self.task_ids)
            unknown = sorted(task for task, weight in by_id.items() if task not in known and weight > 0)
            if unknown:
                raise SamplerError(f"weights name tasks the sampler's tasks (the trainer's dataset) do not hold: "
                                   f"{', '.join(unknown[:5])}; rebuild the sampler on them")
            return np.array([by_id.get(task, 0.0) for task in self.task_ids], dtype=np.float64)
        if self.task_ids is not None and len(weights) != len(self.task_ids):
            raise SamplerError(f"{len(weights)} weights for {len(self.task_ids)} task ids")
        return check_weights(weights, what="sampler", error=SamplerError, hint=hint)

    def weights(self) -> np.ndarray:
        """The weights the next draw uses, one per index."""
        return self.fixed if self.fixed is not None else self._read()

    def tasks(self, step: int) -> np.ndarray:
        """The groups_per_step task indices of draw ``step`` (one per group)."""
        try:
            import torch
        except ImportError as error:
            raise SamplerError("drawing weighted groups needs torch: pip install 'coevolve-engine[local]'") from error
        if self._drawn_from is not None:
            weights, positive = self._drawn_from
        else:
            w = self.weights()
            weights, positive = torch.tensor(w, dtype=torch.float64), int((w > 0).sum())
            if self.fixed is not None:
                self._drawn_from = weights, positive
        replacement = self.with_replacement or positive < self.groups_per_step
        generator = torch.Generator().manual_seed(draw_seed(self.seed, step))
        return torch.multinomial(weights, self.groups_per_step, replacement=replacement, generator=generator).numpy()

    def batch(self, step: int) -> np.ndarray:
        """Draw ``step`` as it is yielded: every chosen task index repeated group_size times in a row, the whole
        repeat_count times."""
        return np.tile(np.repeat(self.tasks(step), self.group_size), self.repeat_count)

    def batch_ids(self, step: int) -> list[str]:
        """Draw ``step`` as task ids, each task group_size times in a row (the sampler knows its task ids)."""
        if self.task_ids is None:
            raise SamplerError("batch_ids needs the weights as a mapping from task id to weight (e.g. "
                               "WeightSet.by_task or BatchSource.weights), or task_ids; use batch(step) for indices")
        return [self.task_ids[i] for i in self.batch(step).tolist()]

    def __iter__(self) -> Iterator[int]:
        first = self.next_step
        steps = count(first) if self.num_batches is None else range(first, first + self.num_batches)
        for step in steps:
            indices = self.batch(step).tolist()
            self.next_step = step + 1
            yield from indices

    def __len__(self) -> int:
        if self.num_batches is None:
            raise TypeError("an endless WeightedGroupSampler has no length; pass num_batches")
        return self.num_batches * self.groups_per_step * self.group_size * self.repeat_count

    def state_dict(self) -> dict[str, Any]:
        """What a resumed sampler needs to continue the run: the seed and the number of the next draw."""
        return {"seed": self.seed, "next_step": self.next_step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.seed = int(state.get("seed", self.seed))
        self.next_step = int(state["next_step"])
