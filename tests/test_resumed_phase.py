"""A phase killed after its work and before its 'finished' mark is done again by the resumed run, which must then
store and report what the uninterrupted run did: the phase's writes land with the mark, never before it.

Each phase is driven through ``loop.phases.ROUND`` as ``RunLoop`` drives it (start, work, finish with its commit);
the killed attempt stops after its work, and a new ``RunLoop`` (a new process's) resumes it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from coevolve_engine.core.store import Store

pytest.importorskip("bfcl_eval")

ROUND = 1  # the round of the failure patterns the `db` fixture holds


def run_phase(db: Path, name: str, *, finish: bool = True) -> dict | None:
    from coevolve_engine.loop import RunLoop
    from coevolve_engine.loop.config_files import load_config
    from coevolve_engine.loop.context import phase_label
    from coevolve_engine.loop.phases import BY_NAME

    loop = RunLoop(db, load_config(None, ["trainer.model=policy", "env=bfcl", "synthesis.synthesizer=offline:bfcl",
                                          "synthesis.max_candidates=6", "rounds=2"]))
    phase = BY_NAME[name]
    started = time.perf_counter()
    loop.ledger.start(ROUND, name)
    outputs = phase.work(loop.context, ROUND, phase_label(ROUND, name))
    if not finish:
        return None  # killed here: the work is done, the phase is not marked finished
    stored, _ = loop.ledger.finish(ROUND, name, outputs, started, phase.commit)
    return stored


def candidates(db: Path) -> list[tuple]:
    with Store(db, read_only=True) as store:
        return store.execute("SELECT candidate_id, round, pattern_id, verdict, spec::VARCHAR FROM candidates "
                             "ORDER BY candidate_id").fetchall()


def test_a_synthesize_phase_killed_before_its_mark_stores_and_reports_what_the_straight_one_did(db, tmp_path):
    straight = tmp_path / "straight.duckdb"
    straight.write_bytes(db.read_bytes())
    expected = run_phase(straight, "synthesize")
    assert expected["added"] > 0 and expected["proposed"] == expected["added"]

    assert run_phase(db, "synthesize", finish=False) is None
    assert candidates(db) == [], "the killed attempt stored candidates before its phase finished"
    resumed = run_phase(db, "synthesize")
    assert resumed == expected
    assert candidates(db) == candidates(straight)
    with Store(db, read_only=True) as store:
        attempts, outputs = store.execute("SELECT attempts, outputs FROM run_phases WHERE phase = 'synthesize'"
                                          ).fetchall()[0]
    assert attempts == 2 and json.loads(outputs)["added"] == expected["added"]
