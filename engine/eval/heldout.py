"""Evaluations of a policy on the store's held-out tasks (split 'eval'), stored per task.

    tasks = eval_tasks(store, "calc")
    stored = find_evaluation(store, eval_id(policy, "calc", task_ids, settings))   # reuse when already done
    record_evaluation(store, policy=..., env="calc", settings=..., results=[...], round=2, label="round 2")

    # or: play every task as a full episode with an Agent, storing each result as it finishes
    run = evaluate_agent(db, env, "bfcl", tasks, agent, settings={"temperature": 0.0, ...})
    run.categories        # [CategoryScore("multi_turn_base", correct_count=.., total_count=..)]

An evaluation's id hashes what decides its outcome (the policy, the environment, the task ids and the
settings), so evaluating the same policy the same way again finds the stored rows instead of running again.
Results go to ``eval_results``, never to ``trajectories``: no signal, pattern or synthesizer sees a held-out task.
``evaluate_agent`` writes each task's row as soon as the task is scored, so an interrupted evaluation keeps
what it finished and a rerun plays only the rest; the ``evaluations`` row is written once every task has a
result. A task cut short by a fault (a server error, a timeout, an environment that raised) is not stored:
it was not the policy's answer, so it is played again on the next run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from coevolve_engine.adapters.agents.runner import run_rollouts
from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.core.ids import normalize_id
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.store import Store

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.adapters.agents.base import Agent
    from coevolve_engine.core.rollout import Rollout
    from coevolve_engine.core.environment import Environment

EVAL_TASKS_SQL = """
SELECT task_id, spec FROM tasks
WHERE split = 'eval' AND env = $env
  AND (len($task_ids) = 0 OR list_contains($task_ids, task_id))
ORDER BY md5(task_id || ':' || CAST($seed AS VARCHAR)), task_id
LIMIT $limit
"""

INSERT_RESULT_SQL = """
INSERT INTO eval_results (eval_id, task_id, reward, success, reason, actions, completion) VALUES (?, ?, ?, ?, ?, ?, ?)
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


def eval_tasks(store: Store, env: str, *, limit: int | None = None, seed: int = 0,
               task_ids: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The eval tasks of ``env`` (only those of ``task_ids`` when given; a fixed seeded subset of ``limit``
    when given), as task records sorted by id."""
    rows = store.execute(EVAL_TASKS_SQL, {"env": env, "seed": seed, "limit": limit or 2**62,
                                          "task_ids": list(task_ids)}).fetchall()
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
        con.executemany(INSERT_RESULT_SQL, [_result_row(identifier, r) for r in results])
    return Evaluation(identifier, policy, label, len(results), successes)


# -- held-out tasks of a benchmark category ---------------------------------------------------------------

def hold_out_category(store: Store, environment: "Environment", env: str, category: str) -> tuple[list[str], int]:
    """Make sure the store holds ``category``'s shipped tasks as eval tasks: (the category's task ids, how many
    were imported now).

    When none of them is stored yet, all are imported with split 'eval' in one transaction; when some are
    (e.g. a subset imported with ``tasks import --split eval --limit``), those are what gets evaluated and
    nothing is imported. Refuses, naming some ids, when any of them is stored as a training task: a policy
    evaluated on tasks it may have trained on measures nothing held out.
    """
    try:
        records = list(environment.load_tasks(category=category))
    except (ValueError, TypeError) as exc:
        raise CoevolveError(f"cannot load {env} tasks of category {category!r}: {exc}") from exc
    if not records:
        raise CoevolveError(f"{env} ships no tasks of category {category!r}; nothing to evaluate")
    ids = [record["task_id"] for record in records]
    stored = dict(store.execute("SELECT task_id, split FROM tasks WHERE list_contains($ids, task_id)",
                                {"ids": ids}).fetchall())
    trained = sorted(task_id for task_id, split in stored.items() if split != "eval")
    if trained:
        shown = ", ".join(trained[:5]) + (", ..." if len(trained) > 5 else "")
        raise CoevolveError(
            f"{len(trained)} of the {len(ids)} {env} {category} tasks are in the store as training tasks "
            f"(split 'train'): {shown}. Evaluating on them would score tasks the policy may have trained on; "
            f"evaluate in a store that holds them only as eval tasks (`coevolve-engine tasks import {env} "
            f"--category {category} --split eval`)")
    if stored:
        return ids, 0
    store.add_records("tasks", [{**record, "split": "eval"} for record in records],
                      label=f"{env} tasks ({category}) for eval")
    return ids, len(records)


def select_eval_tasks(store: Store, env: str, *, among: Iterable[str] | None = None, category: str | None = None,
                      task_ids: Iterable[str] = (), limit: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The eval tasks of ``env`` to evaluate: those of ``among`` (the task ids of ``category``) when given,
    only ``task_ids`` when given (each must be one of them, else a CoevolveError names the others), at most
    ``limit`` of them in a fixed order seeded by ``seed``."""
    task_ids = [normalize_id(task_id) for task_id in task_ids]  # ids are stored in NFC
    pool = list(among) if among is not None else None
    if task_ids:
        known = {task["task_id"] for task in eval_tasks(store, env, task_ids=task_ids)}
        if pool is not None:
            known &= set(pool)
        unknown = sorted(set(task_ids) - known)
        if unknown:
            what = f"{env} eval tasks" + (f" of category {category}" if category else "")
            raise CoevolveError(f"not among the {what} in {store.path}: {', '.join(unknown)}")
        pool = task_ids
    if pool is not None and not pool:
        return []
    return eval_tasks(store, env, limit=limit, seed=seed, task_ids=pool or ())


