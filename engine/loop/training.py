"""The phases that build the task set and train the policy: bootstrap, weights, warmup, train.

Each phase is a function ``(run, round, label) -> outputs``; ``weights`` and ``train`` also have a ``commit``
step, ``(run, round, store, outputs) -> outputs``, that the ledger runs inside the transaction that marks the
phase finished. Each has a ``describe_*`` function: one line on its stored outputs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from coevolve_engine.curriculum import compute_weights
from coevolve_engine.loop.config import checkpoint_folder
from coevolve_engine.loop.context import RunContext, RunError
from coevolve_engine.loop.launch import launch
from coevolve_engine.loop.ledger import record_checkpoint, record_round_start, round_row, warmup_checkpoint
from coevolve_engine.loop.summary import pct, plain_outputs, round_totals
from coevolve_engine.core.store import Store
from coevolve_engine.loop.train_round import TrainSpec, train_round
from coevolve_engine.core.endpoint import call_options
from coevolve_engine.synthesis.bootstrap import UnguidedSynthesizer, bootstrap as build_tasks
from coevolve_engine.synthesis.validation import ValidationOptions
from coevolve_engine.trainers import TRAINERS


#: the bootstrap.options the bootstrap itself reads; ValidationOptions' fields go to its validation, the rest to
#: its synthesizer
BOOTSTRAP_KEYS = ("max_worlds",)


def bootstrap(run: RunContext, round_: int, label: str) -> dict[str, Any]:
    """D_0: ``bootstrap.n`` tasks from unguided exploration (idempotent: a rerun adds only what is missing)."""
    c, b = run.config, run.config.bootstrap
    models = c.models.exploration()
    run.detail(label, f"{b.n} tasks by unguided exploration with {models['explorer'].model}")
    options = dict(b.options)  # each key to what reads it: the bootstrap, its validation, or its synthesizer
    own = {key: options.pop(key) for key in BOOTSTRAP_KEYS if key in options}
    checks = {f.name: options.pop(f.name) for f in dataclasses.fields(ValidationOptions) if f.name in options}
    validation = ValidationOptions(**{"novelty_threshold": c.validation.novelty_threshold,
                                      "contamination_threshold": c.validation.contamination_threshold, **checks})
    synthesizer = UnguidedSynthesizer(**{"store_path": run.db, "env": c.env, **models, "kinds": c.synthesis.kinds,
                                         **call_options(options)})
    report = build_tasks(run.db, synthesizer=synthesizer, n=b.n, seed=c.seed, round=0, validation=validation,
                         wait=run.wait, progress=lambda line: run.detail(label, line), **own)
    with run.store(read_only=True) as store:
        train = store.scalar("SELECT count(*) FROM tasks WHERE env = $env AND split = 'train'", {"env": c.env})
    if not train:
        raise RunError(f"the bootstrap accepted no {c.env} task, so there is nothing to train on; see why with "
                       "`coevolve-engine candidates --db ... --verdict rejected`")
    return {**plain_outputs(report), "train_tasks": train}


def describe_bootstrap(o: dict[str, Any]) -> str:
    shown = ", ".join(f"{k} {v}" for k, v in o.items() if isinstance(v, (int, float, str)) and k != "train_tasks")
    return f"{o['train_tasks']} training tasks" + (f" ({shown})" if shown else "")


def weights(run: RunContext, round_: int, store: Store, outputs: dict[str, Any]) -> dict[str, Any]:
    """(commit) The round's weight set: computed by the curriculum strategy, or one stored by hand kept."""
    c = run.config
    kept = store.scalar("SELECT count(*) FROM weight_sets WHERE round = $r", {"r": round_}) > 0
    if not kept:  # a weight set stored by hand (`coevolve-engine weights`) is used as it is
        compute_weights(store, round_, c.curriculum.strategy, c.signal_params(), settings=c.curriculum.settings,
                        env=c.env)
    strategy, tasks, nonzero, reason = store.execute(
        "SELECT strategy, tasks, nonzero, reason FROM weight_sets WHERE round = $r", {"r": round_}).fetchall()[0]
    return {"kept": kept, "strategy": strategy, "tasks": tasks, "nonzero": nonzero, "reason": reason}


