"""StoreSink: each group written whole, in one transaction, and never silently dropped."""

from __future__ import annotations

import pytest

from coevolve_engine.core.rollout import Rollout
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.store import Store
from coevolve_engine.trainers import StoreSink


def group(task_id: str, rewards: list[float]) -> list[Rollout]:
    return [Rollout(task_id=task_id, policy="p@0", reward=r, success=r >= 1.0, sample_index=i)
            for i, r in enumerate(rewards)]


def test_groups_land_whole_with_their_step_and_ids(db_path):
    with Store(db_path) as store:
        store.add_records("tasks", [{"task_id": "t1"}])
    sink = StoreSink(db_path, label="test")
    sink.write_group(group("t1", [1.0, 0.0, 1.0]), step=3, group_id="t1@3")
    assert (sink.groups, sink.rollouts) == (1, 3)
    with Store(db_path, read_only=True) as store:
        rows = store.execute("SELECT trajectory_id, step, group_id, reward FROM trajectories ORDER BY 1").fetchall()
    assert rows == [("t1@3#0", 3, "t1@3", 1.0), ("t1@3#1", 3, "t1@3", 0.0), ("t1@3#2", 3, "t1@3", 1.0)]


def test_a_group_whose_ids_are_taken_is_refused_and_nothing_is_written(db_path):
    """Ingest keeps a stored row over a new one with the same id; for a trainer that would lose rollouts, so
    the sink refuses the whole group (e.g. a trainer started at a step the store already has rollouts for)."""
    with Store(db_path) as store:
        store.add_records("tasks", [{"task_id": "t1"}])
        store.add_records("trajectories", [{"trajectory_id": "t1@1#1", "task_id": "t1", "step": 1, "reward": 1.0}])
    sink = StoreSink(db_path, label="test")
    with pytest.raises(CoevolveError, match=r"already holds 1 trajectories with the ids of group t1@1.*step 1"):
        sink.write_group(group("t1", [0.0, 0.0]), step=1, group_id="t1@1")
    with Store(db_path, read_only=True) as store:
        assert store.execute("SELECT trajectory_id, reward FROM trajectories").fetchall() == [("t1@1#1", 1.0)]
        assert store.scalar("SELECT count(*) FROM ingests WHERE path LIKE 'test %'") == 0
    assert sink.groups == 0


def test_a_steps_groups_land_in_one_write_and_a_taken_id_refuses_them_all(db_path):
    with Store(db_path) as store:
        store.add_records("tasks", [{"task_id": "t1"}, {"task_id": "t2"}])
    sink = StoreSink(db_path, label="test")
    sink.write_groups([("t1@2", group("t1", [1.0, 0.0])), ("t2@2", group("t2", [0.0, 0.0]))], step=2)
    assert (sink.groups, sink.rollouts, sink.writes) == (2, 4, 1)
    assert sink.store_seconds > 0
    with Store(db_path, read_only=True) as store:
        assert store.execute("SELECT trajectory_id, step, group_id FROM trajectories ORDER BY 1").fetchall() == [
            ("t1@2#0", 2, "t1@2"), ("t1@2#1", 2, "t1@2"), ("t2@2#0", 2, "t2@2"), ("t2@2#1", 2, "t2@2")]
        assert store.execute("SELECT path, records FROM ingests WHERE kind = 'trajectories'").fetchall() == [("test step 2", 4)]
    with pytest.raises(CoevolveError, match=r"already holds 2 trajectories with the ids of group t2@2 "
                                            r"\(t2@2#0, \.\.\.\).*step 2"):
        sink.write_groups([("t1@3", group("t1", [1.0])), ("t2@2", group("t2", [1.0, 1.0]))], step=2)
    with Store(db_path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM trajectories") == 4
    assert (sink.groups, sink.writes) == (2, 1)


def test_a_sink_that_only_writes_groups_gets_a_steps_groups_one_by_one():
    from coevolve_engine.trainers.base import TrajectorySink

    class Recorder(TrajectorySink):
        def __init__(self):
            self.seen = []

        def write_group(self, rollouts, *, step, group_id):
            self.seen.append((step, group_id, len(rollouts)))

    sink = Recorder()
    sink.write_groups([("a@1", group("a", [1.0])), ("b@1", group("b", [0.0, 1.0]))], step=1)
    assert sink.seen == [(1, "a@1", 1), (1, "b@1", 2)]


def test_steps_kept_together_land_in_one_write_and_flush_writes_the_rest(db_path):
    """steps_per_write = 2: two steps' groups in one unit of work; flush() writes a last, incomplete batch."""
    with Store(db_path) as store:
        store.add_records("tasks", [{"task_id": "t1"}, {"task_id": "t2"}])
    sink = StoreSink(db_path, label="test", steps_per_write=2)
    for step in (1, 2, 3):
        sink.write_groups([(f"t1@{step}", group("t1", [1.0, 0.0])), (f"t2@{step}", group("t2", [0.0]))], step=step)
    assert (sink.writes, sink.pending, sink.groups) == (1, 1, 4)
    sink.flush()
    sink.flush()  # nothing left: no empty write
    assert (sink.writes, sink.pending, sink.groups, sink.rollouts) == (2, 0, 6, 9)
    with Store(db_path, read_only=True) as store:
        assert store.execute("SELECT path, records FROM ingests WHERE kind = 'trajectories' ORDER BY ingest_id"
                             ).fetchall() == [("test steps 1-2", 6), ("test step 3", 3)]
        assert store.execute("SELECT step, count(*) FROM trajectories GROUP BY step ORDER BY step").fetchall() == [
            (1, 3), (2, 3), (3, 3)]
    with pytest.raises(CoevolveError, match=r"ids of group t2@3 .*step 3"):
        sink.write_groups([("t1@4", group("t1", [1.0]))], step=4)
        sink.write_groups([("t2@3", group("t2", [1.0]))], step=3)
    with Store(db_path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM trajectories") == 9  # the whole batch refused
    with pytest.raises(ValueError, match="steps_per_write"):
        StoreSink(db_path, steps_per_write=0)


def test_the_run_shows_a_group_written_only_once_it_is_in_the_store(db_path):
    """The loop's progress lines say 'written' when the store sink has written the group, not when it keeps it."""
    from coevolve_engine.loop.train_round import ProgressSink

    with Store(db_path) as store:
        store.add_records("tasks", [{"task_id": "t1"}])
    lines: list[str] = []
    sink = ProgressSink(StoreSink(db_path, label="test", steps_per_write=2), lines.append, "round 0 · train", 1, 3)
    sink.write_groups([("t1@1", group("t1", [1.0]))], step=1)
    assert not any("written" in line for line in lines)
    sink.write_groups([("t1@2", group("t1", [0.0]))], step=2)
    assert sum("written" in line for line in lines) == 2
    sink.write_groups([("t1@3", group("t1", [1.0]))], step=3)
    sink.flush()
    assert sum("written" in line for line in lines) == 3
    with Store(db_path, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM trajectories") == 3