# -- evaluating an Agent: one full episode per task, stored as it finishes ----------------------------------

CATEGORY_SCORES_SQL = """
SELECT coalesce($category, t.spec->>'category', t.env) AS category,
       count(*) FILTER (WHERE r.success) AS correct_count,
       count(*) AS total_count
FROM eval_results r JOIN tasks t USING (task_id)
WHERE r.eval_id = $id
GROUP BY 1 ORDER BY 1
"""


@dataclass(frozen=True)
class CategoryScore:
    """One category's line of a BFCL score file: accuracy = correct_count / total_count."""

    category: str
    correct_count: int
    total_count: int

    @property
    def accuracy(self) -> float:
        return self.correct_count / self.total_count if self.total_count else 0.0


@dataclass(frozen=True)
class AgentEvaluation:
    """What ``evaluate_agent`` did.

    reused: a complete stored evaluation was found and nothing ran. resumed: tasks whose result an earlier,
    interrupted run had stored. ran: tasks played and stored now. faults: (task_id, error) of the tasks cut
    short by a fault, not stored. evaluation: the ``evaluations`` row, None while some task has no result.
    categories: the scores per task category over the stored results (all tasks once complete).
    """

    eval_id: str
    policy: str
    env: str
    tasks: int
    reused: bool
    resumed: int
    ran: int
    faults: tuple[tuple[str, str], ...]
    evaluation: Evaluation | None
    categories: tuple[CategoryScore, ...]


