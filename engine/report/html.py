"""One self-contained HTML page for a run (or two side by side, ``--compare``), the result first:

1. the headline (held-out success from start to end, steps, tasks added, the loop's cost; ``headline.py``)
   and the key figures: held-out success against step, flagged rollouts per signal per round, the task set's
   growth and synthesized share, acceptance per signal;
2. the failure patterns in words, with their lineage across rounds;
3. the details, folded (``<details>``): per-round tables, the other figures, each pattern's summary and example
   trajectories, every candidate's verdict, the configuration, weight sets and run phases, and the SQL.

A store of ingested rollouts (no rounds: the drift report is over step windows) leads instead with what it has
(``steps.py``): a headline over steps, what the signals found by name (forgetting tasks ranked by what they lost,
boundary tasks, rare patterns), then flagged rollouts per signal per step, training success per step and each
task's success over the windows; only the figures with something to draw (``plots.drawable``: more than one point,
more than one value).

The page is a list of sections (``render_report``'s ``body``): a new chart or table is one more entry there, or
one more name in ``FIGURES`` and ``CAPTIONS``.

Nothing in the page loads anything: no external CSS, scripts or fonts, images are data URIs, and a
Content-Security-Policy meta tag (``default-src 'none'``) forbids the browser any other request.
"""

from __future__ import annotations

import base64
import html
import json
from datetime import datetime, timezone
from typing import Any, Iterable

import polars as pl

