"""One self-contained HTML page for a run: its configuration, per-round tables, the drift figures (PNG data
URIs), the top failure patterns with summaries and example trajectories, and every candidate's verdict.

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

from coevolve_engine.drift import DriftReport, compute_drift
from coevolve_engine.drift.plots import FIGURES, figure_png
from coevolve_engine.store import Store

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; padding: 0.5em; overflow-x: auto; font-size: 0.8em; max-height: 20em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
.wide { overflow-x: auto; }
.note { color: #a15c00; } .pattern { border-left: 4px solid #4a7; padding-left: 1em; margin-bottom: 1.5em; }
"""

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


def _figures(reports: list[DriftReport]) -> str:
    out = []
    for name in FIGURES:
        data = base64.b64encode(figure_png(name, reports)).decode("ascii")
        out.append(f'<figure><img id="figure-{name}" alt="{_e(name)}" src="data:image/png;base64,{data}">'
                   f"<figcaption>{_e(name)}</figcaption></figure>")
    return "\n".join(out)


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


def _section(title: str, anchor: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>\n{body}\n</section>'


def render_report(store: Store, report: DriftReport, *, title: str, top_patterns: int = 5, examples: int = 3,
                  candidates: int = 50, notes: Iterable[str] = ()) -> str:
    """The HTML page for ``store`` and its drift ``report``."""
    notes = [*notes, *report.notes]
    per_round = [("Signals", "signals"), ("Success on the eval split per round", "eval_rounds"),
                 ("Eval success and flagged rollouts per step", "eval_steps"),
                 ("Evaluations on the eval split", "eval"), ("Task set and synthesis", "synthesis"),
                 ("Synthesized tasks by source", "synthesis_sources"), ("Candidates per round", "candidates"),
                 ("Difficulty (task success rates)", "difficulty"), ("Diversity", "diversity"),
                 ("Failure pattern lineages", "patterns"), ("Tools", "tools"),
                 ("Candidates by similarity to the eval tasks", "eval_similarity"),
                 ("Environment classes", "env_classes"), ("Weight divergence", "weights"),
                 ("Loop cost: training and feedback seconds per round (the paper's feedback loop: +9.67% of "
                  "training time on AppWorld, +12.76% on BFCL)", "costs")]
    tables = "".join(f"<h3>{_e(name)}</h3>" + table(report.tables[key])
                     for name, key in per_round if key in report.tables)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join([
        f"<h1>{_e(title)}</h1>",
        f"<p>Generated {generated} by coevolve-engine drift/report. Every table is a view or query: "
        "see <code>coevolve-engine drift --sql</code>.</p>",
        "".join(f'<p class="note">{_e(n)}</p>' for n in notes),
        _section("Configuration", "configuration", _configuration(store)),
        _section("Rounds", "rounds", table(report.summary, "no rounds") + tables),
        _section("Figures", "figures", _figures([report])),
        _section("Top failure patterns", "patterns", _patterns(store, top_patterns, examples)),
        _section("Candidates", "candidates", _candidates(store, candidates)),
    ])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n")


def build_report(store: Store, params=None, *, title: str, label: str = "run", embedder=None,
                 notes: Iterable[str] = (), **options) -> str:
    """Compute the drift report of ``store`` and render the page."""
    report = compute_drift(store, params, label=label, embedder=embedder)
    return render_report(store, report, title=title, notes=notes, **options)