def evaluate_agent(db: str | Path, environment: "Environment", env: str, tasks: Iterable[Mapping[str, Any]],
                   agent: "Agent", *, settings: Mapping[str, Any], label: str | None = None,
                   category: str | None = None, concurrency: int = 4, progress: bool = False,
                   wait: float = DEFAULT_WAIT_SECONDS) -> AgentEvaluation:
    """Evaluate ``agent`` on ``tasks`` (store task records), each a full episode scored by ``environment``.

    The evaluation's id hashes (agent.policy, env, task ids, settings); ``settings`` must hold everything
    that decides the outcome (temperature, max steps, max tokens). A complete stored evaluation with that
    id is reused; the tasks an interrupted one stored are not played again. Tasks run ``concurrency`` at a
    time; each scored task is written to ``eval_results`` in its own transaction through a store opened
    only for that write (so the store can be queried meanwhile). A task cut short by a fault is not stored.
    ``category``: the benchmark category the tasks make up, the name of their score (default: each task's
    ``spec.category``, else the environment's name).

    It takes eleven parameters because the first five are what is evaluated and the rest are `eval`'s own
    options, each a single setting passed through as the command reads it.
    """
    tasks = list(tasks)
    if not tasks:
        raise CoevolveError(f"no {env} tasks to evaluate")
    policy = agent.policy
    identifier = eval_id(policy, env, [t["task_id"] for t in tasks], settings)
    with Store(db, read_only=True, wait=wait) as store:
        stored = find_evaluation(store, identifier)
        if stored is not None:
            return AgentEvaluation(identifier, policy, env, stored.tasks, True, 0, 0, (), stored,
                                   category_scores(store, identifier, category))
        done = {row[0] for row in store.execute("SELECT task_id FROM eval_results WHERE eval_id = $id",
                                                {"id": identifier}).fetchall()}
    todo = [task for task in tasks if task["task_id"] not in done]
    faults: list[tuple[str, str]] = []
    written = 0

    def write(rollout: "Rollout") -> None:
        nonlocal written
        if rollout.error is not None:
            faults.append((rollout.task_id, rollout.error))
            return
        result = TaskResult(rollout.task_id, float(rollout.reward), bool(rollout.success), rollout.reason,
                            tuple(rollout.actions), rollout.messages)
        with Store(db, wait=wait) as store, store.transaction() as con:
            # OR IGNORE: another process evaluating the same way may have stored this task meanwhile
            con.execute(INSERT_RESULT_SQL.replace("INSERT INTO", "INSERT OR IGNORE INTO"),
                        _result_row(identifier, result))
        written += 1

    run_rollouts(environment, todo, agent, group_size=1, concurrency=concurrency, on_rollout=write, progress=progress)
    with Store(db, wait=wait) as store:
        evaluation = None
        if not faults:
            evaluation = _finish(store, identifier, policy, env, settings, label, [t["task_id"] for t in tasks])
        scores = category_scores(store, identifier, category)
    return AgentEvaluation(identifier, policy, env, len(tasks), False, len(done),
                           written, tuple(sorted(faults)), evaluation, scores)


def category_scores(store: Store, identifier: str, category: str | None = None) -> tuple[CategoryScore, ...]:
    """Correct and total counts per task category of an evaluation's stored results (one line named
    ``category`` when given)."""
    rows = store.execute(CATEGORY_SCORES_SQL, {"id": identifier, "category": category}).fetchall()
    return tuple(CategoryScore(*row) for row in rows)


def _result_row(identifier: str, r: TaskResult) -> tuple[Any, ...]:
    return (identifier, r.task_id, float(r.reward), bool(r.success), r.reason, json.dumps(list(r.actions)),
            json.dumps(r.completion))


def _finish(store: Store, identifier: str, policy: str, env: str, settings: Mapping[str, Any], label: str | None,
            task_ids: list[str]) -> Evaluation | None:
    """Write the ``evaluations`` row from the stored results once every task has one; None while some miss."""
    with store.transaction() as con:
        have = con.execute("SELECT count(*) FROM eval_results WHERE eval_id = $id AND list_contains($ids, task_id)",
                           {"id": identifier, "ids": task_ids}).fetchall()[0][0]
        if have < len(task_ids):
            return None
        con.execute("DELETE FROM evaluations WHERE eval_id = $id", {"id": identifier})
        con.execute(
            "INSERT INTO evaluations (eval_id, policy, label, env, settings, tasks, successes, success_rate) "
            "SELECT $id, $policy, $label, $env, $settings, count(*), count(*) FILTER (WHERE success), "
            "avg(CASE WHEN success THEN 1.0 ELSE 0.0 END) FROM eval_results WHERE eval_id = $id",
            {"id": identifier, "policy": policy, "label": label, "env": env,
             "settings": json.dumps(dict(settings), sort_keys=True)})
    return find_evaluation(store, identifier)