def describe_weights(o: dict[str, Any]) -> str:
    kept = "kept the stored " if o.get("kept") else ""
    return f"{kept}{o['strategy']} weights for {o['tasks']} tasks ({o['nonzero']} drawable); {o['reason']}"


def warmup(run: RunContext, round_: int, label: str) -> dict[str, Any]:
    """Supervised fine-tuning of the starting policy on the store's successful trajectories."""
    c = run.config
    run.detail(label, f"{c.warmup.trainer}: {c.warmup.steps} steps from {c.trainer.model}")
    model = str(Path(c.trainer.model).resolve())
    spec = TrainSpec(
        db=str(run.db.resolve()), wait=run.wait, env=c.env, env_options=c.env_options,
        round=round_, trainer=c.warmup.trainer, model=model, resume_from="", reference_model=model,
        options=episode_options(c.warmup.trainer, c.episode, c.warmup.options),
        output_dir=str(checkpoint_folder(c.trainer.output_dir, run.db).resolve() / "round-0" / "warmup"),
        seed=c.seed, start_step=0, steps=c.warmup.steps,
        schedule_steps=0,  # the warm-up trainer's own schedule
        policy_name=c.trainer.policy_name, steps_per_write=c.trainer.steps_per_write,
        label="",  # the warm-up writes no rollouts
        echo_label=label,
    )
    result = train_round(spec, run.echo, run.environment)  # in the run's process, whatever trainer.launcher says
    if not result or not result.get("checkpoint"):
        raise RunError(f"warm-up trainer {c.warmup.trainer} saved no checkpoint")
    return {"trainer": c.warmup.trainer, "steps": result["steps"], "checkpoint": result["checkpoint"],
            **result.get("summary", {})}


def describe_warmup(o: dict[str, Any]) -> str:
    return f"{o['steps']} {o['trainer']} steps -> {o['checkpoint']}"


def train(run: RunContext, round_: int, label: str) -> dict[str, Any]:
    """F optimizer steps from the round's starting policy, after removing what an interrupted attempt wrote.
    With trainer.optimization = "run", the trainer continues the optimization saved in the previous round's
    checkpoint (optimizer, schedule, step, sampling state) against the run's starting policy as KL reference."""
    c = run.config
    policy, first, removed = _start_round(run, round_)
    if removed:
        run.echo(f"{label} removed {removed} rollouts of the interrupted attempt; training again from {policy}")
    steps = c.trainer.steps_per_round
    one = c.trainer.optimization == "run"  # one optimization: round R continues round R - 1's (checkpoint state)
    with run.store(read_only=True) as store:
        reference = round_row(store, 0).get("policy") if one else policy  # the run's starting policy
    spec = TrainSpec(
        db=str(run.db.resolve()), wait=run.wait, env=c.env, env_options=c.env_options,
        round=round_, trainer=c.trainer.name, model=policy,
        resume_from=policy if one and round_ > 0 else "", reference_model=reference or policy,
        options=episode_options(c.trainer.name, c.episode, c.trainer.options),
        output_dir=str(checkpoint_folder(c.trainer.output_dir, run.db).resolve() / f"round-{round_}"),
        seed=c.seed if one else c.seed + round_,  # one optimization: one seed, its draws numbered by step
        start_step=first - 1, steps=steps, policy_name=c.trainer.policy_name,
        # one optimization: one schedule over the run's steps from round 0; else each round's own
        schedule_steps=c.rounds * steps if one else steps,
        steps_per_write=c.trainer.steps_per_write,
        label=train_label(round_),  # names the rollouts' writes in the ingests table
        echo_label=label,
    )
    how = f" under `{c.trainer.launcher}`" if c.trainer.launcher else ""
    run.detail(label, f"{c.trainer.name}{how}: steps {first}..{first + steps - 1} from {policy}")
    if c.trainer.launcher:
        result = launch(spec, c.trainer.launcher, run.echo)
    else:
        result = train_round(spec, run.echo, run.environment)
    if not result or not result.get("checkpoint"):
        raise RunError(f"trainer {c.trainer.name} saved no checkpoint after round {round_}")
    recorded = {key: value for key, value in result.items() if key not in ("steps", "summary")}  # as always
    return {"policy": policy, "first_step": first, "last_step": first + steps - 1, **recorded}


