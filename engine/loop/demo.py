"""The offline demo: the whole loop on the built-in calc environment with a tiny policy built here.

    from coevolve_engine.loop.demo import run_demo
    run_demo(Path("coevolve-demo"), rounds=8)

1. A store with the training tasks (calc's seed split in the 'steps' form, plus a few tasks one skill move
   beyond it: they cover part of the skill space), calc's held-out test tasks (split 'eval', 'steps' form; they
   cover all of it) and reference rollouts of the training tasks at step 0, the warm-up's demonstrations (the
   reference agent's rollouts: the signal views leave them out, see ``sql/views/scored_trajectories.sql``).
2. A tiny Qwen3 policy: a tokenizer trained on those demonstrations and the skill words, a model from a config.
3. `coevolve-engine run` with the demo's configuration (``coevolve_engine/data/demo.toml``, copied into the
   folder as run.toml): SFT warm-up, then rounds of GRPO, held-out evaluation, signals, patterns, offline
   synthesis (offline:calc), validation and new weights.

Everything is written under the folder (the store, the policy, the checkpoints, run.toml, run.log with every
detail line, and report.html at the end); running it again resumes where it stopped. Every figure it prints is a
row of the ``run_rounds_with`` macro.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from importlib import resources
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from coevolve_engine.adapters.agents.reference_agent import ReferenceAgent
from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.lease import hold_lease
from coevolve_engine.core.outputs import write_output
from coevolve_engine.core.store import DEFAULT_WAIT_SECONDS, Store
from coevolve_engine.drift import DriftParams
from coevolve_engine.loop import RunLoop, load_config
from coevolve_engine.loop.context import RunContext
from coevolve_engine.loop.preflight import check_plugins
from coevolve_engine.loop.train_round import quiet_libraries
from coevolve_engine.report import build_report
from coevolve_engine.rollouts.jobs import run_rollout_job
from coevolve_engine.trainers.sft import demonstrations
from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, demonstration_corpus

if TYPE_CHECKING:
    from coevolve_engine.loop import RunConfig

ENV = "calc"
STORE_NAME = "demo.duckdb"


@dataclass(frozen=True)
class DemoSize:
    """How big the demo is: the full one, or the quick one the tests run."""

    seed_tasks: int
    eval_tasks: int
    frontier_tasks: int
    rounds: int
    overrides: tuple[str, ...] = ()


FULL = DemoSize(seed_tasks=160, frontier_tasks=40, eval_tasks=157, rounds=8)
#: 150 warm-up steps: with 20, every rollout failed and called no tool, so no signal flagged anything (the
#: reference demonstrations are not the policy's history) and no task was synthesized.
QUICK = DemoSize(seed_tasks=20, frontier_tasks=4, eval_tasks=20, rounds=2, overrides=(
    "warmup.steps=150", "trainer.steps_per_round=2", "trainer.options.group_size=4",
    "trainer.options.groups_per_step=2", "synthesis.max_candidates=4",
))


def demo_config_text() -> str:
    return resources.files("coevolve_engine.data").joinpath("demo.toml").read_text(encoding="utf-8")


def prepare(folder: Path, size: DemoSize, *, seed: int = 0, echo: Callable[[str], None] = print) -> tuple[Path, Path]:
    """The demo's store and policy under ``folder`` (made once; a rerun finds them)."""
    folder.mkdir(parents=True, exist_ok=True)
    db, policy = folder / STORE_NAME, folder / "policy"
    environment = load_environment(ENV)
    training = seed_tasks(environment, size.seed_tasks, seed) + frontier_tasks(environment, size.frontier_tasks, seed)
    with Store(db) as store:
        seeds = store.add_records("tasks", training, label="calc seed tasks")
        held = store.add_records("tasks", held_out(environment)[:size.eval_tasks], label="calc test tasks (held out)")
    if seeds.added or held.added:
        echo(f"store {db}: {size.seed_tasks + size.frontier_tasks} training tasks ({size.seed_tasks} of calc's seed "
             f"split, {size.frontier_tasks} one skill move beyond it), {size.eval_tasks} held-out test tasks")
    # every time: the job writes one task's demonstration at a time and skips the tasks that have one, so a
    # demo killed in the middle of it gets the rest (the policy's tokenizer and warm-up are built from them all);
    # the training tasks only, never the tasks a finished round synthesized
    summary = run_rollout_job(db, environment, ENV, ReferenceAgent(parallel=True), group_size=1, step=0,
                              concurrency=1, task_ids=[task["task_id"] for task in training])
    if summary.tasks:
        echo(f"demonstrations: {summary.rollouts} reference rollouts of the training tasks at step 0")
    if not (policy / "model.safetensors").exists():
        _build_policy(db, policy, environment)
        echo(f"policy {policy}: a tiny Qwen3 built from a config, tokenizer trained on the demonstrations")
    return db, policy


