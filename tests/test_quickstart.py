"""README's quickstart for one's own rollouts runs as written: its example record ingests, each command of its
shell block runs in order (rollouts.jsonl is the bundled sample, dumps/ a verl dump of the exported tasks, the
trainer's part), and its Python snippet draws the weighted batch that `sample` draws."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from coevolve_engine.cli import cli

REPO = Path(__file__).resolve().parent.parent
TITLE = "## Your own rollouts: a quickstart"


def quickstart() -> dict[str, list[str]]:
    """The section's fenced blocks by language."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(TITLE)
    assert start < text.index("## The demo"), "the quickstart comes before the demo, near the top"
    section = text[start:text.index("\n## ", start + 1)]
    blocks: dict[str, list[str]] = {}
    for language, body in re.findall(r"```(\w*)\n(.*?)```", section, re.S):
        blocks.setdefault(language, []).append(body)
    return blocks


def run(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, f"{shlex.join(args)}\n{result.output}"
    return result.output


def test_the_quickstart_runs_as_written(tmp_path, monkeypatch):
    blocks = quickstart()
    monkeypatch.chdir(tmp_path)
    (record,) = [json.loads(line) for line in blocks["json"][0].splitlines()]
    Path("one.jsonl").write_text(json.dumps(record) + "\n")
    run(["ingest", "trajectories", "one.jsonl", "--create-tasks", "--create", "--db", "record.duckdb"])

    Path("rollouts.jsonl").write_bytes((REPO / "engine" / "data" / "sample_trajectories.jsonl").read_bytes())
    commands = [shlex.split(line) for line in blocks["bash"][0].splitlines() if line.strip()]
    assert [c[1] for c in commands] == ["ingest", "signals", "query", "weights", "sample", "export",
                                        "import-rollouts", "drift", "report"]
    outputs = {}
    for command in commands:
        if command[1] == "import-rollouts":   # the trainer's part: it trained on exported/ and dumped rollouts
            ids = sorted({json.loads(line)["task_id"] for line in Path("rollouts.jsonl").open()})
            Path("dumps").mkdir()
            Path("dumps/1.jsonl").write_text("".join(
                json.dumps({"input": f"user\\n{t}\\nassistant\\n", "output": f"done #{k}", "gts": t,
                            "score": float(k % 2), "step": 1}) + "\n" for t in ids for k in range(4)))
        outputs[command[1]] = run(command[1:])
    assert "boundary" in outputs["signals"] and "files-0" in outputs["query"]
    assert Path("exported/train.parquet").is_file() and Path("report.html").is_file()
    assert "step 7 " in outputs["drift"] and "step 101 " in outputs["drift"]   # windows of the steps with data
    assert "steps 8-" not in outputs["drift"] and "step 100 " not in outputs["drift"]
    the_report_spans_the_gap_without_a_line("mine.duckdb", Path("report.html").read_text(encoding="utf-8"))

    Path("snippet.py").write_text(blocks["python"][0] + "print(batch)\n")
    done = subprocess.run([sys.executable, "snippet.py"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    batch = ast.literal_eval(done.stdout)
    sampled = [line.split("|")[2].strip() for line in outputs["sample"].splitlines()
               if re.match(r"\| \d+ ", line)]
    assert batch == sampled and len(batch) == 32


def the_report_spans_the_gap_without_a_line(db: str, page: str) -> None:
    """Steps 0-7 ingested and step 101 imported: the headline compares the same tasks at both ends, and no line
    of a figure against step joins step 7 to step 101."""
    import math

    import pytest

    pytest.importorskip("matplotlib")
    from coevolve_engine.drift import DriftParams, compute_drift, open_for_reading
    from coevolve_engine.drift.plots import _DRAW, figure_sets

    head = page[page.index('id="headline"'):page.index("<figure")]
    assert "on the 12 tasks scored both in the first window (step 0) and in the last (step 101)" in head
    with open_for_reading(db) as opened:
        report = compute_drift(opened.store, DriftParams(diversity=False))
    drawn = [name for names in figure_sets([report]) for name in names]
    assert {"success", "signals_steps", "group_health"} <= set(drawn)
    for name in ("success", "signals_steps", "group_health"):
        figure = _DRAW[name]([report])
        for line in (line for ax in figure.axes for line in ax.get_lines()):
            xs = [float(x) for x in line.get_xdata()]
            joined = [(a, b) for a, b in zip(xs, xs[1:]) if not math.isnan(a) and not math.isnan(b)]
            assert joined and all(b - a == 1 for a, b in joined), (name, xs)
