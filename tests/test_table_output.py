"""Every table the CLI prints reads as people read numbers (seconds and percentages with one decimal, rates with
the precision the data has) and fits 120 columns, in blocks of columns that each repeat the first."""

from __future__ import annotations

import polars as pl

from coevolve_engine.cli.output import render_table
from test_store_safety import invoke


def cells(text: str, column: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    names = [c.strip() for c in lines[0].strip("|").split("|")]
    return [[c.strip() for c in line.strip("|").split("|")][names.index(column)] for line in lines[2:]]


def test_numbers_as_people_read_them():
    frame = pl.DataFrame({"round": [0, 1], "training_seconds": [12.9, 100.04], "feedback_%": [157.2, 7.46],
                          "success_rate": [0.3475, 1 / 3], "mean_reward": [1.0, 0.25]})
    text = render_table(frame)
    assert cells(text, "training_seconds") == ["12.9", "100.0"] and cells(text, "feedback_%") == ["157.2", "7.5"]
    assert cells(text, "success_rate") == ["0.3475", "0.3333"] and cells(text, "mean_reward") == ["1", "0.25"]


def test_a_wide_table_is_printed_in_blocks_that_fit():
    frame = pl.DataFrame({"task_id": ["a", "b"], **{f"column_{i:02d}": [i * 1.5, 2.0] for i in range(20)}})
    text = render_table(frame)
    assert max(len(line) for line in text.splitlines()) <= 120
    blocks = text.split("\n\n")
    assert len(blocks) > 1 and all(block.startswith("| task_id ") for block in blocks)
    shown = [name.strip() for block in blocks for name in block.splitlines()[0].strip("|").split("|")[1:]]
    assert shown == [f"column_{i:02d}" for i in range(20)]   # every column, once, in order


def test_signals_prints_the_scores_it_has(tmp_path):
    db = tmp_path / "s.duckdb"
    assert invoke("init", "--sample", "--db", db).exit_code == 0
    result = invoke("signals", "--db", db)
    tables = [line for line in result.output.splitlines() if line.startswith("|")]
    assert result.exit_code == 0 and tables and max(len(line) for line in tables) <= 120
    assert "0.8125" in result.output and "0.813" not in result.output.replace("0.8125", "")


def test_jsonl_wherever_json_is_offered(tmp_path):
    import json

    db = tmp_path / "s.duckdb"
    assert invoke("init", "--sample", "--db", db).exit_code == 0
    query = invoke("query", "select task_id from tasks order by task_id limit 2", "--format", "jsonl", "--db", db)
    assert [json.loads(line) for line in query.output.splitlines()] == [{"task_id": "files-001"},
                                                                        {"task_id": "files-002"}]
    drift = invoke("drift", "--table", "boundary_tasks", "--format", "jsonl", "--no-diversity", "--db", db)
    rows = [json.loads(line) for line in drift.stdout.splitlines()]
    assert rows and all("mixed_groups" in row for row in rows)
