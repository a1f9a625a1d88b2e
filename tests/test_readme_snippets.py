"""README.md's Python snippets run as written: the quickstart's sampler snippet is run by tests/test_quickstart.py
on the store its commands build; the trl-grpo snippet of "Plugging a trainer" runs here after the shell line
before it, in a fresh process, with only `path/to/policy` pointed at a tiny policy built for calc's tasks."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


def blocks(section: str) -> dict[str, list[str]]:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    body = text[start:text.index("\n## ", start + 1)]
    found: dict[str, list[str]] = {}
    for language, code in re.findall(r"```(\w*)\n(.*?)```", body, re.S):
        found.setdefault(language, []).append(code)
    return found


def test_every_python_snippet_of_the_readme_is_run_by_a_test():
    text = README.read_text(encoding="utf-8")
    assert len(re.findall(r"^```python$", text, re.M)) == 2   # a new one needs a test that runs it
    assert len(blocks("Your own rollouts: a quickstart")["python"]) == 1   # tests/test_quickstart.py runs it
    assert len(blocks("Plugging a trainer")["python"]) == 1   # the test below runs it


def test_the_trl_grpo_snippet_runs_as_written(tmp_path, monkeypatch):
    pytest.importorskip("trl")
    from coevolve_engine.adapters.environments.calc import CalcEnvironment
    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3

    found = blocks("Plugging a trainer")
    monkeypatch.chdir(tmp_path)
    (command,) = [shlex.split(line) for line in found["bash"][0].splitlines() if line.strip()]
    assert command[0] == "coevolve-engine"
    result = CliRunner().invoke(cli, command[1:])
    assert result.exit_code == 0, result.output

    tasks = list(CalcEnvironment().load_tasks(n=8))
    corpus = [t["prompt"] for t in tasks] * 4 + ['<tool_call>\n{"name": "add", "arguments": {"n": 1}}\n</tool_call>']
    policy = build_tiny_qwen3(tmp_path / "policy", corpus, hidden_size=32, vocab_size=300, digits=True)
    code = found["python"][0]
    assert code.count('"path/to/policy"') == 1
    Path("snippet.py").write_text(code.replace('"path/to/policy"', json.dumps(str(policy)))
                                  + "print(report.steps, report.groups, report.rollouts, report.checkpoint)\n")
    done = subprocess.run([sys.executable, "snippet.py"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    steps, groups, rollouts, checkpoint = done.stdout.split()[-4:]
    assert (steps, groups, rollouts) == ("2", "4", "16") and Path(checkpoint).is_dir()
    with Store("calc.duckdb", read_only=True) as store:
        written = store.execute("SELECT step, count(*) FROM trajectories GROUP BY step ORDER BY step").fetchall()
        drawn = {t for (t,) in store.execute("SELECT DISTINCT task_id FROM trajectories").fetchall()}
    assert written == [(1, 8), (2, 8)] and drawn == {"calc/seed-0-0000", "calc/seed-0-0001"}
