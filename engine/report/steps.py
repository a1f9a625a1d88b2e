"""The lead of a report on a store of ingested rollouts (no rounds: the drift report is over step windows).

Such a store has steps, tasks, rollouts and what the signals flag in them, and no held-out evaluations,
synthesis or run phases; its page leads with what it has: a headline over steps (training success from the
first step window to the last, over the tasks scored in both; the rollouts; the flagged ones per signal), then
what the signals found, by name: the tasks forgetting fired on, ranked by what they lost (forgetting_tasks_with),
the tasks with mixed-outcome groups (boundary), the rare action patterns. Success (a share of rollouts) is shown
as a percentage, a score or mean reward as a number in [0, 1]. Every number is a table of the drift report
(``ends``, ``forgetting_tasks``, ``boundary_tasks``, ``rare_patterns``, ``steps``, ``eval_steps``), so
``coevolve-engine drift --table NAME`` prints it and ``drift --sql`` gives its query.
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


def _reward(value: Any) -> str:
    return "-" if value is None else f"{float(value):.2f}"


def _span(first: Any, last: Any) -> str:
    return f"step {first}" if first == last else f"steps {first}-{last}"


def facts(report: DriftReport) -> dict[str, Any]:
    """The headline's numbers, from the report's tables: training success compares the first window with the
    last over the tasks scored in both (``ends``: drift_ends_with), never two different task sets."""
    steps = report["steps"].sort("step")
    flagged = report["eval_steps"]
    ends = {row["end"]: row for row in report["ends"].iter_rows(named=True)}
    first, last = ends.get("first"), ends.get("last") or ends.get("first")
    return {
        "first_step": steps["step"][0] if steps.height else None,
        "last_step": steps["step"][-1] if steps.height else None,
        "steps": steps.height, "rollouts": int(steps["rollouts"].sum()) if steps.height else 0,
        "tasks": report["task_drift"]["task_id"].n_unique() if report["task_drift"].height else 0,
        "first_window": first and _span(first["first_step"], first["last_step"]),
        "last_window": last and _span(last["first_step"], last["last_step"]),
        "windows_differ": bool(first and last and first["round"] != last["round"]),
        "shared_tasks": last["shared_tasks"] if last else 0,
        "first_tasks": first and first["tasks"], "last_tasks": last and last["tasks"],
        "start": first and first["success_rate"], "end": last and last["success_rate"],
        "start_reward": first and first["mean_reward"], "end_reward": last and last["mean_reward"],
        "flagged": int(flagged["flagged"].sum()) if flagged.height else 0,
        **{signal: int(flagged[signal].sum()) if flagged.height else 0
           for signal in ("forgetting", "boundary", "rare")},
        "forgetting_tasks": report["forgetting_tasks"].height, "boundary_tasks": report["boundary_tasks"].height,
        "rare_patterns": report["rare_patterns"].height,
    }


def compared(f: dict[str, Any]) -> str:
    """What the training-success figures compare, in words."""
    if not f["windows_differ"]:
        return f"the {_plural(f['shared_tasks'], 'task')} of {f['first_window']}"
    if not f["shared_tasks"]:
        return (f"no task was scored both in the first window ({f['first_window']}, "
                f"{_plural(f['first_tasks'], 'task')}) and in the last ({f['last_window']}, "
                f"{_plural(f['last_tasks'], 'task')})")
    return (f"the {_plural(f['shared_tasks'], 'task')} scored both in the first window ({f['first_window']}) and in "
            f"the last ({f['last_window']})")


def sentence(f: dict[str, Any]) -> str:
    if not f["steps"]:
        return "No scored rollouts yet."
    span = _span(f["first_step"], f["last_step"])
    if not f["windows_differ"]:
        trend = f"training success {_pct(f['end'])} on {compared(f)}"
    elif f["shared_tasks"]:
        trend = f"on {compared(f)}, training success went from {_pct(f['start'])} to {_pct(f['end'])}"
    else:
        trend = f"{compared(f)}, so no training success is compared"
    return (f"{_plural(f['rollouts'], 'rollout')} of {_plural(f['tasks'], 'task')} over {_plural(f['steps'], 'step')} "
            f"({span}); {trend}; the signals flagged forgetting on {_plural(f['forgetting_tasks'], 'task')}, "
            f"boundary on {_plural(f['boundary_tasks'], 'task')} and "
            f"{_plural(f['rare_patterns'], 'rare action pattern')}.")


def _success_note(f: dict[str, Any], threshold: float, reward: str) -> str:
    over = compared(f) if f["windows_differ"] and not f["shared_tasks"] else f"on {compared(f)}"
    return f"{over}; success as recorded, else reward ≥ {threshold:g}; mean reward {reward}"


def render_headline(report: DriftReport) -> str:
    """The headline card of a store without rounds, in the layout of ``headline.render``."""
    f = facts(report)
    windows = report["rounds"].height
    if f["windows_differ"]:
        success = f"{_pct(f['start'])} → {_pct(f['end'])}"
        reward = f"{_reward(f['start_reward'])} → {_reward(f['end_reward'])}"
    else:
        success, reward = _pct(f["end"]), _reward(f["end_reward"])
    numbers = [
        ("training success", success,
         _success_note(f, report.params.threshold, reward) if f["steps"] else "no scored rollouts"),
        ("training", _plural(f["steps"], "step"),
         f"{_plural(f['rollouts'], 'rollout')} of {_plural(f['tasks'], 'task')}; no rounds (ingested rollouts): "
         f"{_plural(windows, 'window')} of up to {_plural(report.window, 'step')} with data"),
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
    return _span(row["first_step"], row["last_step"])


def _forgotten(row: dict) -> str:
    """One forgetting task: its worst drop (mean reward before and while down), how long, what it lost."""
    back = f"back at step {row['recovered_step']}" if row["recovered_step"] is not None else "not back"
    events = f"; {_plural(row['forgetting_events'], 'event')}" if row["forgetting_events"] > 1 else ""
    return (f"<code>{_e(row['task_id'])}</code>: mean reward {_reward(row['level_before'])} → "
            f"{_reward(row['level_after'])} from step {row['step']}, {_plural(row['steps_down'], 'step')} down "
            f"({back}), lost {float(row['lost']):.2f}{events}")


def render_findings(report: DriftReport) -> str:
    """What the signals found, by name: forgetting tasks (ranked by what they lost), boundary tasks, rare action
    patterns."""
    forgetting = _listed(report["forgetting_tasks"], _forgotten, "no task forgotten")
    boundary = _listed(
        report["boundary_tasks"],
        lambda r: (f"<code>{_e(r['task_id'])}</code>: {_plural(r['mixed_groups'], 'mixed group')} ({_steps(r)}), "
                   f"group success {_pct(r['mean_group_success'])}"),
        "no group with mixed outcomes")
    rare = _listed(
        report["rare_patterns"],
        lambda r: (f"<code>{_e(r['action_pattern'])}</code>: {_plural(r['trajectories'], 'rollout')} "
                   f"({_pct(r['share'])} of rollouts, {_steps(r)})"),
        "no rare action pattern")
    columns = [("Forgetting: tasks the agent solved and then failed, by what they lost", "found-forgetting",
                forgetting),
               ("Boundary: tasks with groups that both succeeded and failed", "found-boundary", boundary),
               ("Rare: action patterns below the rare share", "found-rare", rare)]
    body = "".join(f'<div id="{anchor}"><h3>{_e(title)}</h3>{items}</div>' for title, anchor, items in columns)
    return f'<div class="found">{body}</div>'
