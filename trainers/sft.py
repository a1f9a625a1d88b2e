"""Rejection-sampling fine-tuning: SFT on the store's successful trajectories, with TRL's SFTTrainer.

A tiny or untrained policy never solves a tool task by chance, so GRPO sees all-failure groups and has nothing
to learn from. Warming it up on demonstrations (the ``reference`` agent's rollouts, or any agent's successes)
first gives GRPO groups with both outcomes. A demonstration is a whole successful episode, every user turn,
shown exactly as the episode player shows it in training (``adapters.agents.chat_tokens``): the opening
messages with the episode's own tools, then each assistant message rendered as the tokens a policy would have
sampled for it, and the template's tokens for the tool results and later user messages between them. Token ids
are built one piece at a time, never by re-tokenizing joined text, so SFT sees byte for byte what GRPO shows.

``RFTTrainer`` keeps the trainer contract: the ``BatchSource`` chooses the tasks (weight > 0) whose
demonstrations are used; it generates no rollouts, so it reports nothing to a sink. The loss is on the
assistant's tokens of every turn (``completion_mask``: tool results and user messages are context, not targets).
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from coevolve_engine.adapters.agents.chat_tokens import ChatTokens
from coevolve_engine.adapters.calls import parse_arguments
from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.store import Store
from coevolve_engine.core.tasks import select_tasks
from coevolve_engine.trainers.base import BatchSource, Stopwatch, Trainer, TrainReport, TrajectorySink
from coevolve_engine.trainers.base import TrainContext, checked_trl_args, options_config  # how the run builds one
from coevolve_engine.trainers.trl_grpo.episodes import task_prompt

logger = logging.getLogger(__name__)

SUCCESSES_SQL = """
SELECT task_id, messages
FROM trajectories
WHERE reward >= $min_reward
  AND error IS NULL
  AND list_contains($task_ids, task_id)
ORDER BY task_id, step, trajectory_id
"""


def _normalised(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The chat with tool-call arguments as objects (as a chat template renders them); None when a call's arguments
    are not a JSON object (such a trajectory demonstrates nothing)."""
    chat = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            turn: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
            if isinstance(message.get("reasoning_content"), str):
                turn["reasoning_content"] = message["reasoning_content"]
            calls = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                arguments, error = parse_arguments(function.get("arguments"))
                if error is not None:
                    return None
                calls.append({"type": "function", "function": {"name": function.get("name"), "arguments": arguments}})
            if calls:
                turn["tool_calls"] = calls
            chat.append(turn)
        elif role == "tool":
            chat.append({"role": "tool", "name": message.get("name"), "content": message.get("content") or ""})
        else:
            chat.append({"role": role, "content": message.get("content") or ""})
    return chat if any(m["role"] == "assistant" for m in chat) else None


def _opening(environment: Any, task: dict[str, Any]) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """The messages an episode of the task opens with, and the tools it shows at each user turn (the first
    turn's are those the player renders in the prompt; BFCL's miss_func tools join at a later turn)."""
    episode = environment.start(task["task_id"], task["spec"])
    turn_tools = []
    try:
        while episode.next_turn() is not None:
            turn_tools.append(episode.tools())
    finally:
        episode.close()
    return task_prompt(environment, task), turn_tools


def demonstrations(
    db: str | Path,
    environment: Any,
    *,
    task_ids: list[str] | None = None,
    min_reward: float = 1.0,
    wait: float = DEFAULT_WAIT_SECONDS,
) -> list[dict[str, Any]]:
    """Demonstrations (``task_id``, ``messages``: the whole chat, ``tools``: the episode's own at its first turn,
    ``turn_tools``: at each turn) from the store's
    trajectories of ``environment``'s tasks with reward >= ``min_reward`` and no fault, identical ones once. A
    trajectory that does not open as the player opens the task (another system prompt, another first message)
    is left out: it would teach a prompt training never shows.

    task_ids: only these tasks (default: every task of the environment in the store).
    """
    with Store(db, read_only=True, wait=wait) as store:
        tasks = select_tasks(store, environment.name, task_ids=task_ids)
        rows = store.execute(SUCCESSES_SQL, {
            "min_reward": min_reward, "task_ids": [task["task_id"] for task in tasks]}).fetchall()
    by_task: dict[str, list[list[dict[str, Any]]]] = {}
    for task_id, messages in rows:
        by_task.setdefault(task_id, []).append(json.loads(messages) if isinstance(messages, str) else messages)
    tasks = [task for task in tasks if task["task_id"] in by_task]
    if not tasks:
        which = f" of tasks {', '.join(sorted(task_ids)[:5])}" if task_ids else ""
        raise CoevolveError(
            f"no {environment.name} trajectories{which} with reward >= {min_reward} in {db}: nothing to fine-tune "
            f"on; roll out demonstrations first, e.g. `coevolve-engine rollout --env {environment.name} "
            f"--model reference -k 1 --step 0`")
    demos: list[dict[str, Any]] = []
    seen: set[str] = set()
    skipped = 0
    for task in sorted(tasks, key=lambda t: t["task_id"]):
        opening, turn_tools = _opening(environment, task)
        tools = turn_tools[0] if turn_tools else []
        for messages in by_task[task["task_id"]]:
            chat = _normalised(messages)
            if chat is None or chat[:len(opening)] != opening or chat[len(opening)]["role"] != "assistant":
                skipped += 1
                continue
            key = json.dumps([task["task_id"], chat], sort_keys=True)
            if key not in seen:
                seen.add(key)
                demos.append({"task_id": task["task_id"], "messages": chat, "tools": tools, "turn_tools": turn_tools})
    if skipped:
        logger.warning("left out %d successful trajectories in %s that do not open as the episode player opens "
                       "their task, or whose tool calls cannot be read", skipped, db)
    if not demos:
        raise CoevolveError(f"no usable demonstrations in {db}: every successful trajectory was left out")
    return demos


