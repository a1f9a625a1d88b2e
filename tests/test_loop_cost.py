"""The loop's cost is one figure with one label: the terminal's "Loop cost" line after `run`, the report's
headline, and the demo's figures in the docs (docs/run.md) say the same thing for the same run."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.loop.summary import loop_cost
from coevolve_engine.display.loop_cost import LABEL
from coevolve_engine.core.store import Store
from test_views import phase

REPO = Path(__file__).resolve().parent.parent


def test_terminal_and_report_give_the_same_loop_cost(tmp_path):
    db = tmp_path / "run.duckdb"
    with Store(db) as store:   # two finished rounds of a run, as `run` records them, and one still training
        store.add_records("tasks", [{"task_id": "a"}])
        store.add_records("trajectories", [{"task_id": "a", "step": s, "reward": 1.0} for s in (1, 2)])
        store.execute("INSERT INTO rounds (round, status, first_step) VALUES (0, 'finished', 1), "
                      "(1, 'finished', 2), (2, 'running', 3)")
        phase(store, 0, "train", 0, 20, 20.0, store_seconds=0.5)
        phase(store, 0, "signals", 20, 21, 0.9)
        phase(store, 0, "eval", 21, 23, 2.0)
        phase(store, 1, "train", 23, 33, 10.0, store_seconds=0.5)
        phase(store, 1, "signals", 33, 34, 0.5)
        phase(store, 2, "train", 34, None, None)
        terminal = loop_cost(store)
    figure = re.search(r"over 2 rounds: (\+\d+\.\d%)", terminal).group(1)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(out), "--no-diversity"])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    head = page[page.index('id="headline"'):page.index('id="figures"')]
    last_card = head.split('<div class="number">')[-1]
    card = re.search(r'<div class="what">([^<]*)</div><div class="value">([^<]*)</div>', last_card).groups()
    assert card == (LABEL.replace("'", "&#x27;"), figure), (card, terminal)
    assert f"{LABEL.replace(chr(39), '&#x27;')}: {figure}" in head   # and in the headline's sentence
    # round 0: 23 s span, training 20 - 0.5 (store writes) = 19.5 s, feedback 3.5 s; round 1: 11 s, 9.5 s, 1.5 s
    assert figure == "+17.2%"   # 5.0 s / 29.0 s; the running round 2 does not count


def test_the_docs_quote_one_loop_cost_for_the_demo():
    text = "\n".join(page.read_text(encoding="utf-8") for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")])
    printed = re.findall(r"Loop cost: feedback [\d.]+ s against training [\d.]+ s over \d+ rounds: (\+[\d.]+%)", text)
    quoted = re.findall(r"The loop's cost: feedback against training \(`feedback_%`[^)]*\) is (\+[\d.]+%)", text)
    assert printed and quoted and set(printed) == set(quoted), (printed, quoted)
    assert LABEL in text
