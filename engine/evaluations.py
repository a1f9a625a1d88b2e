"""Evaluations of a policy on the store's held-out tasks (split 'eval'), stored per task.

    tasks = eval_tasks(store, "calc")
    stored = find_evaluation(store, eval_id(policy, "calc", task_ids, settings))   # reuse when already done
    record_evaluation(store, policy=..., env="calc", settings=..., results=[...], round=2, label="round 2")

An evaluation's id hashes what decides its outcome (the policy, the environment, the task ids and the
settings), so evaluating the same policy the same way again finds the stored rows instead of running again.
Results go to ``eval_results``, never to ``trajectories``: no signal, pattern or synthesizer sees a held-out task.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from coevolve_engine.store import Store

EVAL_TASKS_SQL = """
SELECT task_id, spec FROM tasks WHERE split = 'eval' AND env = $env
ORDER BY md5(task_id || ':' || CAST($seed AS VARCHAR)), task_id
LIMIT $limit
"""


@dataclass(frozen=True)
class TaskResult:
    """The environment's verdict on one eval task."""

    task_id: str
    reward: float
    success: bool
    reason: str = ""
    actions: tuple[dict[str, Any], ...] = ()
    completion: Any = None


@dataclass(frozen=True)
class Evaluation:
    eval_id: str
    policy: str
    label: str | None
    tasks: int
    successes: int

    @property
    def success_rate(self) -> float:
        return self.successes / self.tasks if self.tasks else 0.0


def eval_tasks(store: Store, env: str, *, limit: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The eval tasks of ``env`` (a fixed seeded subset of ``limit`` when given), as task records."""
    rows = store.execute(EVAL_TASKS_SQL, {"env": env, "seed": seed, "limit": limit or 2**62}).fetchall()
    return [{"task_id": task_id, "spec": json.loads(spec)} for task_id, spec in sorted(rows)]


def eval_id(policy: str, env: str, task_ids: Iterable[str], settings: Mapping[str, Any]) -> str:
    key = json.dumps({"policy": policy, "env": env, "tasks": sorted(task_ids), "settings": dict(settings)},
                     sort_keys=True)
    return "eval-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def find_evaluation(store: Store, eval_id_: str) -> Evaluation | None:
    rows = store.execute("SELECT eval_id, policy, label, tasks, successes FROM evaluations WHERE eval_id = $id",
                         {"id": eval_id_}).fetchall()
    return Evaluation(*rows[0]) if rows else None


def record_evaluation(store: Store, *, policy: str, env: str, settings: Mapping[str, Any],
                      results: list[TaskResult], round: int | None = None, label: str | None = None,
                      step: int | None = None) -> Evaluation:
    """Store an evaluation and its per-task results in one transaction (replacing an earlier copy of it)."""
    identifier = eval_id(policy, env, [r.task_id for r in results], settings)
    successes = sum(1 for r in results if r.success)
    with store.transaction() as con:
        con.execute("DELETE FROM eval_results WHERE eval_id = $id", {"id": identifier})
        con.execute("DELETE FROM evaluations WHERE eval_id = $id", {"id": identifier})
        con.execute(
            "INSERT INTO evaluations (eval_id, policy, round, label, env, settings, tasks, successes, success_rate, "
            "step) VALUES ($id, $policy, $round, $label, $env, $settings, $tasks, $successes, $rate, $step)",
            {"id": identifier, "policy": policy, "round": round, "label": label, "env": env,
             "settings": json.dumps(dict(settings), sort_keys=True), "tasks": len(results),
             "successes": successes, "rate": successes / len(results) if results else None, "step": step})
        con.executemany(
            "INSERT INTO eval_results VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(identifier, r.task_id, float(r.reward), bool(r.success), r.reason, json.dumps(list(r.actions)),
              json.dumps(r.completion)) for r in results])
    return Evaluation(identifier, policy, label, len(results), successes)
