"""The configuration of `coevolve-engine run`: one TOML file, every field with its help, CLI overrides.

    config = load_config(Path("run.toml"), overrides=["trainer.steps_per_round=4", "rounds=3"])
    print(render_template(RunConfig()))   # a commented TOML file with every field and its default

A section is a dataclass whose fields carry ``metadata={"help": ...}``; ``options``/``settings`` fields are
free-form tables handed to a plugin (the trainer, the synthesizer, the curriculum strategy), which checks
them itself. Unknown keys and values of the wrong type are refused with the file and the dotted key.

A file may start with ``extends = "other.toml"`` (relative to the file; chains allowed, cycles refused): it is
then read over that file and states only what differs, as the ablation recipes under ``recipes/`` do.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from coevolve_engine.errors import CoevolveError


class ConfigError(CoevolveError):
    """A configuration file or override that cannot be used; the message names the file and the key."""


def setting(default: Any, help: str, **kwargs: Any) -> Any:
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata={"help": help, **kwargs})
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, **kwargs})
    return field(default=default, metadata={"help": help, **kwargs})


def section(cls: type, help: str) -> Any:
    return field(default_factory=cls, metadata={"help": help})


SIGNAL_NAMES = ("forgetting", "boundary", "rare")


@dataclass
class BootstrapConfig:
    n: int = setting(0, "N: build the initial task set D_0 in round 0, before anything else, from this many "
                        "tasks an explorer model proposes by exploring the environment with no guidance (each "
                        "validated; accepted ones become training tasks). 0: no bootstrap, the store's training "
                        "tasks are used as they are.")
    explorer_model: str = setting("", "The model that explores the environment (litellm string, e.g. "
                                      "openai/Qwen2.5-72B-Instruct); required when n > 0.")
    model: str = setting("", "The model that turns each exploration into a task (litellm string); empty: the "
                             "explorer model.")
    api_base: str = setting("", "Base URL of an OpenAI-compatible server for both models; empty: the provider's "
                                "default.")
    options: dict = setting({}, "Further settings passed to the bootstrap as they are (see `coevolve-engine "
                                "bootstrap --help`).")


@dataclass
class WarmupConfig:
    steps: int = setting(0, "SFT steps on the store's successful trajectories before round 0's training "
                            "(rejection-sampling fine-tuning; a random policy learns the action syntax from "
                            "them). 0: no warm-up.")
    trainer: str = setting("sft", "The trainer that runs the warm-up (a name in the trainer registry).")
    options: dict = setting({}, "The warm-up trainer's own settings, passed to it as they are (sft's are "
                                "listed here by `coevolve-engine run --print-config`).")


@dataclass
class TrainerConfig:
    name: str = setting("trl-grpo", "The trainer (a name in the trainer registry: trl-grpo, or a plugin's).")
    model: str = setting("", "The policy round 0 starts from: a local model directory (required).")
    steps_per_round: int = setting(10, "F: optimizer steps per round; signals and new tasks come every F steps.")
    output_dir: str = setting("coevolve-checkpoints",
                              "Where each round's checkpoint is written (round-R/ under it).")
    policy_name: str = setting("policy", "The policy id recorded with every rollout, as NAME@STEP.")
    steps_per_write: int = setting(1, "Training steps whose rollouts are written to the store in one unit of "
                                      "work (a reader waits at most one such write); more: fewer store opens.")
    launcher: str = setting("", "Train each round in processes of its own, started by this command followed by "
                                "`-m coevolve_engine.loop.train_round SPEC` (e.g. \"accelerate launch "
                                "--num_processes 8\", or a python executable); empty: in the run's process.")
    options: dict = setting({}, "The trainer's own settings, passed to it as they are (trl-grpo's are "
                                "listed here by `coevolve-engine run --print-config`).")


@dataclass
class SignalsConfig:
    threshold: float = setting(0.5, "A rollout succeeds when its reward is at least this.")
    w: int = setting(3, "Forgetting: compare a task's score with its W most recent earlier scores.")
    forgetting_form: str = setting("group", "Forgetting's form: group (a step's mean score against the W earlier "
                                       "scores; all of the step's rollouts flagged) or trajectory (each failed "
                                       "rollout against them, as the paper states it).")
    theta: float = setting(5.0, "Rare: an action pattern whose share of all patterns so far is below THETA percent.")
    min_n: int = setting(50, "Rare: only once at least this many trajectories have an action pattern.")
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
    synthesizer: str = setting("offline:bfcl", "The synthesizer: offline:bfcl (no model needed), llm, "
                                               "llm-unguided (explores with no pattern guidance: the paper's "
                                               "'random exploration' ablation), a plugin's name, or none: no "
                                               "feedback at all (rounds are weights, train and eval only: the "
                                               "paper's 'synthesis only' ablation, with D_0 from [bootstrap]).")
    max_candidates: int = setting(20, "Candidate tasks to propose per round, shared among the round's patterns.")
    summary_model: str = setting("", "llm: summarise each failure pattern with this model first (litellm string); "
                                     "empty: no summaries.")
    options: dict = setting({}, "The synthesizer's own settings (llm: model, explorer_model, api_base, "
                                "tasks_per_pattern, max_explore_steps).")


@dataclass
class ValidationConfig:
    enabled: bool = setting(True, "false: the paper's 'without validation' ablation: a candidate is accepted "
                                  "once its synthesizer wrote a task and the environment accepts its spec (the "
                                  "checks any runnable task needs); ground truth, novelty, agent attempt and "
                                  "judge are skipped, so the settings below are unused.")
    novelty_threshold: float = setting(0.95, "Reject a candidate whose prompt has a cosine similarity at least "
                                             "this high to a stored task's.")
    agent_model: str = setting("", "Also roll this agent out K times on each candidate (litellm string or local "
                                   "directory); empty: no agent attempt.")
    k: int = setting(4, "Agent rollouts per candidate.")
    max_success_rate: float = setting(1.0, "Reject a candidate the agent solves more often than this (1.0: "
                                           "reject none on it).")
    judge_model: str = setting("", "Finally ask this model (litellm string) to rule on each task with a strict "
                                   "rubric; empty: no judge.")
    api_base: str = setting("", "Base URL of an OpenAI-compatible server for agent_model and judge_model.")


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

    max_steps: int = setting(30, "Environment steps (tool calls executed) per episode; one more fails the task "
                                 "(the paper: 30).")
    max_model_calls_per_turn: int = setting(20, "Model answers per user turn; a turn the policy has not ended "
                                                "(with an answer that calls no tool) by then fails the task "
                                                "(BFCL's inference: 20).")
    max_new_tokens: int = setting(256, "Tokens the policy may write per answer (training and evaluation).")
    chat_template_kwargs: dict = setting({}, "Extra chat template variables for the trainer, the eval phase and "
                                             "local agents, e.g. {enable_thinking = false} for Qwen3.")


@dataclass
class CurriculumConfig:
    strategy: str = setting("coevolve", "How each round's task weights are computed: coevolve, uniform, plr, "
                                        "dapo-filter, or a plugin's name.")
    settings: dict = setting({}, "The strategy's settings (listed by `coevolve-engine weights --help`).")


@dataclass
class RunConfig:
    env: str = setting("bfcl", "The environment the tasks run in (a name in the environment registry).")
    env_options: dict = setting({}, "Options passed to the environment.")
    rounds: int = setting(2, "Rounds the run should have finished when it stops (a rerun with more extends it).")
    seed: int = setting(0, "Seed of every random choice; round R uses SEED + R.")
    bootstrap: BootstrapConfig = section(BootstrapConfig, "Optional initial task set D_0, built by unguided LLM "
                                                          "exploration before round 0.")
    warmup: WarmupConfig = section(WarmupConfig, "Optional supervised warm-up of the policy before round 0.")
    trainer: TrainerConfig = section(TrainerConfig, "The trainer and the policy.")
    signals: SignalsConfig = section(SignalsConfig, "The signal constants (forgetting, boundary, rare).")
    patterns: PatternsConfig = section(PatternsConfig, "Clustering flagged trajectories into failure patterns.")
    synthesis: SynthesisConfig = section(SynthesisConfig, "Proposing new tasks around each failure pattern.")
    validation: ValidationConfig = section(ValidationConfig, "Which candidates become tasks.")
    curriculum: CurriculumConfig = section(CurriculumConfig, "How the task distribution moves between rounds.")
    eval: EvalConfig = section(EvalConfig, "Held-out evaluation of the policy across rounds.")
    episode: EpisodeConfig = section(EpisodeConfig, "How every episode is played: limits and chat template "
                                                    "settings, the same in training, eval and validation.")

    def check(self) -> None:
        """Refuse values no run could use, naming the key."""
        positive = {"rounds": self.rounds, "trainer.steps_per_round": self.trainer.steps_per_round,
                    "trainer.steps_per_write": self.trainer.steps_per_write,
                    "patterns.max_trajectories": self.patterns.max_trajectories,
                    "patterns.max_k": self.patterns.max_k, "synthesis.max_candidates": self.synthesis.max_candidates,
                    "validation.k": self.validation.k}
        for key, value in positive.items():
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, got {value}")
        for key, value in {"warmup.steps": self.warmup.steps, "eval.every": self.eval.every,
                           "eval.max_tasks": self.eval.max_tasks, "bootstrap.n": self.bootstrap.n,
                           "episode.max_steps": self.episode.max_steps}.items():
            if value < 0:
                raise ConfigError(f"{key} must be >= 0, got {value}")
        for key, value in {"episode.max_new_tokens": self.episode.max_new_tokens,
                           "episode.max_model_calls_per_turn": self.episode.max_model_calls_per_turn}.items():
            if value < 1:
                raise ConfigError(f"{key} must be at least 1, got {value}")
        for key, value in {"signals.threshold": self.signals.threshold,
                           "validation.max_success_rate": self.validation.max_success_rate}.items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{key} must be in [0, 1], got {value}")
        novelty = self.validation.novelty_threshold
        if not 0.0 < novelty <= 1.0:
            raise ConfigError(f"validation.novelty_threshold must be in (0, 1], got {novelty}")
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
        if self.bootstrap.n > 0 and not self.bootstrap.explorer_model:
            raise ConfigError(f"bootstrap.explorer_model is required when bootstrap.n > 0 (got n = {self.bootstrap.n})")

    @property
    def feedback(self) -> bool:
        """Whether rounds look at the signals and synthesize tasks (false for synthesis.synthesizer = "none")."""
        return self.synthesis.synthesizer != "none"

    @property
    def signals_used(self) -> tuple[str, ...] | None:
        """The signals patterns are built from, in canonical order; None when all of them are."""
        used = tuple(name for name in SIGNAL_NAMES if name in self.signals.use)
        return None if used == SIGNAL_NAMES else used

    def signal_params(self):
        from coevolve_engine.signals import SignalParams

        s = self.signals
        return SignalParams(threshold=s.threshold, w=s.w, theta=s.theta, min_n=s.min_n,
                            forgetting_form=s.forgetting_form)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _help(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


def _is_section(f: dataclasses.Field) -> bool:
    return isinstance(f.default_factory, type) and dataclasses.is_dataclass(f.default_factory)


_KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list"}


def _expected(default: Any) -> tuple[type, ...]:
    if isinstance(default, bool):
        return (bool,)
    if isinstance(default, float):
        return (int, float)
    return (type(default),)


def _build(cls: type, values: Mapping[str, Any], where: str, prefix: str = "") -> Any:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'the file'} must be a table, got {values!r}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else f"; known: {', '.join(sorted(known))}"
            raise ConfigError(f"{where}: unknown setting {prefix}{key}{hint}")
        f = known[key]
        if _is_section(f):
            kwargs[key] = _build(f.default_factory, value, where, f"{prefix}{key}.")
            continue
        default = getattr(cls(), key)
        if isinstance(default, dict):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {prefix}{key} must be a table, got {value!r}")
            kwargs[key] = dict(value)
            continue
        expected = _expected(default)
        if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
            raise ConfigError(f"{where}: {prefix}{key} must be {_KINDS[expected[-1]]}, got {value!r}")
        if isinstance(default, list):
            kinds = {type(item) for item in default} or {str}
            if any(type(item) not in kinds for item in value):
                raise ConfigError(f"{where}: {prefix}{key} must be a list of strings, got {value!r}")
            value = list(value)
        kwargs[key] = float(value) if expected[-1] is float else value
    return cls(**kwargs)


def _parse_value(text: str) -> Any:
    """A TOML value (4, 1e-3, true, "x", [1, 2], {a = 1}), or the text itself (a bare path or name)."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def apply_override(data: dict[str, Any], override: str) -> None:
    """Set KEY=VALUE (KEY dotted, e.g. trainer.options.learning_rate) in the raw table ``data``."""
    key, sep, text = override.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {override!r} is not KEY=VALUE (e.g. --set trainer.steps_per_round=4)")
    *parents, last = key.split(".")
    table = data
    for part in parents:
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            raise ConfigError(f"--set {override!r}: {part} is not a table")
    table[last] = _parse_value(text.strip())


