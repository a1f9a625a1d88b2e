"""``TRLGRPOTrainer``: TRL's GRPOTrainer on the engine's tasks, weights and store.

- The dataset is the tasks: one row per task with its opening messages as the prompt and its spec (JSON).
- Sampling: the engine's ``WeightedGroupSampler`` (the one ``coevolve-engine sample`` and the verl dataset use)
  draws whole GRPO groups from the ``BatchSource``'s current weights, through TRL's ``_get_train_sampler``
  (``grpo.CoevolveGRPOTrainer``, the GRPOTrainer subclass, built when a trainer is: TRL and torch are heavy).
- Rollouts are whole episodes, played by the one episode player (``adapters.agents.player``) through TRL's
  ``rollout_func``: every user turn, the environment's own tool schemas, the same parser and limits as
  evaluation. The policy is the model being trained, answering all open episodes of a step with one ``generate``
  per round (``TokenPolicy``), on token ids built one answer at a time: the ids trained are the ids sampled, and
  ``env_mask`` masks out of the loss everything the policy did not sample (tool results, later user messages,
  the template around them).
- The reward is the environment's verdict on the whole episode (binary for BFCL, as in the paper).
- Every rollout goes to the ``TrajectorySink`` as soon as its step's episodes end. Rollouts are gathered from
  every process and written by the main process only, so the same code runs under ``accelerate launch``.
- One optimization across rounds: ``train`` ends by saving a transformers checkpoint (``checkpoint-G`` under
  output_dir: the weights, ``optimizer.pt``, ``scheduler.pt``, the RNG states, ``trainer_state.json`` with the
  global step G), and a trainer built with ``resume_from`` that checkpoint continues it through
  ``Trainer.train(resume_from_checkpoint=...)``. It is then built on the run's starting policy, so TRL's KL
  reference (``beta`` > 0) is that policy in every round. The task draws and the rollouts' sampling are seeded
  by (seed, step), so a run split into rounds, or killed and resumed, trains on what one long run would.
- Under a launcher each process plays its own episodes, which take different numbers of turns: the whole step's
  play happens inside one ``unwrap_model_for_generation`` (TRL's way; under ZeRO-3 it gathers the weights once,
  a collective every process joins once per step), and ``generate`` runs with ``synced_gpus=False``, so no
  collective depends on how many turns a process plays.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping

from coevolve_engine.adapters.agents.base import MAX_MODEL_CALLS_PER_TURN, MAX_NEW_TOKENS, MAX_STEPS, EpisodeLimits
from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.core.device import placement, training_dtype
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.sampler import check_batch_size, draw_seed
from coevolve_engine.core.sink import StoreSink
from coevolve_engine.core.store import Store
from coevolve_engine.core.tasks import select_tasks
from coevolve_engine.trainers.base import BatchSource, Stopwatch, Trainer, TrainReport, TrajectorySink
from coevolve_engine.trainers.base import TrainContext, checked_trl_args, options_config  # how the run builds one
from coevolve_engine.trainers.trl_grpo.episodes import play_episodes, task_prompt


@dataclass
class TRLGRPOConfig:
    """Settings of the TRL GRPO trainer; defaults follow the CoEvolve paper where it gives them."""

    #: options renamed so that a concept has one name across the project (old -> new): an old name is read under
    #: its new one with a warning, as every old name is (coevolve_engine.core.renamed)
    RENAMED: ClassVar[dict[str, str]] = {"num_generations": "group_size"}

    model: str = field(
        metadata={"help": "path of the policy to train (a transformers causal LM with a tool-calling chat template)"})
    output_dir: str = field(metadata={"help": "where TRL writes its files and the checkpoint after each train() call"})
    group_size: int = field(default=8, metadata={
        "help": "K: rollouts per group (GRPO group size; TRL's num_generations)"})
    groups_per_step: int = field(default=4, metadata={
        "help": "groups (tasks) drawn per optimizer step by each training process: under `accelerate launch "
                "--num_processes P` a step draws P times as many (4 x 8 = the paper's batch of 32)"})
    learning_rate: float = field(default=1e-6,
        metadata={"help": "learning rate (paper 1e-6, constant; a random tiny model needs ~1e-3); a schedule and "
                          "warm-up come from trl_args (lr_scheduler_type, warmup_steps) and span schedule_steps"})
    beta: float = field(default=1e-3,
        metadata={"help": "KL coefficient against the reference policy (0 drops the reference model)"})
    epsilon: float = field(default=0.2, metadata={"help": "lower clipping range of the policy ratio"})
    epsilon_high: float = field(default=0.28, metadata={"help": "upper clipping range of the policy ratio"})
    temperature: float = field(default=0.9, metadata={"help": "rollout sampling temperature"})
    max_completion_length: int = field(default=4096, metadata={
        "help": "tokens of an episode after its prompt (answers, tool results, later user turns); an episode that "
                "needs more fails (stop max_tokens)"})
    max_new_tokens: int = field(default=MAX_NEW_TOKENS, metadata={
        "help": "tokens the policy may write per answer (set by the run's [episode])"})
    max_steps: int = field(default=MAX_STEPS, metadata={
        "help": "environment steps per episode; one more fails the task; 0: no cap, as in BFCL (set by the run's "
                "[episode])"})
    max_model_calls_per_turn: int = field(default=MAX_MODEL_CALLS_PER_TURN, metadata={
        "help": "answers per user turn; a turn not ended by then fails the task; BFCL's inference: 21 (set by the "
                "run's [episode])"})
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict, metadata={
        "help": "extra chat template variables, e.g. {enable_thinking: false} (set by the run's [episode])"})
    use_cpu: bool | None = field(default=None, metadata={"help": "train on CPU (None: when no GPU is present)"})
    seed: int = field(default=0,
        metadata={"help": "seed of the model's sampling, reseeded at each step from (seed, step) (the group draws "
                          "use the BatchSource's seed)"})
    save_checkpoint: bool = field(default=True,
        metadata={"help": "save a checkpoint (output_dir/checkpoint-G: the policy, optimizer, schedule, RNG and "
                          "step G) after each train() call; the next call, or a trainer given it as resume_from, "
                          "continues it"})
    policy_name: str | None = field(default=None,
        metadata={"help": "policy id recorded with rollouts (default: the model folder's name)"})
    resume_from: str = field(default="", metadata={
        "help": "a checkpoint-G folder a trl-grpo train() saved: continue its optimization (weights, optimizer, "
                "schedule, step) with model as the starting policy and KL reference; empty: start afresh"})
    generation_batch_size: int = field(default=0, metadata={
        "help": "episodes per generate call while a step plays (each call pads its episodes to the widest and holds "
                "their KV cache); 0: every open episode of the process at once. The step's episodes stay one GRPO "
                "batch"})
    micro_batch_size: int = field(default=0, metadata={
        "help": "episodes per forward and backward pass (TRL's per_device_train_batch_size): the step's K x "
                "groups_per_step episodes are scored together (each group's advantage over the whole group), then "
                "trained in micro-batches whose gradients add up to one optimizer step; must divide K x "
                "groups_per_step; 0: the whole step in one pass. With thinking on, each micro-batch holds its share "
                "of the step's segment rows"})
    activation_checkpointing: bool = field(default=False, metadata={
        "help": "recompute each layer's activations in the backward pass instead of keeping them (less memory, "
                "about a third more compute)"})
    schedule_steps: int = field(default=0, metadata={
        "help": "optimizer steps the learning-rate schedule (and its warm-up) spans from the optimization's first "
                "step: the run sets its rounds x steps_per_round, so rounds continue one schedule; 0: the steps "
                "done when a train() call ends"})
    trl_args: dict[str, Any] = field(default_factory=dict, metadata={"help": "further GRPOConfig fields, passed as is"})

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ValueError(
                f"group_size must be >= 2: GRPO compares rollouts within a group (got {self.group_size})")
        if self.groups_per_step < 1:
            raise ValueError(f"groups_per_step must be >= 1 (got {self.groups_per_step})")
        # the sampler's own check (a ValueError): a round is never refused at train for a batch this let through
        check_batch_size(self.group_size, self.groups_per_step)
        if self.max_new_tokens < 1 or self.max_completion_length < 1:
            raise ValueError("max_new_tokens and max_completion_length must be >= 1")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0: rollouts are sampled (got {self.temperature})")
        negative = [f"{name} = {value}" for name, value in (
            ("learning_rate", self.learning_rate), ("beta", self.beta), ("epsilon", self.epsilon),
            ("epsilon_high", self.epsilon_high)) if not value >= 0]  # NaN too
        if negative:
            raise ValueError(f"{', '.join(negative)}: must be >= 0")
        EpisodeLimits(max_steps=self.max_steps, max_model_calls_per_turn=self.max_model_calls_per_turn)  # checks
        if self.generation_batch_size < 0 or self.micro_batch_size < 0:
            raise ValueError("generation_batch_size and micro_batch_size must be >= 0 (0: no bound)")
        episodes = self.group_size * self.groups_per_step
        if self.micro_batch_size and episodes % self.micro_batch_size:
            raise ValueError(f"micro_batch_size = {self.micro_batch_size} must divide the step's group_size x "
                             f"groups_per_step = {episodes} episodes (e.g. {_divisor_below(episodes, self.micro_batch_size)})")
        if self.trl_args.get("use_vllm"):
            raise ValueError("use_vllm: whole episodes are played by the episode player with the model being "
                             "trained, batched in process; TRL's vLLM generation is not wired into it yet, so it "
                             "would load a vLLM engine that generates nothing (leave use_vllm unset)")
        if self.trl_args.get("ds3_gather_for_generation") is False:
            raise ValueError("ds3_gather_for_generation = false: every forward pass would then be a collective of "
                             "all processes, which play different numbers of turns per step; the episodes are "
                             "played with the weights gathered once per step")
        reserved = set(self.trl_args) & {"num_generations", "max_steps", "per_device_train_batch_size", "output_dir",
                                         "ignore_data_skip", "save_strategy", "gradient_accumulation_steps",
                                         "steps_per_generation", "generation_batch_size", "activation_checkpointing",
                                         "gradient_checkpointing"}
        if reserved:
            raise ValueError(f"set {sorted(reserved)} through TRLGRPOConfig's own fields, not trl_args "
                             "(num_generations is group_size; per_device_train_batch_size, gradient_accumulation_steps "
                             "and steps_per_generation follow micro_batch_size; TRL's generation_batch_size is the "
                             "step's episodes; gradient_checkpointing is activation_checkpointing)")
        if self.schedule_steps < 0:
            raise ValueError(f"schedule_steps must be >= 0 (got {self.schedule_steps})")
        schedule = str(self.trl_args.get("lr_scheduler_type", "constant"))
        if schedule in STEP_FREE_SCHEDULES:
            raise ValueError(f"trl_args.lr_scheduler_type = {schedule!r}: its learning rate follows evaluation "
                             "metrics, not the optimizer step, and trl-grpo evaluates nothing while training, so the "
                             "schedule could not be carried from round to round; use a schedule of the step "
                             "(constant, linear, cosine, constant_with_warmup, ...)")


def _divisor_below(n: int, bound: int) -> int:
    """The largest divisor of ``n`` below ``bound`` (a valid micro_batch_size to suggest)."""
    return max(d for d in range(1, min(n, bound) + 1) if n % d == 0)


#: transformers' schedules whose learning rate is not a function of the optimizer step (they follow metrics)
STEP_FREE_SCHEDULES = ("reduce_lr_on_plateau", "greedy")

# transformers 5 renamed gradient_checkpointing to activation_checkpointing; TRL still uses the old names, and
# the warnings say nothing a user of this trainer can act on.
_RENAMED = r".*gradient_checkpointing.* is deprecated"


def precision_settings(where: Any) -> dict[str, bool]:
    """TRL's device and mixed-precision settings for a ``core.device.Placement``: the one choice of device and
    dtype that the eval phase and local agents also follow."""
    return {"use_cpu": where.device == "cpu", "bf16": where.dtype == "bfloat16", "fp16": where.dtype == "float16"}


def grpo_args(config: TRLGRPOConfig) -> Any:
    """TRL's ``GRPOConfig`` for ``config``: the settings derived from it with its ``trl_args`` laid over them.
    Building it loads no model and writes nothing, so the run builds it before a round to check ``trl_args``."""
    from trl import GRPOConfig

    where = placement(config.use_cpu)
    precision = precision_settings(where)
    episodes = config.group_size * config.groups_per_step
    micro = config.micro_batch_size or episodes
    # one optimizer step = one generation batch of the step's episodes, trained in episodes / micro passes
    accumulation = episodes // micro
    settings: dict[str, Any] = dict(
        **precision, learning_rate=config.learning_rate, lr_scheduler_type="constant",
        beta=config.beta, epsilon=config.epsilon, epsilon_high=config.epsilon_high, temperature=config.temperature,
        gradient_accumulation_steps=accumulation, steps_per_generation=accumulation,
        activation_checkpointing=config.activation_checkpointing,
        max_completion_length=config.max_completion_length, seed=config.seed,
        # train() saves the checkpoint at its last step; a resumed train() draws by step, replaying no batch
        save_strategy="no", ignore_data_skip=True, report_to="none", logging_steps=1, disable_tqdm=True,
    )
    settings.update(checked_trl_args(config.trl_args, GRPOConfig))
    if precision["use_cpu"]:
        settings["bf16"] = settings["fp16"] = False
    elif config.beta > 0 and "model_init_kwargs" not in settings:
        # the KL reference is only read: TRL builds it in these settings, in the placement's precision (bf16 on a
        # GPU; TRL would copy the trained policy's fp32). Under ZeRO-3 DeepSpeed shards it and casts it anyway
        settings["model_init_kwargs"] = {"dtype": where.dtype}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_RENAMED, category=FutureWarning)
        return GRPOConfig(output_dir=config.output_dir, num_generations=config.group_size,
                          per_device_train_batch_size=micro,
                          max_steps=1, **settings)  # max_steps is set by each train() call


def environment_reward(prompts, completions, episode_reward, **_: Any) -> list[float]:
    """The environment's verdict on each whole episode (the ``rollout_func`` hands it over as ``episode_reward``)."""
    return [float(reward) for reward in episode_reward]


