"""A store of one's own rollouts (ingested, never `run`): drift and report read it over training steps, and the
report leads with what the signals found there, by name.

The rollouts are made up with planted cases: 16 tasks over steps 0-11 in groups of 4; two tasks solved until
step 6 and failed from step 7 (forgetting), two with half of every group solved (boundary), and two action
patterns taken by three rollouts each (rare, below 5% of 768); every other group all solved or all failed.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.models.embeddings import Embedder

pytest.importorskip("matplotlib")

FORGOTTEN, BOUNDARY = ("shop-003", "shop-007"), ("shop-011", "shop-012")
RARE_ACTIONS = {"search>refund_all": ["search", "refund_all"], "cancel_order": ["cancel_order"] * 3}
RARE = tuple(RARE_ACTIONS)   # as action_pattern writes them (a repeated call once)
USUAL = ["search", "add_to_cart", "checkout"]


def made_up_rollouts(folder):
    tasks = [{"task_id": f"shop-{i:03d}", "env": "shop", "prompt": f"Buy item number {i} in the shop."}
             for i in range(1, 17)]
    records, rare_left = [], [actions for actions in RARE_ACTIONS.values() for _ in range(3)]
    for step in range(12):
        for i, task in enumerate(tasks, start=1):
            task_id = task["task_id"]
            for k in range(4):
                if task_id in FORGOTTEN:
                    reward = 1.0 if step <= 6 else 0.0
                elif task_id in BOUNDARY:
                    reward = float(k % 2)
                else:
                    reward = 1.0 if step >= i % 6 else 0.0   # learned at some step, never forgotten
                actions = USUAL if reward else USUAL[:2]
                if not reward and task_id not in BOUNDARY and rare_left and step == 0:
                    actions = rare_left.pop()
                records.append({"task_id": task_id, "step": step, "group_id": f"{task_id}@{step}",
                                "reward": reward, "actions": [{"name": n, "arguments": {}} for n in actions]})
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (folder / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder / "tasks.jsonl", folder / "rollouts.jsonl"


@pytest.fixture(scope="module")
def own_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("own")
    tasks, rollouts = made_up_rollouts(folder)
    db = folder / "shop.duckdb"
    for command in (["ingest", "tasks", str(tasks), "--create"], ["ingest", "trajectories", str(rollouts)]):
        result = CliRunner().invoke(cli, [*command, "--db", str(db)])
        assert result.exit_code == 0, result.output
    return db


@pytest.fixture
def embedded(monkeypatch):
    """How many texts the embedding model encoded."""
    counted = []
    encode = Embedder._encode

    def counting(self, texts):
        counted.append(len(texts))
        return encode(self, texts)

    monkeypatch.setattr(Embedder, "_encode", counting)
    return counted


def test_drift_shows_the_planted_cases_over_steps(own_store):
    result = CliRunner().invoke(cli, ["drift", "--db", str(own_store), "--no-diversity"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120   # in blocks of columns that fit
    header = [c.strip() for line in lines if line.startswith("| metric ") for c in line.strip("|").split("|")[1:]]
    assert header == [f"step {i}" for i in range(12)]   # one column per step, no round
    cells = [c.strip() for line in lines if line.startswith("| forgetting ") for c in line.strip("|").split("|")[1:]]
    assert cells[7] != "0" and set(cells[:7]) == {"0"}   # the drop at step 7, nothing before
    found = {}
    for name in ("forgetting_tasks", "boundary_tasks", "rare_patterns"):
        result = CliRunner().invoke(cli, ["drift", "--db", str(own_store), "--no-diversity", "--table", name,
                                          "--format", "json"])
        found[name] = json.loads(result.stdout)
    assert [r["task_id"] for r in found["forgetting_tasks"]] == list(FORGOTTEN)
    assert found["forgetting_tasks"][0]["first_step"] == 7
    assert [r["task_id"] for r in found["boundary_tasks"]] == list(BOUNDARY)
    assert sorted(r["action_pattern"] for r in found["rare_patterns"]) == sorted(RARE)


def test_report_leads_with_the_planted_cases_and_embeds_once(own_store, tmp_path, embedded):
    from test_report import DATA_IMAGE, chromium, run_chromium

    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", "--db", str(own_store), "-o", str(out), "--neighbours", "2"])
    assert result.exit_code == 0, result.output
    assert sum(embedded) == 16   # every prompt, once
    page = out.read_text(encoding="utf-8")
    # the figures with something to draw, and none of a run's (held-out success, task set growth, acceptance,
    # weights, failure patterns), which would be empty here, nor the diversity of one task set (one value)
    assert list(dict(DATA_IMAGE.findall(page))) == ["signals_steps", "success", "task_drift", "group_health"]
    head = page[page.index('id="headline"'):page.index('id="figures"')]
    assert "12 steps" in head and "768 rollouts of 16 tasks" in head and "0 rounds" not in head
    assert all(html.escape(name) in head for name in FORGOTTEN + BOUNDARY + RARE)

    again = tmp_path / "again.html"   # the store is read-only to report: the vectors come from the cache folder
    result = CliRunner().invoke(cli, ["report", "--db", str(own_store), "-o", str(again), "--neighbours", "2"])
    assert result.exit_code == 0 and sum(embedded) == 16, result.output

    if chromium() is None:
        pytest.skip("no Chromium for the first-screen check (apt-get install chromium)")
    probe = """<script>window.addEventListener('load', () => {
      const seen = [...document.querySelectorAll('code')].filter(c => c.getBoundingClientRect().bottom <= innerHeight);
      const out = document.createElement('pre'); out.id = 'probe';
      out.textContent = JSON.stringify({height: innerHeight, names: seen.map(c => c.textContent)});
      document.body.appendChild(out); });</script>"""
    shot = tmp_path / "first_screen.png"   # kept with the test's files: what a user sees first
    _, requests = run_chromium(out, tmp_path, f"--screenshot={shot}", "--window-size=1280,800", "--hide-scrollbars")
    assert requests == [] and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    probed = tmp_path / "first_screen.html"
    probed.write_text(page.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
                      .replace("</body>", probe + "</body>"), encoding="utf-8")
    dom, _ = run_chromium(probed, tmp_path, "--dump-dom", "--window-size=1280,800")
    found = json.loads(html.unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom).group(1)))
    assert found["height"] <= 800 and set(FORGOTTEN + BOUNDARY + RARE) <= set(found["names"]), found
