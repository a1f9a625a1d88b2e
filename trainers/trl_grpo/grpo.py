"""TRL's GRPOTrainer as trl-grpo runs it. This module imports TRL and torch, so ``TRLGRPOTrainer`` imports it
when it builds one, never at the CLI's start.

Besides TRL's public ``rollout_func`` and ``reward_funcs`` (passed by ``TRLGRPOTrainer``), two hooks:

- ``_get_train_sampler`` (the override TRL's maintainers recommend for custom sampling; private, so
  tests/test_trl_contract.py pins what it relies on): the engine's ``WeightedGroupSampler`` draws each step's
  groups from the ``BatchSource``'s current weights, in the layout of TRL's ``RepeatSampler`` (each prompt K
  times in a row, the generation batch ``num_iterations * steps_per_generation`` times). Draw ``n`` is step
  ``n + 1`` of the run: a train() call's sampler starts at ``first_draw``, the steps done before it.
- ``training_step`` (transformers' public hook): keeps the step's rows in ``rows`` before TRL generates, since
  ``rollout_func`` is handed the prompts and the trainer only, and an episode needs its row's task.
- ``create_scheduler`` (transformers' public hook): the learning-rate schedule and its warm-up span
  ``schedule_steps`` (the run's steps) rather than the steps done when this train() call ends, so a run split
  into rounds follows the one schedule an unsplit run would (the checkpoint carries the step it is at).
- ``_generate_and_score_completions`` (private, pinned by tests/test_trl_contract.py): TRL's batch has one row
  per episode; where an episode holds several token segments (a chat template that drops earlier reasoning,
  see ``adapters/agents/chat_tokens.py``), ``segment_batch`` rebuilds it with one row per segment, each with its
  episode's advantage. TRL has no public hook between scoring and the loss.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback
from trl import GRPOTrainer

from coevolve_engine.core.sampler import WeightedGroupSampler
from coevolve_engine.trainers.base import BatchSource
from coevolve_engine.trainers.trl_grpo.episodes import segment_batch


class CoevolveGRPOTrainer(GRPOTrainer):
    """GRPOTrainer drawing its groups from ``source`` (task id -> weight, with a seed), the dataset's ``task_id``
    column naming each row's task."""

    def __init__(self, *args: Any, source: BatchSource, **kwargs: Any) -> None:
        self.source = source
        self.first_draw = 0  # the run's draw number of the next train() call's first step (set before each)
        self.rows: list[dict[str, Any]] = []  # the rows of the step being trained
        self.schedule_steps = 0  # the optimizer steps the schedule spans (0: the train() call's max_steps)
        super().__init__(*args, **kwargs)

    def _get_train_sampler(self, dataset=None) -> WeightedGroupSampler:
        dataset = self.train_dataset if dataset is None else dataset
        task_ids = list(dataset["task_id"])
        groups = self.args.generation_batch_size // self.num_generations
        return WeightedGroupSampler(
            self.source.weights, task_ids=task_ids, group_size=self.num_generations, groups_per_step=groups,
            repeat_count=self.num_iterations * self.args.steps_per_generation, seed=self.source.seed,
            start_step=self.first_draw, num_batches=max(1, len(task_ids) // groups),
        )

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        return super().create_scheduler(self.schedule_steps or num_training_steps, optimizer)

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.rows = inputs
        return super().training_step(model, inputs, num_items_in_batch)

    def _generate_and_score_completions(self, inputs):
        return segment_batch(self, super()._generate_and_score_completions(inputs), inputs)  # a row a segment


class SaveAtEnd(TrainerCallback):
    """Has transformers save its checkpoint (weights, optimizer, scheduler, RNG, state) at the last step of a
    train() call, on every process (under ZeRO-3 saving is a collective)."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            control.should_save = True
        return control
