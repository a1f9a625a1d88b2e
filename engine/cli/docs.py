"""The CLI reference, docs/cli.md, generated from the commands themselves.

    python -m coevolve_engine.cli.docs > docs/cli.md

walks the command tree from ``coevolve_engine.cli:cli`` and renders each visible command's ``--help`` as click
prints it, at a fixed width so the page is the same on every terminal. Hidden commands are left out, and so are
hidden options (the previous release's spellings), as ``--help`` leaves them out. ``tests/test_docs.py`` fails
when the committed page differs from what this prints.
"""

from __future__ import annotations

import sys

import click

from coevolve_engine.cli import cli

PROGRAM = "coevolve-engine"
#: the CLI's own max_content_width: the page reads as a terminal of 100 columns or more shows it (click keeps
#: two columns free, so such a terminal wraps at 98)
WIDTH = 100
TERMINAL = WIDTH - 2
REGENERATE = "python -m coevolve_engine.cli.docs > docs/cli.md"
#: What every command shares, written once here and printed above the commands.
INTRO = """\
Shell completion of commands, options and choices (click's own): for bash add `eval
"$(_COEVOLVE_ENGINE_COMPLETE=bash_source coevolve-engine)"` to `~/.bashrc`; for zsh `zsh_source` in `~/.zshrc`;
for fish `_COEVOLVE_ENGINE_COMPLETE=fish_source coevolve-engine | source` in
`~/.config/fish/completions/coevolve-engine.fish`.

The options mean the same thing everywhere: `--format` is an output format (table, json, jsonl, csv, parquet),
`--layout` a data layout to read or write (verl, openrlhf, jsonl, ...), `-o/--output` the file or folder
written, `-k/--group-size` the rollouts per task (a GRPO group), and `--api-base`, `--api-key`, `--timeout`,
`--retries` reach a model on every command that calls one. Numbers are checked when a command starts, against
what the store and the libraries underneath can hold: a `--round` is at most 2,147,483,647 (the store's round
column), a `--step` at most 2^53 - 1 (a trajectory's), a `--seed` in [0, 2^32 - 1], `rollout -k` at most 4096,
`--timeout` at most 86400 s, `--retries` at most 100 (the wait between tries doubles from 1 s up to a minute),
`run`/`demo --rounds` at most 10,000, a `sample` batch (`--groups-per-step` x `-k`) at most 10,000,000 rows and a
`bootstrap` at most 30,000 worlds. The spellings of the previous release (`--json`, `--out`, `export --format`,
`validate -k`, `drift --k`, `sample --tasks`) still work and say what to write instead.
"""


def commands(group: click.Group = cli, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every visible command under ``group``, depth first, in name order: (its words after the program, it)."""
    found = []
    context = click.Context(group, info_name=PROGRAM)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is None or command.hidden:
            continue
        found.append(((*path, name), command))
        if isinstance(command, click.Group):
            found.extend(commands(command, (*path, name)))
    return found


def help_text(path: tuple[str, ...]) -> str:
    """``coevolve-engine PATH --help`` as printed on a terminal of WIDTH columns."""
    settings = {**cli.context_settings, "terminal_width": TERMINAL, "max_content_width": WIDTH}
    context = click.Context(cli, info_name=PROGRAM, **settings)  # as the command line builds it: -h, --help
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.get_command(context, name)
        settings = {**command.context_settings, "terminal_width": TERMINAL, "max_content_width": WIDTH}
        context = click.Context(command, info_name=name, parent=context, **settings)
    text = command.get_help(context)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n") + "\n"  # as editors save it


def render() -> str:
    """The whole page."""
    entries = commands()
    lines = [
        "# Command reference",
        "",
        f"Generated from the commands' own `--help` by `{REGENERATE}`; do not edit it by hand "
        "(`tests/test_docs.py` fails when it is stale). `coevolve-engine COMMAND --help` prints the same text.",
        "",
        f"- [{PROGRAM}](#{PROGRAM})",
    ]
    for path, command in entries:
        words = " ".join((PROGRAM, *path))
        indent = "  " * len(path)
        lines.append(f"{indent}- [{words}](#{words.replace(' ', '-')}): {command.get_short_help_str(limit=200)}")
    lines += ["", INTRO.rstrip("\n")]
    for path in [(), *(path for path, _ in entries)]:
        lines += ["", f"{'#' * min(2 + len(path) - (1 if path else 0), 4)} {' '.join((PROGRAM, *path))}", "",
                  "```text", help_text(path).rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