def _read_table(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (write one with `coevolve-engine run --print-config > "
                          f"{path}`)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        line = Path(path).read_bytes()[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}, line {line}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                          f"{exc.start}); TOML files are UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` laid over it: tables merge key by key, any other value replaces."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_config_file(path: Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The raw table of a config file, with the file named by its top-level ``extends`` key (a path relative to
    this file; that file may extend another) underneath: this file states only what differs. Each file's keys
    are checked against the settings on their own, so an error names the file that has the bad key."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _chain:
        cycle = " -> ".join(p.name for p in (*_chain[_chain.index(resolved):], resolved))
        raise ConfigError(f"{path}: `extends` makes a cycle: {cycle}")
    data = _read_table(path)
    parent = data.pop("extends", None)
    _build(RunConfig, data, str(path))  # unknown keys and wrong types, named in this file
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f"{path}: extends must be the path of another config file, got {parent!r}")
    base = read_config_file(path.parent / parent, (*_chain, resolved))
    return merge(base, data)


def load_config(path: Path | None, overrides: list[str] | tuple[str, ...] = (), *, check: bool = True) -> RunConfig:
    """The file (if any, merged over the files it ``extends``) with the overrides applied, checked (unless
    ``check`` is false: a template may lack the required fields)."""
    data: dict[str, Any] = {}
    if path is not None:
        data = read_config_file(Path(path))  # the file's own keys are checked there, naming the file
    for override in overrides:
        apply_override(data, override)
        # each override on its own, so that an error names the --set that caused it, never the file
        _build(RunConfig, _override_only(override), f"--set {override}")
    config = _build(RunConfig, data, str(path) if path is not None else "--set")
    if check:
        try:
            config.check()
        except ConfigError as exc:
            source = _source_of(exc, path, overrides)
            if source is None or source in str(exc):
                raise
            raise ConfigError(f"{source}: {exc}") from None
    return config


def _override_only(override: str) -> dict[str, Any]:
    data: dict[str, Any] = {}
    apply_override(data, override)
    return data


def _source_of(exc: ConfigError, path: Path | None, overrides: list[str] | tuple[str, ...]) -> str | None:
    """Where a value that ``check`` refused came from: the last --set of its key, else the file."""
    for override in reversed(overrides):
        key = override.partition("=")[0].strip()
        if str(exc).startswith(f"{key} ") or f" {key} " in str(exc):
            return f"--set {override}"
    return str(path) if path is not None else None


def config_from_dict(data: Mapping[str, Any]) -> RunConfig:
    """A config as stored with a round (``RunConfig.to_dict``)."""
    return _build(RunConfig, data, "stored configuration")


def differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted keys whose values differ between two config dicts."""
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key), b.get(key)
        if isinstance(left, Mapping) and isinstance(right, Mapping):
            yield from differences(left, right, f"{prefix}{key}.")
        elif left != right:
            yield f"{prefix}{key}"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def _comment(text: str, indent: str = "") -> list[str]:
    import textwrap

    return [f"{indent}# {line}" for line in textwrap.wrap(text, 100 - len(indent))]


def render_template(config: RunConfig | None = None,
                    plugin_help: Mapping[str, list[tuple[str, Any, str]]] | None = None) -> str:
    """A commented TOML file with every field, its help and its value; ``plugin_help`` maps a dotted table
    (e.g. 'trainer.options') to (name, default, help) rows shown commented out inside that table."""
    config = config or RunConfig()
    plugin_help = plugin_help or {}
    lines = ["# coevolve-engine run configuration. Every field is optional except trainer.model;",
             "# the values shown are the defaults. Override any field with --set KEY=VALUE.", ""]

    def emit(obj: Any, prefix: str) -> None:
        sections = []
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            dotted = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value) or (isinstance(value, dict) and dotted in plugin_help):
                sections.append((f, value))
                continue
            lines.extend(_comment(_help(f)))
            lines.append(f"{f.name} = {_toml_value(value)}")
            lines.append("")
        for f, value in sections:
            dotted = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value):
                lines.extend([f"[{dotted}]"] + _comment(_help(f)) + [""])
                emit(value, f"{dotted}.")
            else:
                lines.extend([f"[{dotted}]"] + _comment(_help(f)))
                for name, default, text in plugin_help[dotted]:
                    lines.extend(_comment(text))
                    shown = "(not set)" if default is None else _toml_value(default)
                    lines.append(f"# {name} = {shown}")
                for name, item in value.items():
                    lines.append(f"{name} = {_toml_value(item)}")
                lines.append("")

    emit(config, "")
    return "\n".join(lines).rstrip() + "\n"