def seed_tasks(environment, n: int, seed: int = 0) -> list[dict]:
    """The demo's training tasks: ``n`` of calc's seed split in the 'steps' form, the form the held-out tasks
    take (a 'goal' demonstration shows an operand the policy would have to compute, which a tiny model does not
    learn in minutes: half the warm-up's demonstrations taught nothing held-out)."""
    tasks = [task for task in environment.load_tasks(split="seed", n=2 * n + 40, seed=seed)
             if task["spec"]["form"] == "steps"]
    if len(tasks) < n:
        raise ValueError(f"calc's seed split holds fewer than {n} 'steps' tasks for seed {seed}")
    return tasks[:n]


#: The cells the demo's few frontier tasks come from: one move from the seed split's space (two-digit operands,
#: or one distractor). Ten demonstrations a cell lift the warmed-up policy to 22% held-out (from 13% with 'steps'
#: seed tasks alone, seed 0) and give it partial success one more move out (2 distractors, 2-digit chains).
FRONTIER_CELLS = ((1, "large", 0), (2, "large", 0), (1, "small", 1), (2, "small", 1))


def frontier_tasks(environment, n: int, seed: int = 0) -> list[dict]:
    """``n`` 'steps' tasks of calc's ``full`` split (disjoint from the test split) in ``FRONTIER_CELLS``, the
    cells taking turns."""
    by_cell: dict[tuple, list[dict]] = {cell: [] for cell in FRONTIER_CELLS}
    for task in environment.load_tasks(split="full", n=40 * n + 200, seed=seed):
        skill = task["spec"]["skill"]
        cell = (skill["calls"], skill["operands"], skill["distractors"])
        if skill["form"] == "steps" and cell in by_cell:
            by_cell[cell].append(task)
    chosen = [task for tasks in zip(*by_cell.values()) for task in tasks][:n]
    if len(chosen) < n:
        raise ValueError(f"calc's full split holds fewer than {n} frontier tasks for seed {seed}")
    return chosen


def held_out(environment) -> list[dict]:
    """The demo's held-out tasks: calc's test split in the 'steps' form (every operand given). The 'goal' form
    ("add a number so x is 14") asks the policy to do the arithmetic itself, which no setting tried taught a
    tiny model in minutes; `coevolve-engine tasks import calc --category test --split eval` adds all of them."""
    return [{**task, "split": "eval"} for task in environment.load_tasks(split="test")
            if task["spec"]["form"] == "steps"]


def _build_policy(db: Path, policy: Path, environment) -> None:
    """Build the policy beside ``policy`` and rename it into place: a build killed half way (the model saved, its
    tokenizer not) leaves no ``policy`` folder, and the next demo builds it again."""
    building = policy.with_name(policy.name + ".building")
    shutil.rmtree(building, ignore_errors=True)  # a build that was interrupted
    corpus = demonstration_corpus(demonstrations(db, environment), vocab_size=1024)
    corpus += [task["prompt"] for task in environment.load_tasks(split="full")]  # every skill's words, no test prompt
    build_tiny_qwen3(building, corpus, hidden_size=64, layers=2, vocab_size=1024, digits=True)
    shutil.rmtree(policy, ignore_errors=True)  # one from an earlier version's interrupted build
    os.replace(building, policy)


REPORT_NAME = "report.html"


def write_report(folder: Path, db: Path, config: "RunConfig") -> Path:
    """The run's HTML report (``coevolve-engine report``) at ``folder/report.html``, at the run's signal
    constants; replaced on every run (it is always a page this function wrote)."""
    params = DriftParams(**config.signal_params().bind())
    with Store(db, read_only=True) as store:
        page = build_report(store, params, title=f"coevolve-engine demo: {folder.name}", label=folder.name)
    path = folder / REPORT_NAME
    write_output(path, page, "html", db=db, force=False)
    return path
#: Held-out success of each evaluated policy, by the number of user turns of the task (calc: one turn, or one
#: turn per call of a 2- or 3-call chain).
HELD_OUT_BY_TURNS_SQL = """
SELECT coalesce(CAST(e.round AS VARCHAR), 'start') AS policy,
       round(avg(CAST(r.success AS INTEGER)) FILTER (WHERE t.turns = 1), 3) AS one_turn,
       round(avg(CAST(r.success AS INTEGER)) FILTER (WHERE t.turns = 2), 3) AS two_turns,
       round(avg(CAST(r.success AS INTEGER)) FILTER (WHERE t.turns = 3), 3) AS three_turns,
       count(*) FILTER (WHERE t.turns > 1) AS multi_turn_tasks
FROM evaluations AS e
JOIN eval_results AS r USING (eval_id)
JOIN (SELECT task_id, coalesce(json_array_length(json_extract(spec, '$.turns')), 1) AS turns FROM tasks) AS t
  USING (task_id)
GROUP BY e.round, e.step ORDER BY e.step
"""


