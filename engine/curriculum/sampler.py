"""Weighted batches of GRPO groups: draw B tasks with probability proportional to their weight (with
replacement) and repeat each chosen task's index K times in a row, so a group is never split or interleaved.

Batch ``step`` of ``epoch`` depends only on (seed, epoch, step) and the weights: its generator is seeded from
``SeedSequence([seed, epoch, step])``. Every process that builds the sampler with the same arguments yields the
same indices, and a resumed run can start at any step. Drawing uses a cumulative sum computed once, so a batch
costs O(B log N) whatever the number of tasks N.

The weights are a sequence (indices into it) or, as ``BatchSource.weights`` and ``WeightSet.by_task`` give them, a
mapping from task id to weight: then the tasks are taken in sorted id order (as ``load_weights`` stores them) and
``batch_ids(step)`` gives the batch as task ids.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Sequence

import numpy as np

from coevolve_engine.core.weights import check_weights
from coevolve_engine.curriculum.strategy import CurriculumError

#: the most indices one batch may hold (groups_per_step * group_size): a batch is drawn and held in memory at once
MAX_BATCH_ROWS = 10_000_000


class WeightedGroupSampler:
    """Indices into ``weights`` (e.g. a WeightSet's task_ids, or a dataset's rows in the same order).

    ``iter(sampler)`` yields ``num_batches`` batches (forever when None) from ``start_step`` on, flattened:
    groups_per_step * group_size indices per batch, each task's K copies next to each other.
    """

    def __init__(self, weights: Mapping[str, float] | Sequence[float] | np.ndarray, *, group_size: int = 8,
                 groups_per_step: int = 32, seed: int = 0, epoch: int = 0, start_step: int = 0,
                 num_batches: int | None = None) -> None:
        #: the task id of each index, in sorted order, when the weights came as a mapping (else None)
        self.task_ids: list[str] | None = None
        if isinstance(weights, Mapping):
            self.task_ids = sorted(str(task) for task in weights)
            by_id = {str(task): weight for task, weight in weights.items()}
            weights = {task: by_id[task] for task in self.task_ids}
        w = check_weights(weights, hint="; recompute them with `coevolve-engine weights`")
        for name, value in (("group_size", group_size), ("groups_per_step", groups_per_step)):
            if value < 1:
                raise CurriculumError(f"{name} must be at least 1, got {value}")
        if groups_per_step * group_size > MAX_BATCH_ROWS:
            raise CurriculumError(f"a batch of groups_per_step * group_size = {groups_per_step} * {group_size} "
                                  f"indices is more than {MAX_BATCH_ROWS:,}; draw several smaller batches "
                                  "(successive steps)")
        if seed < 0 or epoch < 0 or start_step < 0:
            raise CurriculumError("seed, epoch and start_step must be >= 0 (they seed numpy's SeedSequence)")
        # cdf_i = w_0 + ... + w_i: drawing u ~ U[0, total) picks the first i with cdf_i > u, i.e. i with
        # probability w_i / total; a task of weight 0 adds nothing to the cdf and is never picked
        self.cdf = np.cumsum(w)
        self.total = float(self.cdf[-1])
        self._last = int(np.flatnonzero(w > 0)[-1])
        self.num_tasks = w.size
        self.group_size = group_size
        self.groups_per_step = groups_per_step
        self.seed = seed
        self.epoch = epoch
        self.start_step = start_step
        self.num_batches = num_batches

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def tasks(self, step: int) -> np.ndarray:
        """The groups_per_step task indices of batch ``step`` (one per group)."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, self.epoch, step]))
        u = rng.random(self.groups_per_step) * self.total
        # the rounding of u * total can reach total itself: clamp onto the last task with a weight
        return np.minimum(np.searchsorted(self.cdf, u, side="right"), self._last)

    def batch(self, step: int) -> np.ndarray:
        """Batch ``step``: every chosen task index repeated group_size times in a row."""
        return np.repeat(self.tasks(step), self.group_size)

    def batch_ids(self, step: int) -> list[str]:
        """Batch ``step`` as task ids, each task group_size times in a row (weights given as a mapping)."""
        if self.task_ids is None:
            raise CurriculumError("batch_ids needs the weights as a mapping from task id to weight "
                                  "(e.g. WeightSet.by_task or BatchSource.weights); use batch(step) for indices")
        return [self.task_ids[i] for i in self.batch(step).tolist()]

    def __iter__(self) -> Iterator[int]:
        step = self.start_step
        while self.num_batches is None or step < self.start_step + self.num_batches:
            yield from self.batch(step).tolist()
            step += 1

    def __len__(self) -> int:
        if self.num_batches is None:
            raise TypeError("an endless WeightedGroupSampler has no length; pass num_batches")
        return self.num_batches * self.groups_per_step * self.group_size