@dataclass
class RFTConfig:
    """Settings of rejection-sampling fine-tuning (TRL SFT on successful trajectories).

    The defaults suit a tiny random policy on CPU: 100 steps of one demonstration at 5e-3 teach a 96-wide,
    2-layer Qwen3 three BFCL first turns (tests/test_trainer_sft.py). A pretrained policy wants a far smaller
    learning rate and a larger batch.
    """

    model: str = field(metadata={"help": "path of the policy to fine-tune (a transformers causal LM with a "
                                         "tool-calling chat template)"})
    output_dir: str = field(metadata={"help": "where TRL writes its files and the checkpoint after each train() call"})
    steps: int = field(default=100, metadata={"help": "optimizer steps of a train() call that names none"})
    learning_rate: float = field(default=5e-3, metadata={
        "help": "constant learning rate (5e-3 suits a tiny random model; use ~1e-5 or lower for a pretrained one)"})
    batch_size: int = field(default=1, metadata={
        "help": "demonstrations per optimizer step (1 gives a tiny model the most updates per second on CPU)"})
    max_length: int | None = field(default=None, metadata={
        "help": "truncate sequences to this many tokens (None: never; a truncated demonstration loses its end)"})
    use_cpu: bool | None = field(default=None, metadata={"help": "train on CPU (None: when no GPU is present)"})
    seed: int = field(default=0, metadata={"help": "seed of the data order and of any dropout"})
    save_checkpoint: bool = field(default=True,
        metadata={"help": "save the policy under output_dir/step-N after each train() call"})
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "extra chat template variables, as the episode player uses them (set by the run's [episode])"})
    trl_args: dict[str, Any] = field(default_factory=dict, metadata={"help": "further SFTConfig fields, passed as is"})

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1 (got {self.steps})")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {self.batch_size})")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0 (got {self.learning_rate})")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be >= 1 or None (got {self.max_length})")
        reserved = set(self.trl_args) & {"max_steps", "per_device_train_batch_size", "output_dir"}
        if reserved:
            raise ValueError(f"set {sorted(reserved)} through RFTConfig's own fields, not trl_args")


def sft_args(config: RFTConfig) -> Any:
    """TRL's ``SFTConfig`` for ``config``: the settings derived from it with its ``trl_args`` laid over them.
    Building it loads no model and writes nothing, so the run builds it before a round to check ``trl_args``."""
    import torch
    from trl import SFTConfig

    use_cpu = config.use_cpu if config.use_cpu is not None else not torch.cuda.is_available()
    settings: dict[str, Any] = dict(
        use_cpu=use_cpu, bf16=not use_cpu, learning_rate=config.learning_rate, lr_scheduler_type="constant",
        warmup_steps=0, gradient_accumulation_steps=1, max_length=config.max_length, seed=config.seed,
        completion_only_loss=True, packing=False,
        save_strategy="no", report_to="none", logging_steps=1, disable_tqdm=True,
    )
    settings.update(checked_trl_args(config.trl_args, SFTConfig))
    if use_cpu:
        settings["bf16"] = False
    with warnings.catch_warnings():  # TRL still sets transformers' renamed gradient_checkpointing
        warnings.filterwarnings("ignore", r".*gradient_checkpointing.* is deprecated", FutureWarning)
        return SFTConfig(output_dir=config.output_dir, per_device_train_batch_size=config.batch_size,
                         max_steps=1, **settings)  # max_steps is set by each train() call


def _dataset(rows: list[dict[str, Any]], tokenizer: Any, chat_template_kwargs: dict[str, Any]):
    """A ``datasets.Dataset`` of token ids and a completion mask per demonstration, built as the player builds an
    episode (``ChatTokens.episode``): the mask is 1 on every assistant message's tokens, in every turn. An episode
    whose template drops earlier turns' reasoning is several segments (``chat_tokens``), one record each."""
    from datasets import Dataset

    chat = ChatTokens(tokenizer, chat_template_kwargs)
    records = []
    for row in rows:
        tokens = chat.episode(row["messages"], row["tools"], row.get("turn_tools"))
        records += [{"input_ids": segment.prompt_ids + segment.completion_ids,
                     "completion_mask": [0] * len(segment.prompt_ids) + segment.mask} for segment in tokens.segments()]
    return Dataset.from_list(records)


