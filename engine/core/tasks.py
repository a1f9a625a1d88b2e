"""Which training tasks an agent job or a trainer plays, read from the store."""

from __future__ import annotations

import json
from typing import Any

from coevolve_engine.core.ids import normalize_id
from coevolve_engine.core.store import Store

SELECT_TASKS_SQL = """
SELECT task_id, spec
FROM tasks
WHERE env = $env AND split = 'train'
  AND ($category IS NULL OR spec->>'category' = $category)
  AND (len($task_ids) = 0 OR list_contains($task_ids, task_id))
ORDER BY md5(task_id || ':' || CAST($seed AS VARCHAR))
LIMIT $limit
"""


def select_tasks(store: Store, env: str, *, category: str | None = None, task_ids: list[str] | None = None,
                 n: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """Training tasks of ``env`` from the store, in a seeded random order, at most ``n``. Eval tasks (split
    'eval') are never selected: their rollouts would enter the signals and the synthesis."""
    rows = store.execute(SELECT_TASKS_SQL, {
        "env": env, "category": category, "task_ids": [normalize_id(t) for t in task_ids or ()], "seed": seed,
        "limit": n if n is not None else 2**62,
    }).fetchall()
    return [{"task_id": task_id, "spec": json.loads(spec)} for task_id, spec in rows]
