"""The configuration of `coevolve-engine run`: its sections and fields, each with a line of help.

A section is a dataclass whose fields are made with ``setting(default, help)``; ``options``/``settings`` fields
are free-form tables handed to a plugin (the trainer, the synthesizer, the curriculum strategy), which checks
them itself. Reading TOML files and ``--set`` overrides into a ``RunConfig`` is ``loop.config_files``; the
commented template (``run --print-config``) is ``loop.template``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coevolve_engine.adapters.agents.base import MAX_MODEL_CALLS_PER_TURN, MAX_NEW_TOKENS, MAX_STEPS
from coevolve_engine.core.settings import setting
from coevolve_engine.core.signal_params import SignalParams, signal_setting
from coevolve_engine.core.errors import CoevolveError, ConfigError  # noqa: F401 (ConfigError: the loop's)
from coevolve_engine.loop.models import ModelsConfig
from coevolve_engine.rollouts.jobs import MAX_GROUP_SIZE
from coevolve_engine.synthesis.candidates import MAX_CANDIDATES, offline_synthesizer
from coevolve_engine.synthesis.contamination import DEFAULT_THRESHOLD as CONTAMINATION_THRESHOLD
from coevolve_engine.synthesis.validation import ATTEMPTS, NOVELTY_THRESHOLD


SIGNAL_NAMES = ("forgetting", "boundary", "rare")
#: trainer.optimization: one optimization across the run's rounds, or a fresh one each round
OPTIMIZATIONS = ("run", "round")
#: the largest seed a run takes: SEED + R (and + 1 for unguided synthesis) stays below 2**32, the bound of
#: numpy's and transformers' set_seed, for any number of rounds a run could have
MAX_SEED = 2**31 - 1
#: the most rounds a run may have: it plans every round it has left when it starts
MAX_ROUNDS = 10_000


@dataclass
class BootstrapConfig:
    n: int = setting(0, "N: build the initial task set D_0 in round 0, before anything else, from this many "
                        "tasks an explorer model proposes by exploring the environment with no guidance (each "
                        "validated; accepted ones become training tasks). 0: no bootstrap, the store's training "
                        "tasks are used as they are. Its models are [models]' explorer and abstraction.")
    options: dict = setting({}, "Further settings passed to the bootstrap as they are (see `coevolve-engine "
                                "bootstrap --help`).")


@dataclass
class WarmupConfig:
    steps: int = setting(0, "SFT steps on the store's successful trajectories before round 0's training "
                            "(rejection-sampling fine-tuning; a random policy learns the action syntax from "
                            "them). 0: no warm-up.")
    trainer: str = setting("sft", "The trainer that runs the warm-up (a name in the trainer registry).")
    options: dict = setting({}, "The warm-up trainer's own settings, passed to it as they are (the "
                                "configured warm-up trainer's are listed here by `coevolve-engine run "
                                "--print-config`).")


@dataclass
class TrainerConfig:
    name: str = setting("trl-grpo", "The trainer (a name in the trainer registry: trl-grpo, or a plugin's).")
    model: str = setting("", "The policy round 0 starts from: a local model directory (required).")
    steps_per_round: int = setting(10, "F: optimizer steps per round; signals and new tasks come every F steps.")
    output_dir: str = setting("", "Where each round's checkpoint is written (round-R/ under it); empty: a folder "
                                  "named after the store, beside it (--db runs/NAME.duckdb: runs/NAME/checkpoints).")
    policy_name: str = setting("policy", "The policy id recorded with every rollout, as NAME@STEP.")
    steps_per_write: int = setting(1, "Training steps whose rollouts are written to the store in one unit of "
                                      "work (a reader waits at most one such write); more: fewer store opens.")
    optimization: str = setting("run", "run: the rounds are the steps of one optimization (the optimizer's "
                                       "moments, the schedule, the step counter and the sampling state go "
                                       "from round to round in the checkpoint, and the KL reference is the run's "
                                       "starting policy in every round), as one long GRPO run; round: each "
                                       "round starts a fresh optimizer from the previous round's checkpoint, "
                                       "which is also its KL reference.")
    launcher: str = setting("", "Train each round in processes of its own, started by this command followed by "
                                "`-m coevolve_engine.loop.train_round SPEC` (e.g. \"accelerate launch "
                                "--num_processes 8\", or a python executable); empty: in the run's process.")
    options: dict = setting({}, "The trainer's own settings, passed to it as they are (the configured "
                                "trainer's are listed here by `coevolve-engine run --print-config`).")


@dataclass
class SignalsConfig:
    """The signal constants (their defaults and help are ``SignalParams``'s) and the signals patterns use."""

    threshold: float = signal_setting("threshold")
    w: int = signal_setting("w")
    forgetting_form: str = signal_setting("forgetting_form")
    theta: float = signal_setting("theta")
    min_n: int = signal_setting("min_n")
    use: list = setting(list(SIGNAL_NAMES), "The signals whose flagged trajectories are clustered into failure "
                                            "patterns (so guide synthesis); every signal is still computed and "
                                            "counted. Drop one for the paper's 'without X' ablations.")


@dataclass
class PatternsConfig:
    max_trajectories: int = setting(2000, "Cluster at most this many flagged trajectories per round (a seeded "
                                          "sample when more are flagged).")
    max_k: int = setting(8, "Try at most this many failure patterns per round; the number is chosen by silhouette.")


@dataclass
class SynthesisConfig:
    synthesizer: str = setting("", "The synthesizer: empty: the environment's own, offline:ENV (ENV the run's "
                                   "env; no model needed; `coevolve-engine plugins` lists those installed), llm, "
                                   "llm-unguided (explores with no pattern guidance: the paper's 'random "
                                   "exploration' ablation), a plugin's name, or none: no feedback at all (rounds "
                                   "are weights, train and eval only: the paper's 'synthesis only' ablation, with "
                                   "D_0 from [bootstrap]).")
    max_candidates: int = setting(20, "Candidate tasks to propose per round, shared among the round's patterns.")
    options: dict = setting({}, "The synthesizer's own settings (llm: tasks_per_pattern, "
                                "max_explore_steps); its models are [models]'s.")
    kinds: dict = setting({}, "Share of each kind of task the LLM synthesizers (llm, llm-unguided) and the "
                              "bootstrap ask their model for, drawn per task from the run's seed; BFCL's kinds: "
                              "base, miss_func, miss_param, long_context (its own multi-turn mix: 1 each). "
                              "{}: base only.")


@dataclass
class ValidationConfig:
    enabled: bool = setting(True, "false: the paper's 'without validation' ablation: a candidate is accepted "
                                  "once its synthesizer wrote a task and the environment accepts its spec (the "
                                  "checks any runnable task needs) and it copies no held-out task "
                                  "(contamination_threshold); ground truth, novelty, agent attempt and judge are "
                                  "skipped, so the other settings below are unused. The agent and the judge are "
                                  "[models]'s.")
    novelty_threshold: float = setting(NOVELTY_THRESHOLD, "Reject a candidate whose prompt has a cosine similarity "
                                                          "at least this high to a stored task's.")
    contamination_threshold: float = setting(CONTAMINATION_THRESHOLD,
                                             "Refuse a candidate (reason 'contaminated') whose task words (masked "
                                             "words and keyed literals of every user turn) have a Jaccard "
                                             "similarity at least this high to a held-out task's; see the "
                                             "contamination view.")
    attempts: int = setting(ATTEMPTS, "Agent rollouts per candidate, with models.agent (validate's --attempts).")
    max_success_rate: float = setting(1.0, "Reject a candidate the agent solves more often than this (1.0: "
                                           "reject none on it).")


@dataclass
class EvalConfig:
    every: int = setting(1, "Evaluate the policy on the store's eval tasks (split 'eval') after every EVERY-th "
                            "round's training, and after the first and the last round's (the first also "
                            "evaluates the starting policy); 0: never.")
    max_tasks: int = setting(0, "Evaluate on at most this many eval tasks (the same seeded subset every time); "
                                "0: all of them.")


@dataclass
class EpisodeConfig:
    """How every episode is played, the same in training, evaluation and validation (the episode player)."""

    max_steps: int = setting(MAX_STEPS, "Environment steps (tool calls executed) per episode; one more fails the "
                                        "task; 0: no cap (BFCL's inference has none).")
    max_model_calls_per_turn: int = setting(MAX_MODEL_CALLS_PER_TURN,
                                            "Model answers per user turn; a turn the policy has not ended (with an "
                                            "answer that calls no tool) by then fails the task (BFCL's inference: "
                                            "21, its 'count > 20').")
    max_new_tokens: int = setting(MAX_NEW_TOKENS, "Tokens the policy may write per answer (training and evaluation).")
    chat_template_kwargs: dict = setting({}, "Extra chat template variables for the trainer, the eval phase and "
                                             "local agents, e.g. {enable_thinking = false} for Qwen3.")


@dataclass
class CurriculumConfig:
    strategy: str = setting("coevolve", "How each round's task weights are computed: coevolve, uniform, plr, "
                                        "dapo-filter, or a plugin's name.")
    settings: dict = setting({}, "The strategy's settings (listed by `coevolve-engine weights --help`).")


@dataclass
class AgentConfig:
    """How the agents the run builds from a model string sample their answers (validation's agent attempts)."""

    temperature: float = setting(0.9, "Sampling temperature of the agent's answers.")
    max_tokens: int = setting(1024, "Tokens the agent may write per answer.")
    timeout: float = setting(60.0, "Seconds to wait for one answer from a model server.")
    retries: int = setting(2, "Retries of a model call that failed with a retryable error (timeouts, 5xx, 429).")


@dataclass
class RunConfig:
    env: str = setting("bfcl", "The environment the tasks run in (a name in the environment registry).")
    env_options: dict = setting({}, "Options passed to the environment.")
    rounds: int = setting(2, "Rounds the run should have finished when it stops (a rerun with more extends it).")
    seed: int = setting(0, "Seed of every random choice; round R uses SEED + R.")
    models: ModelsConfig = setting(ModelsConfig, "The models the run calls (explorer, abstraction, summary, judge, "
                                                 "agent), each with its endpoint.")
    bootstrap: BootstrapConfig = setting(BootstrapConfig, "Optional initial task set D_0, built by unguided LLM "
                                                          "exploration before round 0.")
    warmup: WarmupConfig = setting(WarmupConfig, "Optional supervised warm-up of the policy before round 0.")
    trainer: TrainerConfig = setting(TrainerConfig, "The trainer and the policy.")
    signals: SignalsConfig = setting(SignalsConfig, "The signal constants (forgetting, boundary, rare).")
    patterns: PatternsConfig = setting(PatternsConfig, "Clustering flagged trajectories into failure patterns.")
    synthesis: SynthesisConfig = setting(SynthesisConfig, "Proposing new tasks around each failure pattern.")
    validation: ValidationConfig = setting(ValidationConfig, "Which candidates become tasks.")
    curriculum: CurriculumConfig = setting(CurriculumConfig, "How the task distribution moves between rounds.")
    eval: EvalConfig = setting(EvalConfig, "Held-out evaluation of the policy across rounds.")
    episode: EpisodeConfig = setting(EpisodeConfig, "How every episode is played: limits and chat template "
                                                    "settings, the same in training, eval and validation.")
    agent: AgentConfig = setting(AgentConfig, "How agents built from a model string (models.agent) "
                                              "sample: the settings `coevolve-engine rollout` takes as options.")

    def __post_init__(self) -> None:
        if not self.synthesis.synthesizer:  # the environment's own, as `synthesize` picks it
            self.synthesis.synthesizer = offline_synthesizer(self.env)

    def check(self) -> None:
        """Refuse values no run could use, naming the key."""
        positive = {"rounds": self.rounds, "trainer.steps_per_round": self.trainer.steps_per_round,
                    "trainer.steps_per_write": self.trainer.steps_per_write,
                    "patterns.max_trajectories": self.patterns.max_trajectories,
                    "patterns.max_k": self.patterns.max_k, "synthesis.max_candidates": self.synthesis.max_candidates,
                    "validation.attempts": self.validation.attempts}
        for key, value in positive.items():
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, got {value}")
        for key, value, most in (("rounds", self.rounds, MAX_ROUNDS),
                                 ("synthesis.max_candidates", self.synthesis.max_candidates, MAX_CANDIDATES),
                                 ("validation.attempts", self.validation.attempts, MAX_GROUP_SIZE)):
            if value > most:
                raise ConfigError(f"{key} must be at most {most:,}, got {value:,}")
        for key, value in {"warmup.steps": self.warmup.steps, "eval.every": self.eval.every,
                           "eval.max_tasks": self.eval.max_tasks, "bootstrap.n": self.bootstrap.n,
                           "episode.max_steps": self.episode.max_steps, "agent.retries": self.agent.retries,
                           "agent.temperature": self.agent.temperature, "agent.timeout": self.agent.timeout}.items():
            if value < 0:
                raise ConfigError(f"{key} must be >= 0, got {value}")
        for key, value in {"episode.max_new_tokens": self.episode.max_new_tokens,
                           "episode.max_model_calls_per_turn": self.episode.max_model_calls_per_turn,
                           "agent.max_tokens": self.agent.max_tokens}.items():
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, got {value}")
        for key, value in {"signals.threshold": self.signals.threshold,
                           "validation.max_success_rate": self.validation.max_success_rate}.items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{key} must be in [0, 1], got {value}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"seed must be in [0, {MAX_SEED}] (round R seeds its random choices with SEED + R, "
                              f"and numpy takes seeds below 2**32), got {self.seed}")
        novelty = self.validation.novelty_threshold
        if not 0.0 < novelty <= 1.0:
            raise ConfigError(f"validation.novelty_threshold must be in (0, 1], got {novelty}")
        contamination = self.validation.contamination_threshold
        if not 0.0 < contamination <= 1.0:
            raise ConfigError(f"validation.contamination_threshold must be in (0, 1], got {contamination}")
        if self.trainer.optimization not in OPTIMIZATIONS:
            raise ConfigError(f"trainer.optimization must be one of {', '.join(OPTIMIZATIONS)}, got "
                              f"{self.trainer.optimization!r}")
        if not self.trainer.model:
            raise ConfigError("trainer.model is required: the local model directory the policy starts from "
                              "(set it in the file or with --set trainer.model=PATH)")
        try:
            self.signal_params()
        except ValueError as exc:
            raise ConfigError(f"signals: {exc}") from None
        use = self.signals.use
        unknown = [name for name in use if name not in SIGNAL_NAMES]
        if unknown or not use or len(set(use)) != len(use):
            raise ConfigError(f"signals.use must list distinct signals among {', '.join(SIGNAL_NAMES)}, got {use!r}"
                              + (" (to switch all feedback off, set synthesis.synthesizer = \"none\")" if not use
                                 else ""))
        if self.bootstrap.n > 0 and not self.models.endpoint("explorer").model:
            raise ConfigError(f"models.explorer.model is required when bootstrap.n > 0 (got n = {self.bootstrap.n})")

    @property
    def feedback(self) -> bool:
        """Whether rounds look at the signals and synthesize tasks (false for synthesis.synthesizer = "none")."""
        return self.synthesis.synthesizer != "none"

    @property
    def signals_used(self) -> tuple[str, ...] | None:
        """The signals patterns are built from, in canonical order; None when all of them are."""
        used = tuple(name for name in SIGNAL_NAMES if name in self.signals.use)
        return None if used == SIGNAL_NAMES else used

    def signal_params(self) -> SignalParams:
        return SignalParams.of(self.signals)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def checkpoint_folder(output_dir: str, db: str | Path) -> Path:
    """Where a run on the store ``db`` writes its checkpoints: ``trainer.output_dir``, or when it is empty a
    folder named after the store beside it, so that two runs on two stores never share one."""
    if output_dir:
        return Path(output_dir)
    db = Path(db)
    return db.parent / db.stem / "checkpoints"