class RFTTrainer(Trainer):
    """TRL SFT on demonstrations of the tasks the ``BatchSource`` weighs above 0; no rollouts, no sink writes.

    ``rows`` are ``demonstrations(...)`` rows; ``from_store`` builds them from a store.
    """

    def __init__(self, config: RFTConfig, rows: list[dict[str, Any]], source: BatchSource,
                 sink: TrajectorySink | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import SFTTrainer

        self.config, self.source, self.sink = config, source, sink
        weighted = {task for task, weight in source.weights().items() if weight > 0}
        self.rows = [row for row in rows if row["task_id"] in weighted]
        if not self.rows:
            raise ValueError(f"no demonstrations of the {len(weighted)} task(s) with a positive weight")
        self.steps_done = 0
        self.args = sft_args(config)
        tokenizer = AutoTokenizer.from_pretrained(config.model)
        model = AutoModelForCausalLM.from_pretrained(config.model, dtype=torch.float32)
        self._sft = SFTTrainer(model=model, processing_class=tokenizer, args=self.args,
                               train_dataset=_dataset(self.rows, tokenizer, config.chat_template_kwargs))
        self._quiet_logs()  # progress (Trainer.progress) gets a line every tenth of a train() call

    def _quiet_logs(self) -> None:
        """transformers prints every logged step as a dict (1000 lines for a 1000-step warm-up); instead, a
        line every tenth of the steps goes to ``self.progress``. The losses stay in ``state.log_history``."""
        from transformers import PrinterCallback, ProgressCallback, TrainerCallback

        trainer = self

        class TenthsCallback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                every = max(1, state.max_steps // 10)  # each train() call starts a new state at step 0
                if trainer.progress is not None and logs and "loss" in logs and (
                        state.global_step % every == 0 or state.global_step == state.max_steps):
                    trainer.progress(f"step {state.global_step}/{state.max_steps}: loss {logs['loss']:.4f}")

        self._sft.remove_callback(PrinterCallback)
        self._sft.remove_callback(ProgressCallback)
        self._sft.add_callback(TenthsCallback())

    @classmethod
    def from_store(cls, db: str | Path, config: RFTConfig, environment: Any, source: BatchSource, *,
                   min_reward: float = 1.0, wait: float = DEFAULT_WAIT_SECONDS) -> "RFTTrainer":
        """A trainer on the store's successful trajectories of the tasks ``source`` weighs above 0."""
        task_ids = [task for task, weight in source.weights().items() if weight > 0]
        rows = demonstrations(db, environment, task_ids=task_ids, min_reward=min_reward, wait=wait)
        without = sorted(set(task_ids) - {row["task_id"] for row in rows})
        if without:
            logger.warning("%d weighted task(s) have no demonstration in %s and are not fine-tuned on: %s",
                           len(without), db, ", ".join(without[:5]))
        return cls(config, rows, source)

    options_class = RFTConfig
    run_sets = ("model", "output_dir", "seed", "save_checkpoint", "steps")

    @classmethod
    def check_config(cls, config: RFTConfig) -> None:
        sft_args(config)  # TRL's own checks of the settings and trl_args

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: TrainContext) -> "RFTTrainer":
        c = context
        config = options_config(RFTConfig, options, dict(model=c.model, output_dir=c.output_dir, seed=c.seed,
                                                          save_checkpoint=True), "warm-up trainer sft",
                                reserved=cls.run_sets)
        trainer = cls.from_store(c.store_path, config, c.environment, c.source, wait=c.wait)
        trainer.steps_done = c.start_step
        return trainer

    @property
    def summary(self) -> dict[str, Any]:
        """What the run records about the warm-up: demonstrations used, and the loss at the first and last step."""
        losses = self.losses
        return {"demonstrations": len(self.rows), "tasks": len({row["task_id"] for row in self.rows}),
                "first_loss": round(losses[0], 4) if losses else None,
                "last_loss": round(losses[-1], 4) if losses else None}

    @property
    def model(self):
        return self._sft.model

    @property
    def losses(self) -> list[float]:
        """The training loss logged at each optimizer step of the latest train() call."""
        return [entry["loss"] for entry in self._sft.state.log_history if "loss" in entry]

    def train(self, steps: int | None = None) -> TrainReport:
        """Run ``steps`` optimizer steps (default ``config.steps``) and save the policy to output_dir/step-N."""
        steps = self.config.steps if steps is None else steps
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        clock = Stopwatch()
        first = self.steps_done + 1
        self._sft.args.max_steps = steps
        self._sft.train()
        self.steps_done += steps
        checkpoint = None
        if self.config.save_checkpoint and self._sft.accelerator.is_main_process:
            checkpoint = Path(self.config.output_dir) / f"step-{self.steps_done}"
            self._sft.save_model(str(checkpoint))
        return TrainReport(steps=steps, first_step=first, groups=0, rollouts=0, checkpoint=checkpoint,
                           seconds=clock())
