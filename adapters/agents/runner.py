"""K rollouts per task, a bounded number at a time.

    def write(rollout):                       # called in the caller's thread, as each rollout finishes
        store.add_trajectory(rollout.to_record())
    rollouts = run_rollouts(env, tasks, agent, group_size=8, concurrency=4, step=40, on_rollout=write)

Each rollout plays its own fresh episode (``env.start`` per rollout). Worker threads only play episodes;
the callback runs in the calling thread, so it may use a database connection that is not thread-safe. A
rollout that faults comes back with ``error`` set and the others go on; an exception raised by the
callback itself stops the run (pending rollouts are cancelled) and propagates.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from coevolve_engine.core.rollout import STOP_ERROR, Rollout
from .player import play_all, start_play

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.environment import Environment
    from .base import Agent


def default_group_id(task_id: str, step: int | None) -> str:
    """The K rollouts of one task at one training step form one group."""
    return f"{task_id}@{step if step is not None else 0}"


def _task_key(task: Mapping[str, Any], index: int) -> tuple[str, dict[str, Any]]:
    try:
        return str(task["task_id"]), dict(task["spec"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"task #{index} must be a mapping with 'task_id' and 'spec' keys, got {task!r:.200}") from exc


def _play_one(env: "Environment", agent: "Agent", task_id: str, spec: dict[str, Any]) -> Rollout:
    started = time.perf_counter()
    try:
        return agent.run(env, task_id, spec)
    except Exception as exc:  # noqa: BLE001 - agents should not raise; if one does, only this rollout fails
        error = f"{type(agent).__name__}.run raised {type(exc).__name__}: {exc}"
        return Rollout(
            task_id=task_id,
            policy=getattr(agent, "policy", type(agent).__name__),
            stop=STOP_ERROR,
            error=error,
            reason=error,
            duration_s=time.perf_counter() - started,
        )


def run_rollouts(
    env: "Environment",
    tasks: Iterable[Mapping[str, Any]],
    agent: "Agent",
    *,
    group_size: int = 1,
    concurrency: int = 1,
    step: int | None = None,
    on_rollout: Callable[[Rollout], None] | None = None,
    group_id_for: Callable[[str, int | None], str] = default_group_id,
    progress: bool = False,
) -> list[Rollout]:
    """Play ``group_size`` rollouts of each task with at most ``concurrency`` at once.

    tasks: mappings with "task_id" and "spec" (what ``Environment.load_tasks`` yields, or store rows).
    agent: shared by all worker threads (its ``complete`` must be thread-safe; the built-ins are).
    step: the training step written on every rollout; group_id_for(task_id, step) names each task's group.
    on_rollout: called once per finished rollout, in the calling thread, in completion order.
    progress: show a tqdm bar.
    Returns the rollouts in task order, then sample order.
    """
    if group_size < 1:
        raise ValueError(f"group_size (rollouts per task) must be >= 1, got {group_size}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    jobs = []
    for index, task in enumerate(tasks):
        task_id, spec = _task_key(task, index)
        group_id = group_id_for(task_id, step)
        jobs.extend((task_id, spec, group_id, sample) for sample in range(group_size))
    results: list[Rollout | None] = [None] * len(jobs)
    if getattr(agent, "batched", False):
        return _play_batched(env, agent, jobs, results, step, on_rollout, batch_size=max(concurrency, 1) * 16)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="rollouts", unit="rollout")
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rollout")
    try:
        pending: dict[Future[Rollout], int] = {}
        next_job = 0
        while next_job < len(jobs) or pending:
            while next_job < len(jobs) and len(pending) < concurrency:  # submit lazily: cancel is cheap
                task_id, spec, _, _ = jobs[next_job]
                pending[executor.submit(_play_one, env, agent, task_id, spec)] = next_job
                next_job += 1
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                task_id, _, group_id, sample = jobs[index]
                rollout = future.result()
                rollout.task_id, rollout.group_id, rollout.step, rollout.sample_index = task_id, group_id, step, sample
                results[index] = rollout
                if bar is not None:
                    bar.update(1)
                if on_rollout is not None:
                    on_rollout(rollout)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.close()
    return [r for r in results if r is not None]


def _play_batched(env: "Environment", agent: "Agent", jobs: list, results: list, step: int | None,
                  on_rollout: Callable[[Rollout], None] | None, *, batch_size: int) -> list[Rollout]:
    """A batched agent (a local model) plays its episodes together, ``batch_size`` at a time, one ``respond`` per
    round of answers (``player.play_all``)."""
    for first in range(0, len(jobs), batch_size):
        chunk = jobs[first:first + batch_size]
        plays = [start_play(env, task_id, spec, agent) for task_id, spec, _, _ in chunk]
        for offset, ((task_id, _, group_id, sample), rollout) in enumerate(zip(chunk, play_all(plays, agent))):
            rollout.task_id, rollout.group_id, rollout.step, rollout.sample_index = task_id, group_id, step, sample
            results[first + offset] = rollout
            if on_rollout is not None:
                on_rollout(rollout)
    return [r for r in results if r is not None]
