"""Step 4 of an ingest: the staged records checked against the store, on the private connection's mirror of it
(``mirror``): groups of one task and step, immutable trajectory and task ids, held-out tasks, known tasks.
Trajectories are first resolved: default group ids, content-hash ids, the tool names of their action pattern."""

from __future__ import annotations

from pathlib import Path

import duckdb

from coevolve_engine.core.errors import IngestError
from coevolve_engine.core.ingest.staging import STAGED, location

#: a stored task that is a placeholder (``--create-tasks``), which a later ingest of the real task fills in
PLACEHOLDER = "coalesce(json_extract(t.meta, '$.placeholder') = 'true'::JSON, false)"


def check_against_store(work: duckdb.DuckDBPyConnection, path: Path, fmt: str, kind: str,
                        create_tasks: bool) -> None:
    """Every check of ``kind``'s records against the store's rows the mirror holds; the first failure raises."""
    if kind == "trajectories":
        _check_trajectories(work, path, fmt, create_tasks)
    else:
        _check_task_conflicts(work, path, fmt)


def resolve_trajectories(con: duckdb.DuckDBPyConnection) -> None:
    """Fill default group ids and content-hash ids, and the tool names the action pattern is made of."""
    # A content hash names a record; the k-th identical copy in one file gets the suffix ':k', so identical
    # rollouts of one group stay distinct while re-ingesting the same file adds nothing.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE ingest_resolved AS
        SELECT *,
               coalesce(trajectory_id,
                        't-' || content_hash || CASE WHEN copy > 1 THEN ':' || copy ELSE '' END) AS resolved_id,
               json_extract_string(CAST(actions AS JSON), '$[*].name') AS action_names
        FROM (
            SELECT *, row_number() OVER (PARTITION BY content_hash ORDER BY _line) AS copy
            FROM (
                SELECT * EXCLUDE (group_id),
                       coalesce(group_id, task_id || '@' || CAST(step AS VARCHAR)) AS group_id,
                       md5(to_json(struct_pack(task_id, step, group_id, reward, success, actions, messages,
                                               policy, error, meta))) AS content_hash
                FROM {STAGED}
            )
        )
    """)


def _check_trajectories(con: duckdb.DuckDBPyConnection, path: Path, fmt: str, create_tasks: bool) -> None:
    """Check the resolved trajectories against the store (``con`` holds its mirror): groups, immutable ids,
    held-out tasks, and (without ``create_tasks``) that every task is stored."""
    # min <> max finds a group of two tasks or steps without counting distinct values; the first one found
    # (by its first line in the file) is then described
    combined = """
        WITH incoming AS (SELECT group_id, task_id, step, _line FROM ingest_resolved),
        stored AS (
            SELECT t.group_id, t.task_id, t.step, NULL::BIGINT AS _line
            FROM trajectories AS t SEMI JOIN incoming USING (group_id)
        ),
        combined AS (SELECT * FROM incoming UNION ALL SELECT * FROM stored)
    """
    rows = con.execute(combined + """
        SELECT group_id FROM combined GROUP BY group_id
        HAVING min(task_id) <> max(task_id) OR min(step) <> max(step)
        ORDER BY min(_line) LIMIT 1
    """).fetchall()
    if rows:
        group_id, task_ids, steps, line = con.execute(combined + """
            SELECT group_id, list(DISTINCT task_id), list(DISTINCT step), min(_line) FROM combined
            WHERE group_id = $group GROUP BY group_id
        """, {"group": rows[0][0]}).fetchall()[0]
        raise IngestError(
            str(path),
            f"group {group_id!r} would hold rollouts of tasks {sorted(task_ids)} at steps {sorted(steps)}; "
            "a group is the rollouts of one task at one step",
            location=location(fmt, line) if line is not None else None,
            field="group_id",
        )
    _check_trajectory_conflicts(con, path, fmt)
    rows = con.execute("""
        SELECT r._line, r.task_id FROM ingest_resolved AS r JOIN tasks AS t USING (task_id)
        WHERE t.split = 'eval' ORDER BY r._line LIMIT 1
    """).fetchall()
    if rows:
        line, task_id = rows[0]
        raise IngestError(
            str(path),
            f"task {task_id!r} is a held-out eval task (split 'eval'); its results belong in eval_results "
            "(coevolve-engine eval), never in trajectories, where signals, patterns and synthesis would see it",
            location=location(fmt, line),
            field="task_id",
        )
    if not create_tasks:
        _check_known_tasks(con, path, fmt)


def _check_trajectory_conflicts(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> None:
    """A trajectory id already stored with other content is refused, naming both records (ids are immutable:
    re-ingesting the same record adds nothing, a changed one must not vanish)."""
    rows = con.execute("""
        SELECT r._line, r.resolved_id, i.path, i.format, t.ingest_line
        FROM ingest_resolved AS r JOIN trajectories AS t ON t.trajectory_id = r.resolved_id
        LEFT JOIN ingests AS i ON i.ingest_id = t.ingest_id
        WHERE r.task_id IS DISTINCT FROM t.task_id OR r.step IS DISTINCT FROM t.step
           OR r.group_id IS DISTINCT FROM t.group_id OR r.reward IS DISTINCT FROM t.reward
           OR r.success IS DISTINCT FROM t.success OR r.policy IS DISTINCT FROM t.policy
           OR r.error IS DISTINCT FROM t.error OR json(r.actions) IS DISTINCT FROM json(t.actions)
           OR json(r.messages) IS DISTINCT FROM json(t.messages) OR json(r.meta) IS DISTINCT FROM json(t.meta)
        ORDER BY r._line LIMIT 1
    """).fetchall()
    if rows:
        line, trajectory_id, stored_path, stored_format, stored_line = rows[0]
        where = f"from {stored_path}" if stored_path else "written by the engine"
        if stored_path and stored_line is not None:
            where += f", {location(stored_format, stored_line)}"
        raise IngestError(
            str(path),
            f"trajectory {trajectory_id!r} is already in the store with different content ({where}); "
            "trajectory ids are immutable: give the new record another trajectory_id, or leave it out to use "
            "the record's content hash",
            location=location(fmt, line),
            field="trajectory_id",
        )


def _check_known_tasks(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> None:
    """Every trajectory names a stored task."""
    rows = con.execute("""
        SELECT r._line, r.task_id, count(DISTINCT r.task_id) OVER ()
        FROM ingest_resolved AS r ANTI JOIN tasks USING (task_id)
        ORDER BY r._line LIMIT 1
    """).fetchall()
    if rows:
        line, task_id, missing = rows[0]
        raise IngestError(
            str(path),
            f"task {task_id!r} is not in the store" + (f" (nor are {missing - 1} other task ids of this file)"
                                                       if missing > 1 else "")
            + "; ingest its tasks first (`coevolve-engine ingest tasks FILE`), or pass --create-tasks to store a "
              "placeholder for each",
            location=location(fmt, line),
            field="task_id",
        )


def _check_task_conflicts(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> None:
    rows = con.execute(f"""
        SELECT s._line, s.task_id, count(tr.trajectory_id), min(tr.trajectory_id)
        FROM {STAGED} AS s LEFT JOIN trajectories AS tr USING (task_id)
        WHERE coalesce(s.split, 'train') = 'eval'
        GROUP BY ALL HAVING count(tr.trajectory_id) > 0
        ORDER BY s._line LIMIT 1
    """).fetchall()
    if rows:  # the held-out guard, in this order too: trajectories first, then the task as eval
        line, task_id, count, first = rows[0]
        raise IngestError(
            str(path),
            f"task {task_id!r} cannot be held out (split 'eval'): the store already has {count} trajectories of "
            f"it ({first!r}, ...), which signals, patterns and synthesis would keep seeing; hold out another "
            "task, or use a store without them",
            location=location(fmt, line),
            field="split",
        )
    rows = con.execute(f"""
        SELECT s._line, s.task_id FROM {STAGED} AS s JOIN tasks AS t USING (task_id)
        WHERE NOT {PLACEHOLDER} AND (s.env IS DISTINCT FROM t.env OR s.prompt IS DISTINCT FROM t.prompt
           OR s.source IS DISTINCT FROM t.source OR coalesce(s.split, 'train') IS DISTINCT FROM t.split
           OR json(s.spec) IS DISTINCT FROM json(t.spec) OR json(s.meta) IS DISTINCT FROM json(t.meta))
        ORDER BY s._line LIMIT 1
    """).fetchall()
    if rows:
        line, task_id = rows[0]
        raise IngestError(
            str(path),
            f"task {task_id!r} is already in the store with different content; tasks are immutable, "
            "give the new version a new task_id",
            location=location(fmt, line),
            field="task_id",
        )
