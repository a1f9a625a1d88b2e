"""The report's headline: the run's result in a few numbers, every one of them a column of ``HEADLINE_SQL``.

    held-out success   the earliest and the latest evaluation on the eval split, by training step
    training           the last training step, finished rounds, training rollouts (the reference agent's
                       demonstrations are not training)
    tasks added        synthesized training tasks (accepted candidates), of all candidates, and their share of
                       the training set
    the loop's cost    feedback against training over the finished rounds (round_costs), the one definition
                       and label of ``coevolve_engine.display.loop_cost`` that the terminal prints too
"""

from __future__ import annotations

import html
from typing import Any

from coevolve_engine.display.loop_cost import LABEL, LOOP_COST_SQL, percent
from coevolve_engine.core.store import Store

HEADLINE_SQL = f"""
WITH cost AS ({LOOP_COST_SQL.strip()}),
evaluated AS (
    SELECT step, success_rate, tasks, created_at FROM evaluations WHERE step IS NOT NULL
),
first_eval AS (SELECT * FROM evaluated ORDER BY step, created_at LIMIT 1),
last_eval AS (SELECT * FROM evaluated ORDER BY step DESC, created_at DESC LIMIT 1)
SELECT
    (SELECT success_rate FROM first_eval) AS eval_start,
    (SELECT step FROM first_eval) AS eval_start_step,
    (SELECT success_rate FROM last_eval) AS eval_end,
    (SELECT step FROM last_eval) AS eval_end_step,
    (SELECT tasks FROM last_eval) AS eval_tasks,
    (SELECT max(step) FROM scored_trajectories) AS steps,
    (SELECT count(*) FROM scored_trajectories) AS rollouts,
    (SELECT count(*) FROM rounds WHERE status = 'finished') AS rounds,
    (SELECT count(*) FROM tasks WHERE split = 'train') AS train_tasks,
    (SELECT count(*) FROM tasks WHERE split = 'train' AND source = 'synthesized') AS tasks_added,
    (SELECT count(*) FROM candidates) AS candidates,
    (SELECT count(*) FROM candidates WHERE verdict = 'accepted') AS accepted,
    (SELECT sum(seconds) FROM run_phases) AS run_seconds,
    (SELECT rounds FROM cost) AS cost_rounds,
    (SELECT training FROM cost) AS cost_training_seconds,
    (SELECT feedback FROM cost) AS cost_feedback_seconds
"""


def headline(store: Store) -> dict[str, Any]:
    """``HEADLINE_SQL``'s one row, as a dict."""
    cursor = store.execute(HEADLINE_SQL)
    return dict(zip([c[0] for c in cursor.description], cursor.fetchall()[0]))


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"


def _seconds(value: Any) -> str:
    if value is None:
        return "-"
    value = float(value)
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.0f} s"


def sentence(h: dict[str, Any]) -> str:
    """The headline in one sentence of plain text."""
    parts = []
    if h["eval_end"] is not None:
        if h["eval_start"] is not None and h["eval_start_step"] != h["eval_end_step"]:
            parts.append(f"Held-out success went from {_pct(h['eval_start'])} to {_pct(h['eval_end'])} over "
                         f"{h['steps'] or 0} training steps")
        else:
            parts.append(f"Held-out success {_pct(h['eval_end'])} after {h['steps'] or 0} training steps")
    else:
        parts.append(f"{h['steps'] or 0} training steps, no evaluation on held-out tasks")
    if h["candidates"]:
        share = h["tasks_added"] / h["train_tasks"] if h["train_tasks"] else None
        parts.append(f"the loop added {h['tasks_added']} synthesized tasks ({_pct(share)} of the training set)")
    if h["cost_rounds"]:
        parts.append(f"{LABEL}: {percent(h['cost_feedback_seconds'], h['cost_training_seconds'])}")
    return "; ".join(parts) + "."


def render(h: dict[str, Any], label: str) -> str:
    """One run's headline: the sentence, then four numbers with what they are out of."""
    e = html.escape
    share = h["tasks_added"] / h["train_tasks"] if h["train_tasks"] else None
    acceptance = h["accepted"] / h["candidates"] if h["candidates"] else None
    if h["eval_start"] is not None and h["eval_start_step"] != h["eval_end_step"]:
        held = f"{_pct(h['eval_start'])} → {_pct(h['eval_end'])}"
        held_note = f"step {h['eval_start_step']} → {h['eval_end_step']}, on {h['eval_tasks']} held-out tasks"
    else:
        held = _pct(h["eval_end"])
        held_note = (f"step {h['eval_end_step']}, on {h['eval_tasks']} held-out tasks" if h["eval_end"] is not None
                     else "no evaluation on the eval split")
    cost = (percent(h["cost_feedback_seconds"], h["cost_training_seconds"]) if h["cost_rounds"] else "-")
    cost_note = (f"feedback {h['cost_feedback_seconds']:.1f} s against training {h['cost_training_seconds']:.1f} s "
                 f"over {h['cost_rounds']} round{'' if h['cost_rounds'] == 1 else 's'}; the run took "
                 f"{_seconds(h['run_seconds'])}") if h["cost_rounds"] else "no finished round with training yet"
    numbers = [
        ("held-out success", held, held_note),
        ("training", f"{h['steps'] or 0} steps", f"{h['rounds']} round{'' if h['rounds'] == 1 else 's'}, "
                                                f"{h['rollouts']} rollouts"),
        ("tasks added", f"+{h['tasks_added']}",
         f"{h['accepted']} of {h['candidates']} candidates accepted ({_pct(acceptance)}); "
         f"{h['train_tasks']} training tasks, {_pct(share)} synthesized"),
        (LABEL, cost, cost_note),
    ]
    cards = "".join(f'<div class="number"><div class="what">{e(what)}</div><div class="value">{e(value)}</div>'
                    f'<div class="of">{e(note)}</div></div>' for what, value, note in numbers)
    return (f'<div class="headline"><p class="sentence"><strong>{e(label)}</strong>: {e(sentence(h))}</p>'
            f'<div class="numbers">{cards}</div></div>')