from coevolve_engine.drift import DriftParams, DriftReport, compare, compute_drift
from coevolve_engine.drift.plots import drawable, figure_png, figure_sets
from coevolve_engine.report import steps as by_steps
from coevolve_engine.report.headline import HEADLINE_SQL, headline, render as render_headline
from coevolve_engine.core.store import Store

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1em auto; max-width: 1240px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin: 0.2em 0; } h2 { font-size: 1.2em; margin: 1em 0 0.4em; }
.meta { color: #666; font-size: 0.8em; margin: 0 0 0.6em; }
.runs { display: flex; gap: 1em; } .runs > * { flex: 1; min-width: 0; }
.headline { border: 1px solid #cdd; border-radius: 6px; padding: 0.4em 0.8em; background: #f6fafa; }
.sentence { margin: 0.2em 0 0.5em; }
.numbers { display: grid; grid-template-columns: repeat(4, 1fr); gap: 0.6em; }
.number .what { color: #555; font-size: 0.75em; text-transform: uppercase; letter-spacing: 0.04em; }
.number .value { font-size: 1.35em; font-weight: 600; } .number .of { color: #555; font-size: 0.75em; }
.figures { display: grid; grid-template-columns: 1fr 1fr; gap: 0.5em 1em; margin-top: 0.6em; }
.figures.compare { grid-template-columns: 1fr; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; padding: 0.5em; overflow-x: auto; font-size: 0.8em; max-height: 20em; }
figure { margin: 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.8em; color: #555; }
details { margin: 0.4em 0; border-top: 1px solid #ddd; padding-top: 0.3em; }
details > summary { cursor: pointer; font-weight: 600; }
.wide { overflow-x: auto; }
.note { color: #a15c00; } .pattern { border-left: 4px solid #4a7; padding-left: 1em; margin-bottom: 1.5em; }
ol.patterns li { margin-bottom: 0.5em; } .lineage { color: #555; font-size: 0.85em; }
.found { display: grid; grid-template-columns: repeat(3, 1fr); gap: 0.6em; font-size: 0.85em; }
.found h3 { font-size: 1em; margin: 0.5em 0 0.2em; } .found ul { margin: 0; padding-left: 1.2em; }
"""

#: what each figure shows, under it
CAPTIONS = {
    "heldout": "Held-out success against training step (drift_eval_steps); dashed: round boundaries.",
    "signals": "Rollouts each signal flagged, per round (drift_signals).",
    "growth": "The training task set per round, seed and synthesized, and the synthesized share (drift_synthesis).",
    "acceptance": "Share of each signal's candidates that validation accepted, per round (drift_candidates).",
    "eval": "Held-out success and the rollouts flagged per step, on the same steps (the paper's Figure 3).",
    "distribution": "The sampling probability of each task per round, and how far it moved (Jensen-Shannon).",
    "patterns": "Each failure pattern lineage's share of its round (drift_patterns).",
    "success": "Training success against step (drift_steps).",
    "diversity": "SR@k and ED_rel of the task prompts per round (drift_diversity).",
    "eval_similarity": "Candidates by their similarity to the held-out tasks (drift_eval_similarity).",
    "signals_steps": "Rollouts each signal flagged at each training step (drift_eval_steps).",
    "task_drift": "Each task's training success per round or step window (drift --table task_drift).",
    "group_health": "Share of each step's GRPO groups that were dead (all rewards equal: no gradient), and of its "
                    "rollouts that carry gradient (group_health; per task: task_group_health).",
}
#: the group-health section: dead groups against step, beside the curriculum's weights
GROUP_HEALTH_FIGURES = ("group_health", "distribution")
SIGNAL_WORDS = {
    "forgetting": "the agent used to solve these tasks and now fails them",
    "boundary": "the agent sometimes solves these tasks and sometimes fails them",
    "rare": "the agent took tool-call sequences it rarely takes",
}

PATTERNS_SQL = """
SELECT p.pattern_id, p.round, p.step, p.size, p.dominant_signal, p.signal_counts, p.summary, p.summary_error,
       p.representative_trajectory
FROM failure_patterns AS p ORDER BY p.size DESC, p.round DESC, p.pattern_id LIMIT $limit
"""
EXAMPLES_SQL = """
SELECT t.trajectory_id, t.task_id, t.step, t.reward, t.action_pattern, t.actions, k.prompt,
       t.trajectory_id = $representative AS representative
FROM pattern_members AS m
JOIN trajectories AS t USING (trajectory_id)
LEFT JOIN tasks AS k USING (task_id)
WHERE m.pattern_id = $pattern
UNION ALL
SELECT t.trajectory_id, t.task_id, t.step, t.reward, t.action_pattern, t.actions, k.prompt, true
FROM trajectories AS t LEFT JOIN tasks AS k USING (task_id)
WHERE t.trajectory_id = $representative
  AND NOT EXISTS (SELECT 1 FROM pattern_members WHERE pattern_id = $pattern AND trajectory_id = $representative)
ORDER BY representative DESC, trajectory_id
LIMIT $limit
"""
CANDIDATES_SQL = """
SELECT candidate_id, round, signal, pattern_id, synthesizer, reason, novelty, eval_similarity, success_rate, task_id,
       prompt
FROM candidates WHERE verdict = $verdict ORDER BY round, candidate_id LIMIT $limit
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f'<td class="num">{value:.4g}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td class="num">{value}</td>'
    if isinstance(value, (list, dict)):
        value = json.dumps(value, ensure_ascii=False)
    text = "" if value is None else str(value)
    return f"<td>{_e(text if len(text) <= 200 else text[:200] + '…')}</td>"


def table(frame: pl.DataFrame, empty: str = "none") -> str:
    if not frame.height:
        return f"<p><em>{_e(empty)}</em></p>"
    head = "".join(f"<th>{_e(c)}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in frame.iter_rows())
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _json_block(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    return f"<pre>{_e(json.dumps(value, indent=2, ensure_ascii=False, default=str))}</pre>"


def _configuration(store: Store) -> str:
    parts = []
    config = store.scalar("SELECT config FROM rounds WHERE config IS NOT NULL ORDER BY round DESC LIMIT 1")
    if config is not None:
        parts.append("<h3>Run configuration (latest round)</h3>" + _json_block(config))
    else:
        parts.append("<p>No <code>rounds</code> configuration: the rounds were made with the separate commands.</p>")
    weights = store.sql("SELECT round, strategy, step, tasks, nonzero, reason, params FROM weight_sets ORDER BY round")
    parts.append("<h3>Weight sets</h3>" + table(weights, "no weight sets"))
    phases = store.sql("SELECT round, phase, status, attempts, round(seconds, 1) AS seconds, outputs "
                       "FROM run_phases ORDER BY round, started_at")
    if phases.height:
        parts.append("<h3>Run phases</h3>" + table(phases))
    return "\n".join(parts)


def _group_health(reports: list[DriftReport]) -> str:
    """The GRPO group-health section: the dead-group share against step next to the curriculum's weights (each
    where there is something to draw; no section when neither has)."""
    names = [n for n in GROUP_HEALTH_FIGURES if drawable(n, reports)]
    if not names:
        return ""
    return (f'<section id="group-health"><h2>GRPO group health and the curriculum\'s weights</h2>'
            f'<div class="figures">{_figures(reports, names)}</div></section>')


def _figures(reports: list[DriftReport], names: Iterable[str]) -> str:
    out = []
    for name in names:
        data = base64.b64encode(figure_png(name, reports)).decode("ascii")
        out.append(f'<figure><img id="figure-{name}" alt="{_e(name)}" src="data:image/png;base64,{data}">'
                   f"<figcaption>{_e(CAPTIONS.get(name, name))}</figcaption></figure>")
    return "\n".join(out)


PATTERN_WORDS_SQL = """
SELECT p.pattern_id, p.round, p.size, p.dominant_signal, p.summary,
       (SELECT count(DISTINCT t.task_id) FROM pattern_members AS m JOIN trajectories AS t USING (trajectory_id)
        WHERE m.pattern_id = p.pattern_id) AS tasks,
       (SELECT t.action_pattern FROM pattern_members AS m JOIN trajectories AS t USING (trajectory_id)
        WHERE m.pattern_id = p.pattern_id GROUP BY t.action_pattern
        ORDER BY count(*) DESC, t.action_pattern LIMIT 1) AS usual_actions,
       (SELECT avg(t.reward) FROM pattern_members AS m JOIN trajectories AS t USING (trajectory_id)
        WHERE m.pattern_id = p.pattern_id) AS mean_reward,
       (SELECT k.prompt FROM trajectories AS t JOIN tasks AS k USING (task_id)
        WHERE t.trajectory_id = p.representative_trajectory) AS prompt
FROM failure_patterns AS p ORDER BY p.round DESC, p.size DESC, p.pattern_id LIMIT $limit
"""


def _summary_text(summary: Any) -> str | None:
    """An LLM summary's own words (its 'summary' and 'failure_cause'), or None."""
    if summary is None:
        return None
    try:
        value = json.loads(summary) if isinstance(summary, str) else summary
    except ValueError:
        return str(summary)
    if not isinstance(value, dict):
        return str(value)
    words = [str(value[k]) for k in ("summary", "failure_cause") if value.get(k)]
    return "; ".join(words) or None


def _lineage(report: DriftReport, pattern_id: str) -> tuple[str, str]:
    """A pattern's lineage (drift_patterns) and its course across rounds: ('boundary:calc-1',
    'lineage boundary:calc-1: round 0: 3 (new) → round 1: 5 (grew)'); the pattern id and '' when it has none."""
    frame = report.tables.get("patterns")
    mine = frame.filter(pl.col("pattern_ids").list.contains(pattern_id)) if frame is not None and frame.height \
        else None
    if mine is None or not mine.height:
        return pattern_id, ""
    name = mine["lineage"][0]
    rows = frame.filter(pl.col("lineage") == name).sort("round").iter_rows(named=True)
    return name, f"lineage {name}: " + " → ".join(f"round {r['round']}: {r['size']} ({r['trend']})" for r in rows)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _patterns_in_words(store: Store, report: DriftReport, top: int) -> str:
    """The ``top`` largest failure pattern lineages of the latest rounds, each in a sentence at its latest round
    (the lineage's latest LLM summary, else what its signal means), with its course across rounds."""
    found = store.sql(PATTERN_WORDS_SQL, {"limit": 10 * top})
    latest: dict[str, tuple[dict, str]] = {}
    summaries: dict[str, str] = {}
    for p in found.iter_rows(named=True):  # latest round first
        name, lineage = _lineage(report, p["pattern_id"])
        latest.setdefault(name, (p, lineage))
        if _summary_text(p["summary"]):
            summaries.setdefault(name, _summary_text(p["summary"]))
    if not latest or not top:
        return "<p><em>no failure patterns</em></p>"
    items = []
    for name, (p, lineage) in list(latest.items())[:top]:
        signal = p["dominant_signal"] or "unflagged"
        words = summaries.get(name) or SIGNAL_WORDS.get(signal, signal)
        actions = f"; the usual calls: <code>{_e(p['usual_actions'])}</code>" if p["usual_actions"] else ""
        reward = f", mean reward {p['mean_reward']:.2f}" if p["mean_reward"] is not None else ""
        prompt = p["prompt"] or ""
        prompt = prompt if len(prompt) <= 160 else prompt[:159] + "…"
        example = f' For example: “{_e(prompt)}”' if prompt else ""
        tasks = f" of {_plural(p['tasks'], 'task')}" if p["tasks"] else ""
        items.append(f"<li><strong>{_e(signal)}</strong> ({_plural(p['size'], 'rollout')}{tasks} in round "
                     f"{p['round']}{reward}): {_e(words)}{actions}.{example}"
                     + (f'<div class="lineage">{_e(lineage)}</div>' if lineage else "") + "</li>")
    return f'<ol class="patterns">{"".join(items)}</ol>'


def _patterns(store: Store, top: int, examples: int) -> str:
    found = store.execute(PATTERNS_SQL, {"limit": top}).fetchall()
    if not found:
        return "<p><em>no failure patterns</em></p>"
    out = []
    for pattern_id, round_, step, size, signal, counts, summary, error, representative in found:
        out.append(f'<div class="pattern"><h3>{_e(pattern_id)}: {_e(signal)}, {size} rollouts '
                   f"(round {round_}, step {_e(step)})</h3><p>members per signal: {_e(counts)}</p>")
        if summary is not None:
            out.append("<h4>Summary</h4>" + _json_block(summary))
        elif error:
            out.append(f'<p class="note">summary failed: {_e(error)}</p>')
        else:
            out.append("<p><em>not summarised</em></p>")
        members = store.sql(EXAMPLES_SQL, {"pattern": pattern_id, "representative": representative,
                                           "limit": examples})
        for row in members.iter_rows(named=True):
            label = "representative" if row["representative"] else "member"
            out.append(f"<h4>{label} {_e(row['trajectory_id'])}: task {_e(row['task_id'])}, step {row['step']}, "
                       f"reward {row['reward']:g}, actions {_e(row['action_pattern'])}</h4>"
                       f"<p>{_e(row['prompt'])}</p>" + _json_block(row["actions"]))
        out.append("</div>")
    return "\n".join(out)


def _candidates(store: Store, limit: int) -> str:
    counts = store.sql("SELECT verdict, reason, count(*) AS candidates FROM candidates GROUP BY ALL "
                       "ORDER BY verdict, candidates DESC, reason")
    out = ["<h3>By verdict and reason</h3>" + table(counts, "no candidates")]
    for verdict in ("accepted", "rejected", "pending"):
        frame = store.sql(CANDIDATES_SQL, {"verdict": verdict, "limit": limit})
        if frame.height or verdict != "pending":
            total = store.scalar("SELECT count(*) FROM candidates WHERE verdict = $v", {"v": verdict})
            shown = f" (first {frame.height} of {total})" if total > frame.height else ""
            out.append(f"<h3 id=\"candidates-{verdict}\">{verdict.capitalize()}{shown}</h3>" + table(frame))
    return "\n".join(out)


PER_ROUND_TABLES = [
    ("Signals", "signals"), ("Success on the eval split per round", "eval_rounds"),
    ("Eval success and flagged rollouts per step", "eval_steps"), ("Evaluations on the eval split", "eval"),
    ("Task set and synthesis", "synthesis"), ("Synthesized tasks by source", "synthesis_sources"),
    ("Candidates per round", "candidates"), ("Difficulty (task success rates)", "difficulty"),
    ("Diversity", "diversity"), ("Failure pattern lineages", "patterns"), ("Tools", "tools"),
    ("Candidates by similarity to the eval tasks", "eval_similarity"), ("Environment classes", "env_classes"),
    ("Weight divergence", "weights"), ("The first and the last round or window, over the tasks scored in both", "ends"),
    ("Forgetting tasks, ranked by what they lost", "forgetting_tasks"), ("Boundary tasks", "boundary_tasks"),
    ("Rare action patterns", "rare_patterns"),
    ("Loop cost: training and feedback seconds per round (the paper's feedback loop: +9.67% of training time on "
     "AppWorld, +12.76% on BFCL)", "costs")]


def _folded(title: str, anchor: str, body: str, *, open_: bool = False) -> str:
    return (f'<details id="{anchor}"{" open" if open_ else ""}><summary>{_e(title)}</summary>\n{body}\n'
            "</details>")


def _per_run(runs: list[tuple[Store, DriftReport]], render) -> str:
    """``render(store, report)`` for each run, under the run's name when there are two."""
    if len(runs) == 1:
        return render(*runs[0])
    return "".join(f"<h3>{_e(report.label)}</h3>" + render(store, report) for store, report in runs)


def render_report(store: Store, report: DriftReport, *, title: str, top_patterns: int = 5, examples: int = 3,
                  candidates: int = 50, notes: Iterable[str] = (),
                  compare_with: tuple[Store, DriftReport] | None = None) -> str:
    """The HTML page for ``store`` and its drift ``report`` (and, side by side, ``compare_with``'s)."""
    runs = [(store, report)] + ([compare_with] if compare_with is not None else [])
    reports = [r for _, r in runs]
    notes = [*notes, *(f"{r.label}: {n}" if len(runs) > 1 else n for r in reports for n in r.notes)]
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    summary = compare(reports[0], reports[1]) if len(reports) > 1 else reports[0].summary

    def tables(_store: Store, r: DriftReport) -> str:
        return "".join(f"<h4>{_e(name)}</h4>" + table(r.tables[key]) for name, key in PER_ROUND_TABLES
                       if key in r.tables)

    over_steps = any(r.by_steps for r in reports)
    key_figures, more_figures = figure_sets(reports)
    headlines = "".join(by_steps.render_headline(r) if r.by_steps else render_headline(headline(s), r.label)
                        for s, r in runs)
    words = "".join(f'<div><h3>{_e(r.label)}</h3>{_patterns_in_words(s, r, top_patterns)}</div>'
                    if len(runs) > 1 else _patterns_in_words(s, r, top_patterns) for s, r in runs)
    details = "\n".join([
        _folded("Step windows: the per-window summary and every metric's table" if over_steps
                else "Rounds: the per-round summary and every metric's table", "rounds",
                table(summary, "no rounds") + _per_run(runs, tables)),
        _folded("More figures", "more-figures",
                f'<div class="figures{" compare" if len(runs) > 1 else ""}">'
                f"{_figures(reports, [n for n in more_figures if n not in GROUP_HEALTH_FIGURES])}</div>"),
        _folded("Failure patterns: summaries and example trajectories", "pattern-examples",
                _per_run(runs, lambda s, r: _patterns(s, top_patterns, examples))),
        _folded("Candidates and their verdicts", "candidates", _per_run(runs, lambda s, r: _candidates(s, candidates))),
        _folded("Configuration, weight sets and run phases", "configuration",
                _per_run(runs, lambda s, r: _configuration(s))),
        _folded("The headline's SQL (recompute it with coevolve-engine query)", "headline-sql",
                f"<pre>{_e(HEADLINE_SQL.strip())}</pre>"),
    ])
    body = "\n".join([
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">Generated {generated} by coevolve-engine report. Every number and figure is a view or a '
        "query on the store: <code>coevolve-engine drift --sql</code>, and the headline's SQL at the end.</p>",
        "".join(f'<p class="note">{_e(n)}</p>' for n in notes),
        f'<section id="headline"><div class="runs">{headlines}</div></section>',
        *([f'<section id="found"><h2>What the signals found</h2><div class="runs">'
           + "".join(by_steps.render_findings(r) for r in reports) + "</div></section>"] if over_steps else []),
        f'<section id="figures"><div class="figures{" compare" if len(runs) > 1 else ""}">'
        f"{_figures(reports, key_figures)}</div></section>",
        _group_health(reports),
        f'<section id="patterns"><h2>Failure patterns, in words</h2>'
        f'<div class="runs">{words}</div></section>',
        f'<section id="details"><h2>Details</h2>\n{details}\n</section>',
    ])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")


def build_report(store: Store, params=None, *, title: str, label: str = "run", embedder=None,
                 notes: Iterable[str] = (), compare_with: tuple[Store, str] | None = None, **options) -> str:
    """Compute the drift report of ``store`` (and of ``compare_with``: another store and its label) and render
    the page."""
    report = compute_drift(store, params, label=label, embedder=embedder)
    other = None
    if compare_with is not None:
        other_store, other_label = compare_with
        other = (other_store, compute_drift(other_store, (params or DriftParams()).like(report), label=other_label,
                                            embedder=embedder))
    return render_report(store, report, title=title, notes=notes, compare_with=other, **options)