#: Every held-out evaluation of the run, in step order: the demo's held-out curve.
HELD_OUT_CURVE_SQL = """
SELECT label, step, successes, tasks FROM evaluations WHERE step IS NOT NULL ORDER BY step, created_at
"""


def held_out_curve(store: Store, width: int = 50) -> str:
    """The run's held-out success against training step as text (rows of ``HELD_OUT_CURVE_SQL``; see
    ``curve_lines``)."""
    return curve_lines(store.execute(HELD_OUT_CURVE_SQL).fetchall(), width)


def curve_lines(rows: list[tuple[str, int, int, int]], width: int = 50) -> str:
    """``rows`` of (label, step, successes, tasks) as a text chart: one line per evaluation, a bar from 0 to the
    highest success rounded up to a multiple of 10% (``width`` characters), ``|`` where the first evaluation
    (the starting policy) ends, and the change from it in points, e.g. ::

        held-out success, bar from 0 to 50%
        step   0  start     38.9% (61/157)  #######################################|
        step  25  round 0   39.5% (62/157)  #######################################|#  +0.6
    """
    if not rows:
        return "(no held-out evaluation yet)"
    rates = [successes / tasks if tasks else 0.0 for _, _, successes, tasks in rows]
    top = max(10, 10 * -(-round(100 * max(rates), 6) // 10)) / 100  # the highest, rounded up to 10%
    mark = round(rates[0] / top * width)
    lines = [f"held-out success, bar from 0 to {100 * top:.0f}%"]
    for index, ((label, step, successes, tasks), rate) in enumerate(zip(rows, rates)):
        bar = "#" * round(rate / top * width)
        bar = bar + " " * (mark - len(bar)) + "|" if len(bar) < mark else bar[:mark] + "|" + bar[mark:]
        change = f"{100 * (rate - rates[0]):+5.1f}" if index else ""
        lines.append(f"step {step:>4}  {label:<9} {100 * rate:5.1f}% ({successes}/{tasks})  {bar:<{width + 1}}  "
                     f"{change}".rstrip())
    return "\n".join(lines)


def held_out_by_turns(store: Store):
    """Held-out success of the starting policy and each round's checkpoint, by user turns per task."""
    return store.sql(HELD_OUT_BY_TURNS_SQL)


def run_demo(folder: Path, *, quick: bool = False, rounds: int | None = None, seed: int = 0,
             overrides: tuple[str, ...] = (), echo: Callable[[str], None] = print) -> tuple[Path, "RunConfig"]:
    """Prepare (once) and run (or resume) the demo under ``folder``; returns the store's path and the config."""
    quiet_libraries()
    size = QUICK if quick else FULL
    folder.mkdir(parents=True, exist_ok=True)
    config_path, policy = folder / "run.toml", folder / "policy"
    settings = [*size.overrides, f"rounds={rounds or size.rounds}", f"seed={seed}", f"trainer.model={policy}",
                f"trainer.output_dir={folder / 'checkpoints'}", *overrides]
    _check_settings(folder / STORE_NAME, config_path, settings)  # a refused --set leaves the store as it was
    # the lease first: a second demo on this folder refuses before it builds or writes anything
    with hold_lease(folder / STORE_NAME, "demo", wait=DEFAULT_WAIT_SECONDS, create=True, echo=echo):
        db, policy = prepare(folder, size, seed=seed, echo=echo)
        if not config_path.exists():
            config_path.write_text(demo_config_text(), encoding="utf-8")
        config = load_config(config_path, settings)
        RunLoop(db, config, echo=echo).run()
    return db, config


def _check_settings(db: Path, config_path: Path, settings: list[str]) -> None:
    """Load the demo's config (its run.toml, or the one it would write) with ``settings`` and check its plugins as a
    run does before it writes anything; ConfigError if refused."""
    with tempfile.TemporaryDirectory() as scratch:
        draft = Path(scratch) / "run.toml"
        if not config_path.exists():
            draft.write_text(demo_config_text(), encoding="utf-8")
        config = load_config(config_path if config_path.exists() else draft, settings)
    check_plugins(RunContext(db, config, DEFAULT_WAIT_SECONDS, lambda line: None))
