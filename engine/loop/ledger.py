"""The run's state machine, kept in the store: which phase of which round started and finished.

``run_phases`` has one row per (round, phase) started, ``rounds`` one per round; this module is the only one that
writes either. A phase starts (``start``:
a row, or one more attempt on it), does its work, and finishes (``finish``): its outputs and its 'finished'
mark are committed in one transaction, together with whatever its ``commit`` step writes, so a phase whose
outputs must land atomically (weights, patterns, train) gets that transaction from here. A rerun resumes at
the first (round, phase) not finished (``remaining``), after checking that the store and the configuration
still fit the rounds already started (``check_store``, ``check_start_model``).
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

from coevolve_engine.core.lease import heartbeat
from coevolve_engine.loop.config import ConfigError
from coevolve_engine.loop.config_files import config_from_dict, differences
from coevolve_engine.loop.context import RunContext, RunError
from coevolve_engine.loop.summary import to_json
from coevolve_engine.core.store import Store

#: writes that must land with a phase's 'finished' mark: (context, round, store, outputs) -> outputs
Commit = Callable[[RunContext, int, Store, dict[str, Any]], dict[str, Any]]


class Ledger:
    """Starts, finishes and resumes the phases of ``plan(round)`` (the phase names round R runs, in order)."""

    def __init__(self, run: RunContext, plan: Callable[[int], list[str]]) -> None:
        self.run, self.plan = run, plan

    def status(self) -> dict[tuple[int, str], str]:
        with self.run.store(read_only=True) as store:
            rows = store.execute("SELECT round, phase, status FROM run_phases").fetchall()
        return {(r, p): s for r, p, s in rows}

    def remaining(self) -> list[tuple[int, str]]:
        """(round, phase) still to run, in order."""
        status = self.status()
        return [(r, p) for r in range(self.run.config.rounds) for p in self.plan(r) if status.get((r, p)) != "finished"]

    def start(self, round_: int, phase: str) -> bool:
        """Record that the phase starts; True when an earlier attempt was interrupted."""
        with self.run.store() as store, store.transaction() as con:
            heartbeat(con)
            if not con.execute("SELECT count(*) FROM rounds WHERE round = $r", {"r": round_}).fetchall()[0][0]:
                con.execute("INSERT INTO rounds (round, status, config) VALUES ($r, 'running', $config)",
                            {"r": round_, "config": to_json(self.run.config.to_dict())})
            previous = con.execute("SELECT attempts FROM run_phases WHERE round = $r AND phase = $p",
                                   {"r": round_, "p": phase}).fetchall()
            if previous:
                con.execute("UPDATE run_phases SET attempts = attempts + 1, started_at = current_timestamp "
                            "WHERE round = $r AND phase = $p", {"r": round_, "p": phase})
            else:
                con.execute("INSERT INTO run_phases (round, phase, status) VALUES ($r, $p, 'running')",
                            {"r": round_, "p": phase})
        return bool(previous)

    def finish(self, round_: int, phase: str, outputs: dict[str, Any], started: float,
               commit: Commit | None = None) -> tuple[dict[str, Any], float]:
        """In one transaction: the phase's ``commit`` writes (if any; they may add to the outputs), then its
        'finished' mark with its outputs and seconds (and the round's, after its last phase). Returns the
        outputs and seconds as stored."""
        with self.run.store() as store, store.transaction() as con:
            if commit is not None:
                outputs = commit(self.run, round_, store, outputs)
            seconds = time.perf_counter() - started
            con.execute("UPDATE run_phases SET status = 'finished', finished_at = current_timestamp, seconds = $s, "
                        "outputs = $o WHERE round = $r AND phase = $p",
                        {"r": round_, "p": phase, "s": seconds, "o": to_json(outputs)})
            if phase == self.plan(round_)[-1]:
                con.execute("UPDATE rounds SET status = 'finished', finished_at = current_timestamp "
                            "WHERE round = $r", {"r": round_})
        with self.run.store(read_only=True) as store:
            text, seconds = store.execute("SELECT outputs, seconds FROM run_phases WHERE round = $r AND phase = $p",
                                          {"r": round_, "p": phase}).fetchall()[0]
        return json.loads(text), float(seconds)

    def check_store(self) -> None:
        """The store has tasks to train on (or the run builds them), and every round still running was started
        with this configuration."""
        config = self.run.config
        with self.run.store() as store:  # a write open applies pending migrations
            train = store.scalar("SELECT count(*) FROM tasks WHERE env = $env AND split = 'train'", {"env": config.env})
            if not train and config.bootstrap.n == 0:
                raise RunError(f"{self.run.db} has no {config.env} training tasks; import some first "
                               f"(e.g. `coevolve-engine tasks import {config.env} ...`), or have the run "
                               "build them (set bootstrap.n and models.explorer.model)")
            stored = store.execute("SELECT round, config FROM rounds WHERE status = 'running' ORDER BY round"
                                   ).fetchall()
        mine = comparable(config.to_dict())
        for round_, text in stored:
            # through RunConfig, so a setting added since the round started compares as its default
            theirs = comparable(config_from_dict(json.loads(text)).to_dict()) if text else {}
            changed = list(differences(theirs, mine))
            if theirs and changed:
                raise ConfigError(
                    f"round {round_} was started with a different configuration ({', '.join(changed)} differ); "
                    "resume it with the same settings, or see its configuration with "
                    f"`coevolve-engine query \"select config from rounds where round = {round_}\"`")

    def check_start_model(self) -> None:
        """The policy round 0 starts from must exist while round 0's warm-up or training is still to run."""
        status, model = self.status(), self.run.config.trainer.model
        if any(status.get((0, phase)) != "finished" for phase in ("warmup", "train") if phase in self.plan(0)) \
                and not Path(model).exists():
            raise ConfigError(f"trainer.model: {model} does not exist (round 0 trains the policy found there: a "
                              "local model directory)")


def comparable(config: dict[str, Any]) -> dict[str, Any]:
    """A stored config without the fields that may change between invocations of one round: how many rounds
    to run, and how the training processes are launched (not what they compute)."""
    trainer = {k: v for k, v in config.get("trainer", {}).items() if k != "launcher"}
    return {**{k: v for k, v in config.items() if k != "rounds"}, "trainer": trainer}


# -- the rounds table: where a round starts ------------------------------------------------------------------

def round_row(store: Store, round_: int) -> dict[str, Any]:
    cursor = store.execute("SELECT * FROM rounds WHERE round = $r", {"r": round_})
    names = [c[0] for c in cursor.description]
    rows = cursor.fetchall()
    return dict(zip(names, rows[0])) if rows else {}


def record_round_start(store: Store, round_: int, policy: str, first_step: int) -> None:
    """The policy round ``round_`` trains from and its first step (in the caller's transaction)."""
    store.execute("UPDATE rounds SET policy = $policy, first_step = $first WHERE round = $r",
                  {"policy": policy, "first": first_step, "r": round_})


def record_checkpoint(store: Store, round_: int, checkpoint: str) -> None:
    """The checkpoint round ``round_`` trained to (in the caller's transaction: the train phase's commit)."""
    store.execute("UPDATE rounds SET checkpoint = $checkpoint WHERE round = $r",
                  {"checkpoint": checkpoint, "r": round_})


def round_steps(run: RunContext, round_: int, store: Store | None = None) -> tuple[int, int]:
    """The first and last training step of a round whose train phase finished (read through ``store`` when
    the caller holds one open)."""
    with run.store(read_only=True) if store is None else nullcontext(store) as opened:
        first = round_row(opened, round_).get("first_step")
    if first is None:
        raise RunError(f"round {round_} has no training steps recorded; its train phase did not finish")
    return int(first), int(first) + run.config.trainer.steps_per_round - 1


def warmup_checkpoint(store: Store) -> str | None:
    """The checkpoint the store's finished warm-up phase saved (round 0), or None."""
    return store.scalar("SELECT json_extract_string(outputs, '$.checkpoint') FROM run_phases "
                        "WHERE round = 0 AND phase = 'warmup' AND status = 'finished'")
