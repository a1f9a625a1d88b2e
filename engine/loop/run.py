"""The co-evolution loop: rounds of train -> eval -> signals -> patterns -> synthesize -> validate -> new weights.

Round R runs these phases, in order (``bootstrap`` and ``warmup`` only in round 0, and only when configured;
the last four only when the run has feedback, i.e. ``synthesis.synthesizer`` is not "none"):

    bootstrap   the initial task set D_0: an explorer model explores the environment unguided, tasks are
                abstracted and validated, accepted ones become training tasks (``[bootstrap]``, n > 0)
    weights     the task weights round R trains on (weight set R), from everything the store holds
    warmup      supervised fine-tuning of the starting policy on the store's successful trajectories
    train       F optimizer steps of the trainer, drawing GRPO groups by weight; every rollout goes to the store
    eval        the round's checkpoint (and in round 0 the starting policy) on the store's eval tasks, greedy;
                results in evaluations / eval_results (every ``eval.every`` rounds; skipped without eval tasks)
    signals     what was flagged over the round's steps (forgetting, boundary, rare), counted
    patterns    the flagged trajectories of the round's steps clustered into failure patterns (round R); only
                trajectories flagged by the signals in ``signals.use``
    synthesize  candidate tasks proposed around each pattern, stored as pending
    validate    each pending candidate checked; accepted ones become tasks, drawn from round R + 1 on (with
                ``validation.enabled = false`` only the checks a runnable task needs: synthesis and schema)

How a killed run resumes. ``run_phases`` has one row per phase started; a phase's outputs and its 'finished'
mark are committed together where the phase writes in one transaction (weights, patterns). The others are
safe to run again from the start: ``bootstrap`` keeps what an earlier attempt stored and adds only what is
missing; ``train`` first removes the rollouts an interrupted attempt wrote (the
policy that wrote them died with the process) and trains again from the round's starting checkpoint with the
same seed; ``synthesize`` adds only candidates not yet stored; ``validate`` checks only pending candidates,
each verdict committed with its task. So a rerun starts at the first unfinished phase, and nothing is lost or
written twice.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from coevolve_engine.errors import CoevolveError
from coevolve_engine.loop.config import ConfigError, RunConfig, config_from_dict, differences
from coevolve_engine.loop.summary import (
    ROUND_SIGNALS_SQL,
    describe,
    plain_outputs,
    round_line,
    round_totals,
    to_json,
)
from coevolve_engine.loop.train_round import train_round
from coevolve_engine.progress import advance, detail, progress
from coevolve_engine.store import DEFAULT_WAIT_SECONDS, Store

PHASES = ("bootstrap", "weights", "warmup", "train", "eval", "signals", "patterns", "synthesize", "validate")
FEEDBACK_PHASES = ("signals", "patterns", "synthesize", "validate")
#: the phases that show a progress bar, and what the bar counts (short phases show only their closing line)
BAR_UNITS = {"bootstrap": "task", "warmup": "step", "train": "step", "eval": "task", "patterns": "pattern",
             "synthesize": "candidate", "validate": "candidate"}




class RunError(CoevolveError):
    """The loop cannot go on as configured (the message says what to change)."""


@dataclass
class PhaseResult:
    round: int
    phase: str
    seconds: float
    outputs: dict[str, Any]
    resumed: bool = False  # an earlier attempt was interrupted


@dataclass
class RunReport:
    rounds: int  # rounds the store has finished
    done: list[PhaseResult] = field(default_factory=list)  # phases this call ran
    skipped: int = 0  # phases already finished before this call


class RunLoop:
    """Runs (or resumes) the loop on the store at ``db`` until ``config.rounds`` rounds are finished."""

    def __init__(self, db: str | Path, config: RunConfig, *, wait: float = DEFAULT_WAIT_SECONDS,
                 echo: Callable[[str], None] = print) -> None:
        config.check()
        self.db = Path(db)
        self.config = config
        self.wait = wait
        self.echo = echo
        self._environment = None
        self._embedder = None  # the sentence embedder, loaded by the first patterns phase and kept for the run

    # -- the plan ------------------------------------------------------------------------------------------

    def phases(self, round_: int) -> list[str]:
        c = self.config
        every = c.eval.every
        wanted = {"bootstrap": round_ == 0 and c.bootstrap.n > 0, "warmup": round_ == 0 and c.warmup.steps > 0,
                  # every EVERY-th round, and always the first (with the starting policy) and the last: a run's
                  # held-out curve has its start and its end whatever EVERY is
                  "eval": every > 0 and (round_ in (0, c.rounds - 1) or (round_ + 1) % every == 0),
                  **{phase: c.feedback for phase in FEEDBACK_PHASES}}
        return [p for p in PHASES if wanted.get(p, True)]

    def _store(self, read_only: bool = False) -> Store:
        return Store(self.db, read_only=read_only, create=False, wait=self.wait)

    def status(self) -> dict[tuple[int, str], str]:
        with self._store(read_only=True) as store:
            rows = store.execute("SELECT round, phase, status FROM run_phases").fetchall()
        return {(r, p): s for r, p, s in rows}

    def remaining(self) -> list[tuple[int, str]]:
        """(round, phase) still to run, in order."""
        status = self.status()
        return [(r, p) for r in range(self.config.rounds) for p in self.phases(r) if status.get((r, p)) != "finished"]

    @property
    def environment(self):
        if self._environment is None:
            from coevolve_engine.adapters.environments import load_environment

            self._environment = load_environment(self.config.env, **self.config.env_options)
        return self._environment

    # -- running -------------------------------------------------------------------------------------------

    def run(self) -> RunReport:
        """Check the whole configuration, take the store's lease, then run every unfinished phase in order."""
        from coevolve_engine.lease import hold_lease
        from coevolve_engine.loop.preflight import check_plugins

        check_plugins(self.config, self.db, lambda: self.environment)
        self._check_store()  # before the lease too: a refused run leaves the store's data as it was
        self._check_start_model()
        with hold_lease(self.db, "run", wait=self.wait, echo=self.echo):
            return self._run()

    def _check_start_model(self) -> None:
        """The policy round 0 starts from must exist while round 0's warm-up or training is still to run."""
        status = self.status()
        if any(status.get((0, phase)) != "finished" for phase in ("warmup", "train") if phase in self.phases(0)) \
                and not Path(self.config.trainer.model).exists():
            raise ConfigError(f"trainer.model: {self.config.trainer.model} does not exist (round 0 trains the "
                              "policy found there: a local model directory)")

    def _run(self) -> RunReport:
        todo = self.remaining()
        total = sum(len(self.phases(r)) for r in range(self.config.rounds))
        report = RunReport(rounds=0, skipped=total - len(todo))
        if not todo:
            self.echo(f"all {self.config.rounds} rounds are finished in {self.db}; nothing to do "
                      "(raise `rounds` to run more)")
        elif report.skipped:
            r, p = todo[0]
            self.echo(f"resuming at round {r}, phase {p} ({report.skipped} of {total} phases already finished)")
        for round_, phase in todo:
            report.done.append(self._run_phase(round_, phase))
        with self._store(read_only=True) as store:
            report.rounds = store.scalar("SELECT count(*) FROM rounds WHERE status = 'finished'")
        return report

    def _check_store(self) -> None:
        with self._store() as store:  # a write open applies pending migrations
            train = store.scalar("SELECT count(*) FROM tasks WHERE env = $env AND split = 'train'",
                                 {"env": self.config.env})
            if not train and self.config.bootstrap.n == 0:
                raise RunError(f"{self.db} has no {self.config.env} training tasks; import some first "
                               f"(e.g. `coevolve-engine tasks import {self.config.env} ...`), or have the run "
                               "build them (set bootstrap.n and bootstrap.explorer_model)")
            stored = store.execute("SELECT round, config FROM rounds WHERE status = 'running' ORDER BY round"
                                   ).fetchall()
        mine = _comparable(self.config.to_dict())
        for round_, text in stored:
            # through RunConfig, so a setting added since the round started compares as its default
            theirs = _comparable(config_from_dict(json.loads(text)).to_dict()) if text else {}
            changed = list(differences(theirs, mine))
            if theirs and changed:
                raise ConfigError(
                    f"round {round_} was started with a different configuration ({', '.join(changed)} differ); "
                    "resume it with the same settings, or see its configuration with "
                    f"`coevolve-engine query \"select config from rounds where round = {round_}\"`")

    def _run_phase(self, round_: int, phase: str) -> PhaseResult:
        resumed = self._start(round_, phase)
        label = f"round {round_} · {phase:<10}"
        if resumed:
            self.echo(f"{label} resuming an interrupted attempt")
        started = time.perf_counter()
        with progress(self.echo, label, total=self._bar_total(phase), unit=BAR_UNITS.get(phase, "step")) \
                if phase in BAR_UNITS else _no_bar():
            outputs = getattr(self, f"_phase_{phase}")(round_, label)
        seconds = time.perf_counter() - started
        if outputs is not None:  # phases that committed their own 'finished' return None from _finished
            self._finish(round_, phase, outputs, seconds)
        with self._store(read_only=True) as store:
            row = store.execute("SELECT outputs, seconds FROM run_phases WHERE round = $r AND phase = $p",
                                {"r": round_, "p": phase}).fetchall()[0]
        outputs = json.loads(row[0])
        self.echo(f"{label} done in {row[1]:.1f} s: {describe(phase, outputs)}")
        if phase == self.phases(round_)[-1]:
            with self._store(read_only=True) as store:
                self.echo(round_line(store, self.config, round_))
        return PhaseResult(round_, phase, float(row[1]), outputs, resumed)

    def _bar_total(self, phase: str) -> int | None:
        """What a phase's bar counts up to, where it is known before the phase starts."""
        if phase == "validate":
            with self._store(read_only=True) as store:
                return store.scalar("SELECT count(*) FROM candidates WHERE verdict = 'pending'") or None
        return {"warmup": self.config.warmup.steps, "train": self.config.trainer.steps_per_round,
                "bootstrap": self.config.bootstrap.n}.get(phase)

    def _start(self, round_: int, phase: str) -> bool:
        """Record that the phase starts; True when an earlier attempt was interrupted."""
        from coevolve_engine.lease import heartbeat

        with self._store() as store, store.transaction() as con:
            heartbeat(con)
            if not con.execute("SELECT count(*) FROM rounds WHERE round = $r", {"r": round_}).fetchall()[0][0]:
                con.execute("INSERT INTO rounds (round, status, config) VALUES ($r, 'running', $config)",
                            {"r": round_, "config": to_json(self.config.to_dict())})
            previous = con.execute("SELECT attempts FROM run_phases WHERE round = $r AND phase = $p",
                                   {"r": round_, "p": phase}).fetchall()
            if previous:
                con.execute("UPDATE run_phases SET attempts = attempts + 1, started_at = current_timestamp "
                            "WHERE round = $r AND phase = $p", {"r": round_, "p": phase})
            else:
                con.execute("INSERT INTO run_phases (round, phase, status) VALUES ($r, $p, 'running')",
                            {"r": round_, "p": phase})
        return bool(previous)

    def _mark(self, con, round_: int, phase: str, outputs: dict[str, Any], seconds: float) -> None:
        """Record the phase as finished (and the round, after its last phase), inside the caller's transaction."""
        con.execute("UPDATE run_phases SET status = 'finished', finished_at = current_timestamp, seconds = $s, "
                    "outputs = $o WHERE round = $r AND phase = $p",
                    {"r": round_, "p": phase, "s": seconds, "o": to_json(outputs)})
        if phase == self.phases(round_)[-1]:
            con.execute("UPDATE rounds SET status = 'finished', finished_at = current_timestamp "
                        "WHERE round = $r", {"r": round_})

    def _finish(self, round_: int, phase: str, outputs: dict[str, Any], seconds: float) -> None:
        with self._store() as store, store.transaction() as con:
            self._mark(con, round_, phase, outputs, seconds)

    # -- where a round starts ------------------------------------------------------------------------------

    def _round(self, store: Store, round_: int) -> dict[str, Any]:
        cursor = store.execute("SELECT * FROM rounds WHERE round = $r", {"r": round_})
        names = [c[0] for c in cursor.description]
        rows = cursor.fetchall()
        return dict(zip(names, rows[0])) if rows else {}

    def _starting_policy(self, store: Store, round_: int) -> str:
        if round_ == 0:
            if self.config.warmup.steps > 0:
                warmed = warmup_checkpoint(store)
                if warmed:
                    return warmed
            return str(Path(self.config.trainer.model).resolve())
        previous = self._round(store, round_ - 1).get("checkpoint")
        if not previous:
            raise RunError(f"round {round_ - 1} has no checkpoint recorded; its train phase did not finish")
        return previous

    def _round_steps(self, round_: int) -> tuple[int, int]:
        with self._store(read_only=True) as store:
            first = self._round(store, round_).get("first_step")
        if first is None:
            raise RunError(f"round {round_} has no training steps recorded; its train phase did not finish")
        return int(first), int(first) + self.config.trainer.steps_per_round - 1

    # -- the phases ----------------------------------------------------------------------------------------

    def _phase_bootstrap(self, round_: int, label: str) -> dict[str, Any]:
        """D_0: ``bootstrap.n`` tasks from unguided exploration (idempotent: a rerun adds only what is missing)."""
        from coevolve_engine.synthesis.bootstrap import bootstrap

        c = self.config
        b = c.bootstrap
        detail(self.echo, f"{label} {b.n} tasks by unguided exploration with {b.explorer_model}")
        options = {"novelty_threshold": c.validation.novelty_threshold, "wait": self.wait,
                   "progress": lambda line: detail(self.echo, f"{label} {line}"), **b.options}
        report = bootstrap(self.db, env=c.env, n=b.n, explorer_model=b.explorer_model, model=b.model or None,
                           api_base=b.api_base or None, seed=c.seed, round=0, **options)
        with self._store(read_only=True) as store:
            train = store.scalar("SELECT count(*) FROM tasks WHERE env = $env AND split = 'train'", {"env": c.env})
        if not train:
            raise RunError(f"the bootstrap accepted no {c.env} task, so there is nothing to train on; see why with "
                           "`coevolve-engine candidates --db ... --verdict rejected`")
        outputs = plain_outputs(report)
        outputs["train_tasks"] = train
        return outputs

    def _phase_weights(self, round_: int, label: str) -> None:
        from coevolve_engine.curriculum import compute_weights

        c = self.config
        started = time.perf_counter()
        with self._store() as store, store.transaction() as con:
            kept = store.scalar("SELECT count(*) FROM weight_sets WHERE round = $r", {"r": round_}) > 0
            if not kept:  # a weight set stored by hand (`coevolve-engine weights`) is used as it is
                compute_weights(store, round_, c.curriculum.strategy, c.signal_params(),
                                settings={k: str(v) for k, v in c.curriculum.settings.items()})
            strategy, tasks, nonzero, reason = con.execute(
                "SELECT strategy, tasks, nonzero, reason FROM weight_sets WHERE round = $r", {"r": round_}
            ).fetchall()[0]
            outputs = {"kept": kept, "strategy": strategy, "tasks": tasks, "nonzero": nonzero, "reason": reason}
            self._mark(con, round_, "weights", outputs, time.perf_counter() - started)
        return None

    def _phase_warmup(self, round_: int, label: str) -> dict[str, Any]:
        from coevolve_engine.trainers import TRAINERS, BatchSource

        c = self.config
        output_dir = Path(c.trainer.output_dir).resolve() / "round-0" / "warmup"
        source = BatchSource.from_store(self.db, round_, seed=c.seed, wait=self.wait)
        trainer_class = TRAINERS.load(c.warmup.trainer)
        detail(self.echo, f"{label} {c.warmup.trainer}: {c.warmup.steps} steps from {c.trainer.model}")
        trainer = trainer_class.for_run(
            db=self.db, environment=self.environment, source=source, sink=None,
            model=str(Path(c.trainer.model).resolve()), output_dir=str(output_dir), seed=c.seed, start_step=0,
            policy_name=c.trainer.policy_name, options=episode_options(c.warmup.trainer, c.episode, c.warmup.options))
        trainer.progress = lambda line: detail(self.echo, f"{label} {line}")
        report = trainer.train(c.warmup.steps)
        if report.checkpoint is None:
            raise RunError(f"warm-up trainer {c.warmup.trainer} saved no checkpoint")
        return {"trainer": c.warmup.trainer, "steps": report.steps, "checkpoint": str(report.checkpoint),
                **getattr(trainer, "summary", {})}

    def _phase_train(self, round_: int, label: str) -> None:
        c = self.config
        prefix = f"run round {round_} train"
        with self._store() as store, store.transaction() as con:
            removed = con.execute(
                "SELECT count(*) FROM trajectories WHERE ingest_id IN "
                "(SELECT ingest_id FROM ingests WHERE starts_with(path, $prefix))", {"prefix": prefix + " "}
            ).fetchall()[0][0]
            con.execute("DELETE FROM trajectories WHERE ingest_id IN "
                        "(SELECT ingest_id FROM ingests WHERE starts_with(path, $prefix))", {"prefix": prefix + " "})
            con.execute("DELETE FROM ingests WHERE starts_with(path, $prefix)", {"prefix": prefix + " "})
            policy = self._starting_policy(store, round_)
            first = self._round(store, round_).get("first_step")
            if first is None:
                first = int(store.scalar("SELECT coalesce(max(step), 0) FROM trajectories")) + 1
            con.execute("UPDATE rounds SET policy = $policy, first_step = $first WHERE round = $r",
                        {"policy": policy, "first": first, "r": round_})
        if removed:
            self.echo(f"{label} removed {removed} rollouts of the interrupted attempt; training again from {policy}")
        steps = c.trainer.steps_per_round
        spec = {
            "db": str(self.db.resolve()), "wait": self.wait, "env": c.env, "env_options": c.env_options,
            "round": round_, "trainer": c.trainer.name, "model": policy,
            "options": episode_options(c.trainer.name, c.episode, c.trainer.options),
            "output_dir": str(Path(c.trainer.output_dir).resolve() / f"round-{round_}"), "seed": c.seed + round_,
            "start_step": first - 1, "steps": steps, "policy_name": c.trainer.policy_name, "label": prefix,
            "steps_per_write": c.trainer.steps_per_write,
            "echo_label": label,
        }
        how = f" under `{c.trainer.launcher}`" if c.trainer.launcher else ""
        detail(self.echo, f"{label} {c.trainer.name}{how}: steps {first}..{first + steps - 1} from {policy}")
        started = time.perf_counter()
        result = self._launch(spec) if c.trainer.launcher else train_round(spec, self.echo)
        if not result or not result.get("checkpoint"):
            raise RunError(f"trainer {c.trainer.name} saved no checkpoint after round {round_}")
        with self._store() as store, store.transaction() as con:
            totals = round_totals(store, self.config, first, first + steps - 1)
            outputs = {"policy": policy, "first_step": first, "last_step": first + steps - 1, **result,
                       "success_rate": totals["success_rate"]}
            con.execute("UPDATE rounds SET checkpoint = $checkpoint WHERE round = $r",
                        {"checkpoint": result["checkpoint"], "r": round_})
            self._mark(con, round_, "train", outputs, time.perf_counter() - started)
        return None

    def _launch(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        """Run the round's training as ``launcher -m coevolve_engine.loop.train_round SPEC``, echoing its lines."""
        import shlex
        import subprocess

        from coevolve_engine.loop.train_round import result_path

        folder = Path(spec["output_dir"])
        folder.mkdir(parents=True, exist_ok=True)
        spec_path = folder / "round-spec.json"
        spec_path.write_text(to_json({**spec, "run_pid": os.getpid()}), encoding="utf-8")
        result_path(spec_path).unlink(missing_ok=True)
        command = [*shlex.split(self.config.trainer.launcher), "-m", "coevolve_engine.loop.train_round",
                   str(spec_path)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert process.stdout is not None
        for line in process.stdout:
            detail(self.echo, line.rstrip("\n"))
        if process.wait() != 0:
            raise RunError(f"the launched training exited with status {process.returncode}: {shlex.join(command)}")
        if not result_path(spec_path).exists():
            return None
        return json.loads(result_path(spec_path).read_text(encoding="utf-8"))

    def _phase_eval(self, round_: int, label: str) -> dict[str, Any]:
        """The round's checkpoint on the eval tasks (and, in round 0, the policy it started from)."""
        from coevolve_engine.evaluations import eval_tasks

        c = self.config
        with self._store(read_only=True) as store:
            tasks = eval_tasks(store, c.env, limit=c.eval.max_tasks or None, seed=c.seed)
            row = self._round(store, round_)
        if not tasks:
            return {"skipped": f"no {c.env} eval tasks (import some with --split eval)"}
        first, last = self._round_steps(round_)
        outputs: dict[str, Any] = {"tasks": len(tasks)}
        if round_ == 0:
            start = self._evaluate(row["policy"], tasks, None, "start", first - 1, label)
            outputs.update(start_eval_id=start.eval_id, start_success_rate=round(start.success_rate, 4))
        done = self._evaluate(row["checkpoint"], tasks, round_, f"round {round_}", last, label)
        outputs.update(eval_id=done.eval_id, success_rate=round(done.success_rate, 4))
        return outputs

    def _evaluate(self, policy: str, tasks: list[dict[str, Any]], round_: int | None, name: str, step: int,
                  label: str):
        from coevolve_engine.evaluate import evaluate_policy
        from coevolve_engine.evaluations import eval_id, find_evaluation, record_evaluation

        c = self.config
        e = c.episode
        settings = {"decoding": "greedy", "player": "episode", "user_turns": "all", "max_new_tokens": e.max_new_tokens,
                    "max_model_calls_per_turn": e.max_model_calls_per_turn, "max_steps": e.max_steps,
                    "chat_template_kwargs": e.chat_template_kwargs}
        identifier = eval_id(policy, c.env, [t["task_id"] for t in tasks], settings)
        with self._store(read_only=True) as store:
            stored = find_evaluation(store, identifier)
        if stored is not None:
            detail(self.echo, f"{label} {name}: {stored.successes}/{stored.tasks} (stored evaluation {identifier})")
            return stored
        detail(self.echo, f"{label} evaluating {name} on {len(tasks)} eval tasks")
        results = evaluate_policy(policy, self.environment, tasks, max_new_tokens=e.max_new_tokens,
                                  max_model_calls_per_turn=e.max_model_calls_per_turn, max_steps=e.max_steps,
                                  chat_template_kwargs=e.chat_template_kwargs or None)
        with self._store() as store:
            evaluation = record_evaluation(store, policy=policy, env=c.env, settings=settings, results=results,
                                           round=round_, label=name, step=step)
        detail(self.echo, f"{label} {name}: {evaluation.successes}/{evaluation.tasks} solved")
        advance(self.echo, advance=evaluation.tasks)
        return evaluation

    def _phase_signals(self, round_: int, label: str) -> dict[str, Any]:
        from coevolve_engine.snapshot import signal_snapshot

        first, last = self._round_steps(round_)
        params = self.config.signal_params()
        with self._store(read_only=True) as store, signal_snapshot(store, params):
            totals = round_totals(store, self.config, first, last)
            by_signal = store.execute(ROUND_SIGNALS_SQL, {**params.bind(), "first": first, "last": last}).fetchall()
        outputs = {"first_step": first, "last_step": last, **totals,
                   "by_signal": {signal: {"trajectories": n, "tasks": tasks} for signal, n, tasks in by_signal}}
        if self.config.signals_used is not None:
            outputs["used"] = list(self.config.signals_used)  # all are counted; only these make patterns
        return outputs

    def _phase_patterns(self, round_: int, label: str) -> None:
        from coevolve_engine.patterns import find_patterns
        from coevolve_engine.patterns.find import prepare_patterns
        from coevolve_engine.patterns.select import select_flagged

        c = self.config
        first, last = self._round_steps(round_)
        params = c.signal_params()
        started = time.perf_counter()
        used = c.signals_used
        # the embedding model and the clustering run before the store is held for writing (the model is loaded
        # once per run); under the lock the same selection is checked, and the clusters written
        self._embedder, prepared = prepare_patterns(
            self.db, step=last, first_step=first, params=params, max_trajectories=c.patterns.max_trajectories,
            max_k=c.patterns.max_k, seed=c.seed + round_, signals=used, embedder=self._embedder, wait=self.wait,
            progress=lambda line: detail(self.echo, f"{label} {line}"))
        with self._store() as store, store.transaction() as con:
            flagged = select_flagged(store, last, params, limit=1, first_step=first, signals=used).flagged
            con.execute("DELETE FROM pattern_members WHERE pattern_id IN "
                        "(SELECT pattern_id FROM failure_patterns WHERE round = $r)", {"r": round_})
            con.execute("DELETE FROM failure_patterns WHERE round = $r", {"r": round_})
            outputs: dict[str, Any] = {"flagged": flagged, "patterns": 0}
            if used is not None:
                outputs["signals"] = list(used)  # flagged counts only trajectories carrying one of these
            if flagged:
                report = find_patterns(store, round=round_, step=last, first_step=first, params=params,
                                       max_trajectories=c.patterns.max_trajectories, max_k=c.patterns.max_k,
                                       seed=c.seed + round_, replace=True, signals=used, embedder=self._embedder,
                                       prepared=prepared, progress=lambda line: detail(self.echo, f"{label} {line}"))
                outputs.update(patterns=report.k, clustered=report.clustered, silhouette=report.silhouette,
                               sizes=report.sizes,
                               dominant={p.pattern_id: p.dominant_signal for p in report.patterns})
            self._mark(con, round_, "patterns", outputs, time.perf_counter() - started)
        return None

    def _phase_synthesize(self, round_: int, label: str) -> dict[str, Any]:
        from coevolve_engine.loop.preflight import synthesizer_options
        from coevolve_engine.synthesis.candidates import SYNTHESIZERS, synthesize

        c = self.config.synthesis
        synthesizer = SYNTHESIZERS.load(c.synthesizer)
        guided = getattr(synthesizer, "needs_patterns", True)
        with self._store(read_only=True) as store:
            patterns = store.scalar("SELECT count(*) FROM failure_patterns WHERE round = $r", {"r": round_})
        if not patterns and guided:
            return {"patterns": 0, "proposed": 0, "added": 0, "skipped": "no failure patterns this round"}
        options = synthesizer_options(self.config, self.db, synthesizer)
        if c.synthesizer == "llm" and c.summary_model:
            self._summarise(round_, label)
        # an unguided synthesizer explores worlds drawn from its seed; SEED itself went to the bootstrap (D_0)
        seed = self.config.seed + round_ + (0 if guided else 1)
        what = f"for {patterns} patterns" if guided else "by unguided exploration (patterns are not used)"
        detail(self.echo, f"{label} {c.synthesizer}: up to {c.max_candidates} candidates {what}")
        with self._store() as store:
            report = synthesize(store, round=round_, synthesizer=c.synthesizer, max_candidates=c.max_candidates,
                                seed=seed, options=options)
            pending = store.scalar("SELECT count(*) FROM candidates WHERE round = $r", {"r": round_})
        return {"patterns": patterns, "proposed": report.proposed, "added": report.added, "candidates": pending,
                "by_signal": dict(report.by_signal)}

    def _summarise(self, round_: int, label: str) -> None:
        from coevolve_engine.llm import LLMClient
        from coevolve_engine.synthesis.summaries import summarise_patterns

        c = self.config.synthesis
        client = LLMClient(self.db, c.summary_model, api_base=c.options.get("api_base"), wait=self.wait)
        report = summarise_patterns(self.db, round=round_, client=client, wait=self.wait)
        detail(self.echo, f"{label} summarised {len(report.outcomes)} patterns with {c.summary_model}")

    def _phase_validate(self, round_: int, label: str) -> dict[str, Any]:
        from coevolve_engine.synthesis.validation import validate_candidates

        v = self.config.validation
        counter = {"n": 0, "accepted": 0}

        def on_verdict(verdict) -> None:
            counter["n"] += 1
            counter["accepted"] += verdict.verdict == "accepted"
            detail(self.echo, f"{label} {counter['n']}: {verdict.candidate_id} {verdict.verdict} ({verdict.reason})")
            advance(self.echo, done=counter["n"], accepted=counter["accepted"])

        if not v.enabled:
            validate_candidates(self.db, round=round_, env=self.environment, wait=self.wait, on_verdict=on_verdict,
                                runnable_only=True)
            return {**self._verdicts(round_), "validation": "off: synthesis and schema checks only"}
        agent = judge = None
        if v.agent_model:
            from coevolve_engine.cli.rollout import make_agent

            e = self.config.episode
            agent = make_agent(v.agent_model, api_base=v.api_base or None, api_key=None, temperature=0.9,
                               max_tokens=1024, timeout=60.0, retries=2, max_steps=e.max_steps, policy=None,
                               max_model_calls_per_turn=e.max_model_calls_per_turn,
                               chat_template_kwargs=e.chat_template_kwargs or None)
        if v.judge_model:
            from coevolve_engine.llm import LLMClient
            from coevolve_engine.synthesis.judge import LLMJudge

            judge = LLMJudge(LLMClient(self.db, v.judge_model, api_base=v.api_base or None, wait=self.wait), self.db)
        validate_candidates(self.db, round=round_, env=self.environment, novelty_threshold=v.novelty_threshold,
                            agent=agent, k=v.k, max_success_rate=v.max_success_rate if agent else None,
                            judge=judge, wait=self.wait, on_verdict=on_verdict,
                            embedder=self._embedder)  # the model the patterns phase loaded, if it ran
        return self._verdicts(round_)

    def _verdicts(self, round_: int) -> dict[str, Any]:
        with self._store(read_only=True) as store:
            rows = store.execute("SELECT verdict, reason, count(*) FROM candidates WHERE round = $r "
                                 "GROUP BY ALL ORDER BY ALL", {"r": round_}).fetchall()
        accepted = sum(n for verdict, _, n in rows if verdict == "accepted")
        return {"candidates": sum(n for *_, n in rows), "accepted": accepted,
                "rejected": {reason: n for verdict, reason, n in rows if verdict == "rejected"}}


def episode_options(trainer: str, episode: Any, options: dict[str, Any]) -> dict[str, Any]:
    """A trainer's options with the run's ``[episode]`` settings its options class declares (so training plays
    episodes as evaluation does); setting one of them in the trainer's own options is refused."""
    import dataclasses

    from coevolve_engine.trainers import TRAINERS

    settings = dataclasses.asdict(episode)
    clash = sorted(set(settings) & set(options))
    if clash:
        raise RunError(f"set {', '.join(clash)} under [episode], not in trainer {trainer}'s options: training and "
                       "evaluation play episodes with the same limits")
    declared = getattr(TRAINERS.load(trainer), "options_class", None)
    names = {f.name for f in dataclasses.fields(declared)} if declared is not None else set()
    return {**{key: value for key, value in settings.items() if key in names}, **options}


def warmup_checkpoint(store: Store) -> str | None:
    """The checkpoint the store's finished warm-up phase saved (round 0), or None."""
    return store.scalar("SELECT json_extract_string(outputs, '$.checkpoint') FROM run_phases "
                        "WHERE round = 0 AND phase = 'warmup' AND status = 'finished'")


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    """A stored config without the fields that may change between invocations of one round: how many rounds
    to run, and how the training processes are launched (not what they compute)."""
    trainer = {k: v for k, v in config.get("trainer", {}).items() if k != "launcher"}
    return {**{k: v for k, v in config.items() if k != "rounds"}, "trainer": trainer}



@contextmanager
def _no_bar():
    yield None