environment_reward.__name__ = "environment"


class TRLGRPOTrainer(Trainer):
    """GRPO with TRL on tasks of one environment, drawing from a ``BatchSource``, reporting to a ``TrajectorySink``.

    ``tasks`` are task records (``task_id``, ``spec``) of ``environment``; the source's weights may name only
    these tasks. The environment's score is the reward (and what the store records); ``reward_funcs`` are
    optional extra TRL reward functions (``f(prompts, completions, **row) -> list[float]``, e.g. a format
    reward) added to it for training only.
    """

    def __init__(
        self,
        config: TRLGRPOConfig,
        environment: Any,
        tasks: list[dict[str, Any]],
        source: BatchSource,
        sink: TrajectorySink,
        reward_funcs: list[Any] | None = None,
        *,
        start_step: int = 0,
    ) -> None:
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from coevolve_engine.trainers.trl_grpo.grpo import CoevolveGRPOTrainer, SaveAtEnd

        if not tasks:
            raise ValueError("no tasks to train on")
        self.config, self.environment, self.source, self.sink = config, environment, source, sink
        self.steps_done = start_step  # the first rollouts are at step start_step + 1
        self._resume = config.resume_from or None  # the checkpoint the next train() continues
        self._first_global = 0  # transformers' global step when the current train() call began
        self.groups = self.rollouts = 0
        self.policy_name = config.policy_name or Path(config.model).name
        specs = [{**task, "spec": task["spec"] if isinstance(task["spec"], dict) else json.loads(task["spec"])}
                 for task in tasks]
        rows = [{"prompt": task_prompt(environment, task), "task_id": task["task_id"], "spec": json.dumps(task["spec"])}
                for task in specs]
        source.weights()  # fails early on a bad source
        self.args = grpo_args(config)
        tokenizer = AutoTokenizer.from_pretrained(config.model)
        tokenizer.padding_side = "left"
        # in the training precision (core.device.training_dtype: fp32 master weights under mixed precision)
        model = AutoModelForCausalLM.from_pretrained(config.model, dtype=training_dtype())
        tied_weights_not_saved(model)
        with warnings.catch_warnings():  # rollout_func is marked experimental in TRL 1.16; we chose it
            warnings.filterwarnings("ignore", message=".*rollout_func.*experimental", category=UserWarning)
            self._grpo = CoevolveGRPOTrainer(
                model=model, processing_class=tokenizer, args=self.args, train_dataset=Dataset.from_list(rows),
                reward_funcs=[environment_reward, *(reward_funcs or [])], rollout_func=self._rollout_func,
                source=source,
            )
        from transformers import PrinterCallback

        # transformers would print each step's metrics as a dict; the sink reports progress per group, and the
        # metrics stay in state.log_history
        self._grpo.remove_callback(PrinterCallback)
        if config.save_checkpoint:
            self._grpo.add_callback(SaveAtEnd())

    @classmethod
    def from_store(
        cls, db: str | Path, config: TRLGRPOConfig, environment: Any, source: BatchSource, *,
        reward_funcs: list[Any] | None = None, wait: float = DEFAULT_WAIT_SECONDS,
        sink: TrajectorySink | None = None,
        start_step: int = 0,
    ) -> "TRLGRPOTrainer":
        """A trainer on the store's tasks that ``source`` names, writing its rollouts back to the same store
        (through ``sink``, default a ``StoreSink`` on ``db``)."""
        with Store(db, read_only=True, wait=wait) as store:
            tasks = select_tasks(store, environment.name, task_ids=source.task_ids())
        missing = sorted(set(source.task_ids()) - {task["task_id"] for task in tasks})
        if missing:
            raise CoevolveError(
                f"{len(missing)} weighted task(s) are not {environment.name} tasks in {db}: {', '.join(missing[:5])}. "
                f"A run trains on one environment's tasks: ingest each as a {environment.name} task (a placeholder "
                "from `ingest trajectories --create-tasks` is filled in by a later `ingest tasks` of the real "
                "record), or remove it with `coevolve-engine query --write \"delete from trajectories where "
                "task_id = 'ID'; delete from tasks where task_id = 'ID'\"`, then run again (it resumes)")
        return cls(config, environment, tasks, source, sink if sink is not None else StoreSink(db, wait=wait),
                   reward_funcs=reward_funcs, start_step=start_step)

    options_class = TRLGRPOConfig
    run_sets = ("model", "output_dir", "seed", "policy_name", "save_checkpoint", "resume_from", "schedule_steps")
    carries_optimization = True

    @classmethod
    def check_config(cls, config: TRLGRPOConfig) -> None:
        grpo_args(config)  # TRL's own checks of the settings and trl_args

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: TrainContext) -> "TRLGRPOTrainer":
        c = context
        # continuing the run's optimization: built on its starting policy (the KL reference), the weights come
        # from the checkpoint; else built on the round's starting policy
        model = (c.reference_model or c.model) if c.resume_from else c.model
        config = options_config(TRLGRPOConfig, options, dict(
            model=model, output_dir=c.output_dir, seed=c.seed, policy_name=c.policy_name, save_checkpoint=True,
            resume_from=c.resume_from, schedule_steps=c.schedule_steps), "trainer trl-grpo", reserved=cls.run_sets)
        return cls.from_store(c.store_path, config, c.environment, c.source, sink=c.sink, start_step=c.start_step,
                              wait=c.wait)

    @property
    def model(self):
        return self._grpo.model

    def train(self, steps: int) -> TrainReport:
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        clock = Stopwatch()
        groups, rollouts, first = self.groups, self.rollouts, self.steps_done + 1
        self._first_global = _global_step(self._resume)
        self._grpo.args.max_steps = self._first_global + steps  # the optimization's step count, carried on
        if self.config.schedule_steps and self._grpo.args.max_steps > self.config.schedule_steps:
            raise CoevolveError(f"this train() call would end at optimizer step {self._grpo.args.max_steps}, past the "
                                f"{self.config.schedule_steps} steps its learning-rate schedule spans (schedule_steps)")
        self._grpo.schedule_steps = self.config.schedule_steps
        self._grpo.first_draw = self.steps_done  # the run's step numbers the draws, whichever call makes them
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_RENAMED, category=FutureWarning)
            self._grpo.train(resume_from_checkpoint=self._resume)
        if hasattr(self.sink, "flush"):
            self.sink.flush()  # the steps a sink kept to write together are in the store when training returns
        self.steps_done += steps
        checkpoint = None
        if self.config.save_checkpoint:
            saved = Path(self.config.output_dir) / f"checkpoint-{self._grpo.state.global_step}"
            self._resume = str(saved)  # a next train() call continues from it
            if self._grpo.accelerator.is_main_process:
                checkpoint = saved
        return TrainReport(steps=steps, first_step=first, groups=self.groups - groups,
                           rollouts=self.rollouts - rollouts, checkpoint=checkpoint, seconds=clock())

    def _rollout_func(self, prompts: list, grpo: Any) -> dict[str, Any]:
        """TRL's ``rollout_func``: play the step's episodes (``grpo.rows``, one per prompt) to their end."""
        from accelerate.utils import gather_object

        rows = grpo.rows  # kept by CoevolveGRPOTrainer.training_step: the prompts' rows, in their order
        if len(rows) != len(prompts):
            raise RuntimeError(f"rollout_func got {len(prompts)} prompts for {len(rows)} rows")
        import torch
        from trl.models import unwrap_model_for_generation

        training = grpo.model.training
        step = self.steps_done + grpo.state.global_step - self._first_global + 1
        # the sampling state of step S is (seed, S, process): the same in one long run and in one split into
        # rounds or resumed after a kill
        torch.manual_seed(draw_seed(self.config.seed, step * 4096 + grpo.accelerator.process_index))
        # TRL's way to generate with the trained model: under ZeRO-3 the weights are gathered here, once per
        # step on every process; the episodes then take as many turns as they need on each process
        with unwrap_model_for_generation(grpo.model_wrapped, grpo.accelerator,
                                         gather_deepspeed3_params=grpo.args.ds3_gather_for_generation) as model:
            output, rollouts = play_episodes(self.environment, rows, model, grpo.processing_class,
                                             self.config, policy=f"{self.policy_name}@{step - 1}")
        if training:
            everything = gather_object(rollouts)
            if grpo.accelerator.is_main_process:
                self._report(everything, step, self.config.group_size)
        return output

    def _report(self, rollouts: list, step: int, k: int) -> None:
        """Hand the step's groups (K consecutive rollouts of one task each) to the sink at once, with ids."""
        seen: Counter[str] = Counter()
        groups = []
        for start in range(0, len(rollouts), k):
            group = rollouts[start:start + k]
            task_id = group[0].task_id
            if any(r.task_id != task_id for r in group) or len(group) != k:
                raise RuntimeError(f"a GRPO group at step {step} is not {k} rollouts of one task; sampling is broken")
            seen[task_id] += 1
            group_id = f"{task_id}@{step}" if seen[task_id] == 1 else f"{task_id}@{step}~{seen[task_id]}"
            for index, rollout in enumerate(group):
                rollout.sample_index, rollout.group_id, rollout.step = index, group_id, step
            groups.append((group_id, group))
        if hasattr(self.sink, "write_groups"):
            self.sink.write_groups(groups, step=step)  # one unit of work per step
        else:  # a sink that only knows groups
            for group_id, group in groups:
                self.sink.write_group(group, step=step, group_id=group_id)
        self.groups += len(groups)
        self.rollouts += sum(len(group) for _, group in groups)


def tied_weights_not_saved(model: Any) -> None:
    """Name a model's tied weights (a tied output embedding: ``lm_head.weight``) as weights its checkpoints do not
    hold. A tied weight is saved once, under the input embedding, so a checkpoint lacks it by design; named so,
    transformers' resume ties it again instead of warning that the checkpoint misses it."""
    tied = set(getattr(model, "all_tied_weights_keys", None) or ())
    if tied:
        model._keys_to_ignore_on_save = set(model._keys_to_ignore_on_save or ()) | tied


def _global_step(checkpoint: str | None) -> int:
    """The optimizer steps a transformers checkpoint has done (its trainer_state.json); 0 for none."""
    if not checkpoint:
        return 0
    state = Path(checkpoint) / "trainer_state.json"
    if not state.exists():
        raise CoevolveError(f"resume_from: {checkpoint} is not a checkpoint a trl-grpo round saved (no "
                            f"{state.name}); its optimization cannot be continued (trainer.optimization = \"round\" "
                            "starts a fresh one from it)")
    return int(json.loads(state.read_text(encoding="utf-8"))["global_step"])
