"""The frozen trainer: a trainer of your own, in its own package, that keeps the engine's trainer contract
(``coevolve_engine.trainers.base``) and nothing more.

Each optimizer step it draws ``groups_per_step`` tasks by weight from the ``BatchSource`` (through the engine's
``WeightedGroupSampler``, so its draws are the ones `coevolve-engine sample` shows), plays each task
``group_size`` times with the policy through the engine's episode player, and hands the step's groups to the
``TrajectorySink``, which writes them to the store for the signals. It never changes the policy: its
checkpoint is the model it was given, copied. That makes it a baseline (what the signals and the curriculum do
when the agent does not learn) and the skeleton of a real trainer: compute your loss on ``groups`` and step
your optimizer where ``train`` says so.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from coevolve_engine import WeightedGroupSampler
from coevolve_engine.adapters.agents import load_agent, run_rollouts
from coevolve_engine.core.store import Store
from coevolve_engine.core.tasks import select_tasks
from coevolve_engine.trainers.base import Stopwatch, TrainContext, Trainer, TrainReport, options_config


@dataclass
class FrozenOptions:
    """The frozen trainer's settings: `[trainer.options]` in a run's configuration (the run sets the first four
    itself, and the [episode] limits it declares)."""

    model: str = field(metadata={"help": "the policy to play: a local model directory or a litellm model string"})
    output_dir: str = field(metadata={"help": "where the checkpoint (the policy, unchanged) is copied"})
    seed: int = field(default=0, metadata={"help": "seed of the group draws"})
    policy_name: str = field(default="policy", metadata={"help": "the policy id recorded with every rollout"})
    group_size: int = field(default=4, metadata={"help": "K: rollouts per task drawn (a GRPO group)"})
    groups_per_step: int = field(default=2, metadata={"help": "tasks drawn per step, each played as a group"})
    temperature: float = field(default=0.9, metadata={"help": "sampling temperature of the policy's answers"})
    max_new_tokens: int = field(default=256, metadata={"help": "tokens per answer (set by the run's [episode])"})
    max_steps: int = field(default=0, metadata={
        "help": "environment steps per episode; 0: no cap (set by the run's [episode])"})
    max_model_calls_per_turn: int = field(default=21, metadata={
        "help": "answers per user turn (set by the run's [episode])"})
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "extra chat template variables (set by the run's [episode])"})

    def __post_init__(self) -> None:
        if self.group_size < 1 or self.groups_per_step < 1:
            raise ValueError(f"group_size and groups_per_step must be at least 1, got {self.group_size} and "
                             f"{self.groups_per_step}")


class FrozenTrainer(Trainer):
    """Plays weighted groups with a policy it never updates, and reports every rollout to the sink."""

    options_class = FrozenOptions
    run_sets = ("model", "output_dir", "seed", "policy_name")
    carries_optimization = False  # nothing to carry: the run needs trainer.optimization = "round"

    def __init__(self, config: FrozenOptions, context: TrainContext) -> None:
        if context.source is None or context.environment is None:
            raise ValueError("the frozen trainer needs a BatchSource and an environment")
        self.config, self.source, self.sink = config, context.source, context.sink
        self.environment, self.step = context.environment, context.start_step
        with Store(context.store_path, read_only=True, wait=context.wait) as store:
            tasks = select_tasks(store, self.environment.name, task_ids=self.source.task_ids())
        self.specs = {task["task_id"]: task["spec"] for task in tasks}
        missing = sorted(set(self.source.task_ids()) - set(self.specs))
        if missing:
            raise ValueError(f"{len(missing)} weighted task(s) are not {self.environment.name} training tasks in "
                             f"the store: {', '.join(missing[:5])}")
        # draw n is step n + 1's, from the run's seed: a pure function of the weights, the seed and the step
        self.sampler = WeightedGroupSampler(self.source.weights, group_size=config.group_size,
                                            groups_per_step=config.groups_per_step, seed=self.source.seed)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: TrainContext) -> "FrozenTrainer":
        config = options_config(FrozenOptions, options, dict(
            model=context.model, output_dir=context.output_dir, seed=context.seed, policy_name=context.policy_name),
            "trainer frozen", reserved=cls.run_sets)
        return cls(config, context)

    def train(self, steps: int) -> TrainReport:
        c, clock = self.config, Stopwatch()
        agent = load_agent(c.model, {
            "temperature": c.temperature, "max_tokens": c.max_new_tokens, "max_steps": c.max_steps,
            "max_model_calls_per_turn": c.max_model_calls_per_turn, "chat_template_kwargs": c.chat_template_kwargs})
        first, groups, rollouts = self.step + 1, 0, 0
        for step in range(first, first + steps):
            drawn = self.sampler.batch_ids(step - 1)[::c.group_size]  # one task id per group
            played = run_rollouts(self.environment, [{"task_id": t, "spec": self.specs[t]} for t in drawn], agent,
                                  group_size=c.group_size, step=step)
            for rollout in played:
                rollout.policy = f"{c.policy_name}@{step - 1}"  # the policy that played it: NAME@STEP
            k = c.group_size  # run_rollouts returns each task's K rollouts together, in the order drawn
            step_groups = [(f"{task_id}@{step}" + (f".{n}" if n else ""), played[i * k:(i + 1) * k])
                           for i, (task_id, n) in enumerate(_numbered(drawn))]
            # a real trainer computes its loss on step_groups and steps its optimizer here
            if self.sink is not None:
                self.sink.write_groups(step_groups, step=step)
            groups, rollouts = groups + len(step_groups), rollouts + len(played)
            if self.progress is not None:
                solved = sum(r.success for r in played)
                self.progress(f"step {step}: {len(step_groups)} groups, {solved}/{len(played)} rollouts succeeded")
            self.step = step
        checkpoint = Path(c.output_dir) / "policy"
        if Path(c.model).is_dir():  # the policy, unchanged, is the checkpoint the next round starts from
            shutil.copytree(c.model, checkpoint, dirs_exist_ok=True)
        else:
            checkpoint = None
        return TrainReport(steps=steps, first_step=first, groups=groups, rollouts=rollouts, checkpoint=checkpoint,
                           seconds=clock())


def _numbered(task_ids: list[str]) -> list[tuple[str, int]]:
    """Each task id with how many times it was drawn before in the same step (a task is drawn twice in a step
    only when fewer tasks than groups_per_step have a positive weight): its groups get distinct ids."""
    seen: dict[str, int] = {}
    numbered = []
    for task_id in task_ids:
        numbered.append((task_id, seen.get(task_id, 0)))
        seen[task_id] = seen.get(task_id, 0) + 1
    return numbered
