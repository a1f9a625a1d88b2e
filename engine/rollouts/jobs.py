"""Roll an agent out on tasks from the store and write every finished group back, as it finishes.

A group (the K rollouts of one task at one step) is written in one transaction when its last rollout
finishes, through a store opened only for that write, so readers can query between groups, an interrupted
run keeps every finished group, and a rerun skips the tasks whose group at that step is already stored.
Rollout ids are ``task_id@step#k`` (``core.sink.group_records``), so nothing is ever written twice.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from coevolve_engine.adapters.agents.runner import run_rollouts
from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.sink import StoreSink
from coevolve_engine.core.tasks import select_tasks
from coevolve_engine.core.store import Store

if TYPE_CHECKING:
    from coevolve_engine.adapters.agents.base import Agent
    from coevolve_engine.core.rollout import Rollout
    from coevolve_engine.core.environment import Environment

#: the most rollouts of one task one job plays at one step (a GRPO group of the largest size in use is 64-512);
#: every rollout of a job is planned, and held until its group is written, at once
MAX_GROUP_SIZE = 4096

ROLLED_OUT_SQL = """
SELECT DISTINCT task_id FROM trajectories WHERE step = $step AND list_contains($task_ids, task_id)
"""


class GroupWriter:
    """Buffers rollouts per group and writes each group whole, through ``StoreSink``, when its K-th arrives."""

    def __init__(self, db: Path, group_size: int, step: int, wait: float = DEFAULT_WAIT_SECONDS) -> None:
        self.group_size = group_size
        self.step = step
        self.sink = StoreSink(db, wait=wait, label="rollout group")
        self._pending: dict[str, list["Rollout"]] = defaultdict(list)

    @property
    def written_groups(self) -> int:
        return self.sink.groups

    @property
    def written_rollouts(self) -> int:
        return self.sink.rollouts

    def __call__(self, rollout: "Rollout") -> None:
        group = self._pending[rollout.group_id]
        group.append(rollout)
        if len(group) == self.group_size:
            self.sink.write_group(group, step=self.step, group_id=rollout.group_id)
            del self._pending[rollout.group_id]


@dataclass(frozen=True)
class RolloutSummary:
    tasks: int
    skipped_tasks: int
    rollouts: int
    successes: int
    faults: int
    mean_reward: float | None


def run_rollout_job(
    db: Path,
    env: "Environment",
    env_name: str,
    agent: "Agent",
    *,
    group_size: int,
    step: int,
    category: str | None = None,
    task_ids: list[str] | None = None,
    n_tasks: int | None = None,
    seed: int = 0,
    concurrency: int = 4,
    progress: bool = False,
    wait: float = DEFAULT_WAIT_SECONDS,
    on_group: Callable[[int], None] | None = None,
) -> RolloutSummary:
    """Roll ``agent`` out K times on each selected task at ``step``, writing groups as they finish.

    It takes fourteen parameters because they are `rollout`'s own options (which tasks: category, task_ids,
    n_tasks, seed; how: group_size, step, concurrency), each a single setting passed through as the command reads
    it, plus the store, the environment and the agent.
    """
    with Store(db, read_only=True, wait=wait) as store:
        tasks = select_tasks(store, env_name, category=category, task_ids=task_ids, n=n_tasks, seed=seed)
        if not tasks:
            where = f" in category {category}" if category else ""
            raise CoevolveError(
                f"no {env_name} tasks{where} in {db}; import some first, e.g. "
                f"`coevolve-engine tasks import {env_name}" + (f" --category {category}`" if category else "`")
            )
        done = {row[0] for row in store.execute(
            ROLLED_OUT_SQL, {"step": step, "task_ids": [t["task_id"] for t in tasks]}).fetchall()}
    todo = [task for task in tasks if task["task_id"] not in done]
    writer = GroupWriter(db, group_size, step, wait=wait)
    rollouts = run_rollouts(env, todo, agent, group_size=group_size, concurrency=concurrency, step=step,
                            on_rollout=writer, progress=progress)
    scored = [r for r in rollouts if r.error is None]
    return RolloutSummary(
        tasks=len(todo),
        skipped_tasks=len(done),
        rollouts=writer.written_rollouts,
        successes=sum(r.success for r in scored),
        faults=len(rollouts) - len(scored),
        mean_reward=sum(r.reward for r in scored) / len(scored) if scored else None,
    )
