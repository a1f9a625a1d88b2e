"""A report on one's own rollouts names what was planted in them, on its first screen.

The rollouts: 100 tasks over steps 0-11 in groups of 8; 10 tasks solved (95%) until step 5 and forgotten (5%)
from step 6 on, 20 tasks hovering at 50% (their group means cross the threshold often, a little each time), one
action pattern taken by 3 rollouts only (rare), the other 70 tasks always solved or always failed.

The first screen is the page up to its first chart: the headline and what the signals found. It must name at
least 8 of the 10 forgotten tasks (ranked by what they lost, not by how often they crossed the threshold) and the
rare pattern, and the page draws no chart of data the store does not have (no held-out evaluations, rounds, weight
sets, failure patterns or candidates; a task set that never changes).
"""

from __future__ import annotations

import html
import json
import random
import re

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli

pytest.importorskip("matplotlib")

TASKS, STEPS, GROUP = 100, 12, 8
FORGOTTEN = tuple(f"shop-{i:03d}" for i in range(10))
HOVERING = tuple(f"shop-{i:03d}" for i in range(10, 30))
RARE = "search>refund_all"
DATA_IMAGE = re.compile(r'<img id="figure-(\w+)"')


def planted_rollouts() -> list[dict]:
    draw = random.Random(7)
    records = []
    for step in range(STEPS):
        for i in range(TASKS):
            task_id = f"shop-{i:03d}"
            for k in range(GROUP):
                if task_id in FORGOTTEN:
                    solved = draw.random() < (0.95 if step < 6 else 0.05)
                elif task_id in HOVERING:
                    solved = draw.random() < 0.5
                else:
                    solved = i % 2 == 0
                actions = ["search", "add_to_cart", "checkout"] if solved else ["search", "add_to_cart"]
                if task_id == "shop-050" and step == 3 and k < 3:
                    actions = RARE.split(">")
                records.append({"task_id": task_id, "step": step, "group_id": f"{task_id}@{step}",
                                "reward": float(solved), "actions": [{"name": n, "arguments": {}} for n in actions]})
    return records


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    tasks = [{"task_id": f"shop-{i:03d}", "env": "shop", "prompt": f"Buy item number {i} in the shop."}
             for i in range(TASKS)]
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (folder / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in planted_rollouts()))
    db, page = folder / "shop.duckdb", folder / "report.html"
    for command in (["ingest", "tasks", str(folder / "tasks.jsonl"), "--create"],
                    ["ingest", "trajectories", str(folder / "rollouts.jsonl")],
                    ["report", "-o", str(page)]):
        result = CliRunner().invoke(cli, [*command, "--db", str(db)])
        assert result.exit_code == 0, result.output
    return db, page.read_text(encoding="utf-8")


def first_screen(page: str) -> str:
    """The headline and the first tables, up to the first chart."""
    return page[page.index('id="headline"'):page.index("<figure")]


def test_the_first_screen_names_the_forgotten_tasks_and_the_rare_pattern(planted):
    _, page = planted
    screen = html.unescape(re.sub(r"<[^>]+>", " ", first_screen(page)))
    named = [task for task in FORGOTTEN if task in screen]
    assert len(named) >= 8, screen
    assert not any(task in screen.split("Boundary:")[0] for task in HOVERING), screen   # not among the forgetting
    assert RARE in screen
    # the headline compares one task set at both ends, and says so
    assert "on the 100 tasks scored both in the first window (step 0) and in the last (step 11)" in screen


def test_forgetting_is_ranked_by_what_was_lost(planted):
    db, _ = planted
    result = CliRunner().invoke(cli, ["drift", "--db", str(db), "--no-diversity", "--table", "forgetting_tasks",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    ranked = json.loads(result.stdout)
    assert {r["task_id"] for r in ranked[:10]} == set(FORGOTTEN)
    assert all(r["step"] == 6 and r["level_before"] > 0.8 and r["level_after"] < 0.2 for r in ranked[:10])
    crossings = {r["task_id"]: r["forgetting_events"] for r in ranked}
    assert max(crossings[t] for t in HOVERING if t in crossings) > max(crossings[t] for t in FORGOTTEN)


def test_no_chart_of_data_the_store_does_not_have(planted):
    _, page = planted
    # no held-out evaluation, round, weight set, failure pattern or candidate; one task set, the same prompts in
    # every window (their diversity is one value): only what the steps hold
    assert DATA_IMAGE.findall(page) == ["signals_steps", "success", "task_drift", "group_health"]


def test_one_weight_set_draws_no_distribution_and_two_name_their_rows(planted, tmp_path):
    db, _ = planted
    copy = tmp_path / "weighted.duckdb"
    copy.write_bytes(db.read_bytes())
    page = tmp_path / "weighted.html"
    for command in (["weights", "--strategy", "coevolve"], ["report", "-o", str(page), "--no-diversity"]):
        result = CliRunner().invoke(cli, [*command, "--db", str(copy)])
        assert result.exit_code == 0, result.output
    # one weight set: a Jensen-Shannon chart would be one point at 0, a growth chart one bar
    assert DATA_IMAGE.findall(page.read_text(encoding="utf-8")) == [
        "signals_steps", "success", "task_drift", "group_health"]

    from coevolve_engine.drift import DriftParams, compute_drift, open_for_reading
    from coevolve_engine.drift.plots import distribution, drawable

    result = CliRunner().invoke(cli, ["weights", "--strategy", "uniform", "--db", str(copy)])
    assert result.exit_code == 0, result.output
    with open_for_reading(copy) as opened:
        report = compute_drift(opened.store, DriftParams(diversity=False))
    assert drawable("distribution", [report])
    heat = distribution([report]).axes[0]
    rows = [label.get_text() for label in heat.get_yticklabels()]
    assert len(rows) == 30 and all(row.startswith("shop-") for row in rows)   # task ids, the 30 that moved most
