"""The lead of a report on a store of ingested rollouts (no rounds: the drift report is over step windows).

Such a store has steps, tasks, rollouts and what the signals flag in them, and no held-out evaluations,
synthesis or run phases; its page leads with what it has: a headline over steps (training success from the
first step to the last, the rollouts, the flagged ones per signal), then what the signals found, by name: the
tasks forgetting fired on, the tasks with mixed-outcome groups (boundary), the rare action patterns. Every
number is a table of the drift report (``forgetting_tasks``, ``boundary_tasks``, ``rare_patterns``, ``steps``,
``eval_steps``), so ``coevolve-engine drift --table NAME`` prints it and ``drift --sql`` gives its query.
"""

from __future__ import annotations

import html
from typing import Any

import polars as pl

from coevolve_engine.drift import DriftReport

#: how many tasks or patterns each list of the findings names before "and N more"
SHOWN = 8


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def facts(report: DriftReport) -> dict[str, Any]:
    """The headline's numbers, from the report's tables."""
    steps = report["steps"].sort("step")
    flagged = report["eval_steps"]
    first = steps.row(0, named=True) if steps.height else None
    last = steps.row(-1, named=True) if steps.height else None
    return {
        "first_step": first and first["step"], "last_step": last and last["step"],
        "steps": steps.height, "rollouts": int(steps["rollouts"].sum()) if steps.height else 0,
        "tasks": report["task_drift"]["task_id"].n_unique() if report["task_drift"].height else 0,
        "start": first and first["success_rate"], "end": last and last["success_rate"],
        "flagged": int(flagged["flagged"].sum()) if flagged.height else 0,
        **{signal: int(flagged[signal].sum()) if flagged.height else 0
           for signal in ("forgetting", "boundary", "rare")},
        "forgetting_tasks": report["forgetting_tasks"].height, "boundary_tasks": report["boundary_tasks"].height,
        "rare_patterns": report["rare_patterns"].height,
    }


def sentence(f: dict[str, Any]) -> str:
    if not f["steps"]:
        return "No scored rollouts yet."
    span = f"steps {f['first_step']}-{f['last_step']}" if f["steps"] > 1 else f"step {f['first_step']}"
    return (f"{_plural(f['rollouts'], 'rollout')} of {_plural(f['tasks'], 'task')} over {_plural(f['steps'], 'step')} "
            f"({span}); training success went from {_pct(f['start'])} to {_pct(f['end'])}; the signals flagged "
            f"forgetting on {_plural(f['forgetting_tasks'], 'task')}, boundary on "
            f"{_plural(f['boundary_tasks'], 'task')} and {_plural(f['rare_patterns'], 'rare action pattern')}.")


def render_headline(report: DriftReport) -> str:
    """The headline card of a store without rounds, in the layout of ``headline.render``."""
    f = facts(report)
    windows = report["rounds"].height
    numbers = [
        ("training success", f"{_pct(f['start'])} → {_pct(f['end'])}",
         f"step {f['first_step']} → {f['last_step']}, success as recorded, else reward ≥ {report.params.threshold:g}"),
        ("training", _plural(f["steps"], "step"),
         f"{_plural(f['rollouts'], 'rollout')} of {_plural(f['tasks'], 'task')}; no rounds (ingested rollouts): "
         f"{_plural(windows, 'window')} of {_plural(report.window, 'step')}"),
        ("flagged rollouts", f"{f['flagged']:,}",
         f"forgetting {f['forgetting']:,}, boundary {f['boundary']:,}, rare {f['rare']:,}"),
        ("found", f"{f['forgetting_tasks']} / {f['boundary_tasks']} / {f['rare_patterns']}",
         "forgetting tasks / boundary tasks / rare patterns, named below"),
    ]
    cards = "".join(f'<div class="number"><div class="what">{_e(what)}</div><div class="value">{_e(value)}</div>'
                    f'<div class="of">{_e(note)}</div></div>' for what, value, note in numbers)
    return (f'<div class="headline"><p class="sentence"><strong>{_e(report.label)}</strong>: {_e(sentence(f))}</p>'
            f'<div class="numbers">{cards}</div></div>')


def _listed(frame: pl.DataFrame, item, empty: str) -> str:
    if not frame.height:
        return f"<p><em>{_e(empty)}</em></p>"
    items = "".join(f"<li>{item(row)}</li>" for row in frame.head(SHOWN).iter_rows(named=True))
    more = f"<li>and {frame.height - SHOWN} more (drift --table …)</li>" if frame.height > SHOWN else ""
    return f"<ul>{items}{more}</ul>"


def _steps(row: dict) -> str:
    first, last = row["first_step"], row["last_step"]
    return f"step {first}" if first == last else f"steps {first}-{last}"


def render_findings(report: DriftReport) -> str:
    """What the signals found, by name: forgetting tasks, boundary tasks, rare action patterns."""
    forgetting = _listed(
        report["forgetting_tasks"],
        lambda r: (f"<code>{_e(r['task_id'])}</code>: {_plural(r['events'], 'drop')} ({_steps(r)}), "
                   f"{_pct(r['best_before'])} → {_pct(r['worst_after'])}"),
        "no task forgotten")
    boundary = _listed(
        report["boundary_tasks"],
        lambda r: (f"<code>{_e(r['task_id'])}</code>: {_plural(r['mixed_groups'], 'mixed group')} ({_steps(r)}), "
                   f"group success {_pct(r['mean_group_success'])}"),
        "no group with mixed outcomes")
    rare = _listed(
        report["rare_patterns"],
        lambda r: (f"<code>{_e(r['action_pattern'])}</code>: {_plural(r['trajectories'], 'rollout')} "
                   f"({_pct(r['share'])}, {_steps(r)})"),
        "no rare action pattern")
    columns = [("Forgetting: tasks the agent solved and then failed", "found-forgetting", forgetting),
               ("Boundary: tasks with groups that both succeeded and failed", "found-boundary", boundary),
               ("Rare: action patterns below the rare share", "found-rare", rare)]
    body = "".join(f'<div id="{anchor}"><h3>{_e(title)}</h3>{items}</div>' for title, anchor, items in columns)
    return f'<div class="found">{body}</div>'
