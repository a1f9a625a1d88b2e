"""One vocabulary across commands: every option spelled one way means one thing (issue 17).

The walk covers every command and subcommand; a new command that gives --format, -k or the output-file option
a second meaning fails here.
"""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli
from coevolve_engine.cli.output import OUTPUT_FORMATS
from coevolve_engine.core.sqlfiles import catalog


def walk(command: click.Command, path: tuple[str, ...] = ()):
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from walk(sub, (*path, name))
    else:
        yield " ".join(path), command


COMMANDS = list(walk(cli))


def visible(command: click.Command):
    return [p for p in command.params if isinstance(p, click.Option) and not p.hidden]


def test_the_walk_sees_every_command():
    names = {name for name, _ in COMMANDS}
    assert {"query", "report", "export", "ingest", "validate", "sample", "rollout", "drift", "demo",
            "tasks import"} <= names


@pytest.mark.parametrize("name,command", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_one_meaning_per_spelling(name: str, command: click.Command):
    for option in visible(command):
        spellings = set(option.opts) | set(option.secondary_opts)
        if "--format" in spellings:  # an output format, never a data layout
            assert isinstance(option.type, click.Choice), f"{name} --format must be a choice of output formats"
            assert set(option.type.choices) <= set(OUTPUT_FORMATS), f"{name} --format is not an output format"
        if "-k" in spellings:  # rollouts per task (a group), everywhere
            assert "--group-size" in spellings, f"{name}: -k means rollouts per task (--group-size) only"
        if "-o" in spellings or "--output" in spellings:  # the output file (or folder), always -o/--output
            assert {"-o", "--output"} <= spellings, f"{name}: the output option is -o/--output"
        for spelling in spellings:
            assert spelling not in ("--out", "--k", "--json"), f"{name} still shows the old spelling {spelling}"
            assert not spelling.startswith("--out") or spelling == "--output", f"{name}: {spelling}"


@pytest.mark.parametrize("name,command", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_endpoint_options_are_the_shared_ones(name: str, command: click.Command):
    from coevolve_engine.cli.options import endpoint_options

    shared = {p.name: p for p in endpoint_options(click.command()(lambda **_: None)).params}
    mine = {p.name: p for p in visible(command)}
    if "api_base" in mine or "api_key" in mine:
        for key, option in shared.items():
            assert key in mine, f"{name} declares an endpoint option but not --{key.replace('_', '-')}"
            assert mine[key].opts == option.opts and mine[key].help == option.help, \
                f"{name} declares --{key.replace('_', '-')} itself instead of sharing endpoint_options"


def test_query_help_lists_what_the_sql_files_define():
    result = CliRunner().invoke(cli, ["query", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    entries = catalog()
    assert sum(e.kind == "table" for e in entries) >= 14
    assert sum(e.kind != "table" for e in entries) >= 50
    for entry in entries:
        assert entry.name in result.output, f"query --help does not name {entry.kind} {entry.name}"


@pytest.fixture
def sample_db(tmp_path):
    db = tmp_path / "s.duckdb"
    result = CliRunner().invoke(cli, ["init", "--sample", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


def test_old_spellings_still_work_and_say_so(sample_db, tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["signals", "--json", "--db", str(sample_db)])
    assert result.exit_code == 0, result.output
    assert "deprecated: --json is now --format json" in result.stderr
    assert json.loads(result.stdout)["totals"]["tasks"] == 12
    same = runner.invoke(cli, ["signals", "--format", "json", "--db", str(sample_db)])
    assert json.loads(same.stdout) == json.loads(result.stdout) and not same.stderr

    both = runner.invoke(cli, ["signals", "--json", "--format", "table", "--db", str(sample_db)])
    assert both.exit_code == 2 and "old spelling of --format" in both.output

    out = tmp_path / "r.html"
    result = runner.invoke(cli, ["report", "--no-diversity", "--out", str(out), "--db", str(sample_db)])
    assert result.exit_code == 0, result.output
    assert "deprecated: --out is now --output" in result.stderr and out.exists()


def test_export_takes_a_layout(sample_db, tmp_path):
    runner = CliRunner()
    runner.invoke(cli, ["weights", "--db", str(sample_db)])
    new = runner.invoke(cli, ["export", "--round", "0", "--layout", "openrlhf", "-o", str(tmp_path / "a"),
                              "--uniform", "--db", str(sample_db)])
    assert new.exit_code == 0, new.output
    old = runner.invoke(cli, ["export", "--round", "0", "--format", "openrlhf", "--out", str(tmp_path / "b"),
                              "--uniform", "--db", str(sample_db)])
    assert old.exit_code == 0, old.output
    assert "deprecated: --format is now --layout" in old.stderr
    assert (tmp_path / "a" / "train.jsonl").read_bytes() == (tmp_path / "b" / "train.jsonl").read_bytes()
    missing = runner.invoke(cli, ["export", "--round", "0", "-o", str(tmp_path / "c"), "--db", str(sample_db)])
    assert missing.exit_code == 2 and "--layout" in missing.output
