"""Weighted GRPO sampling: draw whole groups from the current task weights.

TRL's ``RepeatSampler`` yields each prompt index ``mini_repeat_count`` (= K, the group size) times in a row,
``batch_size`` distinct prompts per generation batch, each batch ``repeat_count`` times. This subclass keeps
that layout, so GRPO groups stay intact (and identical on every process, as TRL needs under ``accelerate``),
but picks each batch's prompts with ``torch.multinomial`` over the ``BatchSource``'s weights, read afresh for
every batch, so new weights take effect at the next batch. A task with weight 0 is never drawn. Within a batch
prompts are drawn without replacement while enough tasks have positive weight, so a task has at most one group
per step, whose id is then ``task_id@step``.

Each draw is seeded by (``seed``, its number in the run): draw ``first_draw + i`` is the same whichever train()
call, round or resumed process makes it, so a run split into rounds (or killed and resumed) draws what one long
run draws from the same weights; nothing of the sampler's state needs saving.
"""

from __future__ import annotations

from typing import Iterator, Sized

import torch
from trl.trainer.utils import RepeatSampler

from coevolve_engine.trainers.base import BatchSource


class WeightedRepeatSampler(RepeatSampler):
    def __init__(
        self,
        data_source: Sized,
        task_ids: list[str],
        source: BatchSource,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        seed: int = 0,
        first_draw: int = 0,
    ) -> None:
        super().__init__(data_source, mini_repeat_count, batch_size, repeat_count, shuffle=True, seed=seed)
        self.seed, self.draws = seed, first_draw  # the number of the next draw in the run
        if len(task_ids) != len(data_source):
            raise ValueError(f"{len(task_ids)} task ids for a dataset of {len(data_source)} rows")
        self.task_ids = list(task_ids)
        self.source = source
        self.batches_per_pass = max(1, len(task_ids) // batch_size)

    def current_weights(self) -> torch.Tensor:
        """One weight per dataset row, from the source's current weights (0 for tasks it does not name)."""
        weights = self.source.weights()
        unknown = sorted(set(weights) - set(self.task_ids))
        if unknown and any(weights[t] > 0 for t in unknown):
            shown = ", ".join(unknown[:5])
            raise ValueError(f"weights name tasks the trainer's dataset does not hold: {shown}; rebuild the trainer")
        return torch.tensor([weights.get(task, 0.0) for task in self.task_ids], dtype=torch.double)

    def draw(self) -> list[int]:
        """The prompt indices of one generation batch."""
        weights = self.current_weights()
        replacement = int((weights > 0).sum()) < self.batch_size
        self.generator.manual_seed(draw_seed(self.seed, self.draws))
        self.draws += 1
        return torch.multinomial(weights, self.batch_size, replacement=replacement, generator=self.generator).tolist()

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.batches_per_pass):
            chunk = self.draw()
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return self.batches_per_pass * self.batch_size * self.mini_repeat_count * self.repeat_count


def draw_seed(seed: int, number: int) -> int:
    """The seed of a run's draw (or step) ``number`` under the run's ``seed``: distinct for distinct pairs."""
    return (seed << 32) + number