def commit_train(run: RunContext, round_: int, store: Store, outputs: dict[str, Any]) -> dict[str, Any]:
    """(commit) The round's checkpoint recorded, and the success rate of its rollouts."""
    totals = round_totals(store, run.config, outputs["first_step"], outputs["last_step"])
    record_checkpoint(store, round_, outputs["checkpoint"])
    return {**outputs, "success_rate": totals["success_rate"]}


def describe_train(o: dict[str, Any]) -> str:
    return (f"steps {o['first_step']}..{o['last_step']}, {o['groups']} groups, {o['rollouts']} rollouts, "
            f"success {pct(o['success_rate'])} -> {o['checkpoint']}")


def train_label(round_: int) -> str:
    """What the round's train phase writes are named by in the ingests table (``StoreSink`` adds the group or
    steps after it): a redone attempt finds and removes exactly these."""
    return f"run round {round_} train"


def _start_round(run: RunContext, round_: int) -> tuple[str, int, int]:
    """In one transaction: record the round's starting policy and first step, or, when an earlier attempt
    recorded them, remove the rollouts that attempt wrote (the policy that wrote them died with it) and their
    ingests rows. Only the attempt's own writes go, found by their ingests label: rows another command put at
    the round's steps (``ingest trajectories``, ``rollout``) stay. Returns (policy, first step, rollouts
    removed)."""
    with run.store() as store, store.transaction():
        policy = _starting_policy(run, store, round_)
        first, removed = round_row(store, round_).get("first_step"), 0
        if first is not None:
            removed = store.remove_ingested(train_label(round_) + " ", kind="trajectories")
        else:
            first = int(store.scalar("SELECT coalesce(max(step), 0) FROM trajectories")) + 1
        record_round_start(store, round_, policy, int(first))
    return policy, int(first), removed


def _starting_policy(run: RunContext, store: Store, round_: int) -> str:
    """Round 0: the warmed-up checkpoint, else trainer.model; round R: round R - 1's checkpoint."""
    if round_ == 0:
        if run.config.warmup.steps > 0:
            warmed = warmup_checkpoint(store)
            if warmed:
                return warmed
        return str(Path(run.config.trainer.model).resolve())
    previous = round_row(store, round_ - 1).get("checkpoint")
    if not previous:
        raise RunError(f"round {round_ - 1} has no checkpoint recorded; its train phase did not finish")
    return previous


def episode_options(trainer: str, episode: Any, options: dict[str, Any]) -> dict[str, Any]:
    """A trainer's options with the run's ``[episode]`` settings its options class declares (so training plays
    episodes as evaluation does); setting one of them in the trainer's own options is refused."""
    settings = dataclasses.asdict(episode)
    clash = sorted(set(settings) & set(options))
    if clash:
        raise RunError(f"set {', '.join(clash)} under [episode], not in trainer {trainer}'s options: training and "
                       "evaluation play episodes with the same limits")
    declared = getattr(TRAINERS.load(trainer), "options_class", None)
    names = {f.name for f in dataclasses.fields(declared)} if declared is not None else set()
    return {**{key: value for key, value in settings.items() if key in names}, **options}
