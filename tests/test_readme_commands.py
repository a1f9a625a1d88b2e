"""Every shell command README.md and docs/*.md print names a command, options and a script that exist; the ones
that run in seconds run.

Which text is a command:

- in a fenced block (```bash, ```sh, ```text or unlabelled), a line (joined with the next while it ends in a
  backslash) is cut at `&&`, `;` and `|`; each piece that starts with `coevolve-engine`,
  `.venv/bin/coevolve-engine`, `python bench/` or `python3 bench/` is a command, and the words after a `#` or a
  redirection (`>`, `<`) are not part of it. In a command overview (lines of two columns), the text
  after two or more spaces, and the indented lines under a command, describe it;
- in prose, inline code that starts with one of those words, cut the same way (a mention such as
  `coevolve-engine query` names a command without its arguments: a missing argument is allowed there, and only
  there).

Placeholders, one rule for every line: `[x]` is x (an optional part is checked as if given); a trailing `...`
(repeat it) is dropped; a word `a|b` is checked once per alternative; a word in capitals (FILE, DIR, N, MODEL,
NAME=VALUE) is a value: the first choice of its option where the option has choices, else `1` (`1=1`); the word
`COMMAND` stands for every command of the CLI.

Parsing: a `coevolve-engine` command goes through click's own parser (``make_context`` on
``coevolve_engine.cli:cli``, down through every group), so an unknown command, an unknown option, a wrong value
type or a missing argument fails; `--help` ends parsing, as it does on the command line. Files a command reads
are looked for when it runs, not when it is parsed. A `python bench/X.py` command names a file in bench/ whose
``build_parser()`` accepts the arguments.

Which commands run for real (on a scratch store made by `coevolve-engine init --sample`, in a scratch folder):
those whose command is in ``RUNS`` (commands that read or write the store alone: no model, environment,
trainer or network), that contain no placeholder, and that name no file but the store (`--db` is pointed at
the scratch store; one naming another file, such as `--compare` or `--read`, is parsed only). A command fed by
`echo "..." |` gets the echoed text on its input; a `sample` command, on a store with weights (`weights --strategy
coevolve` first). Each must exit 0 with no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PREFIXES = ("coevolve-engine", ".venv/bin/coevolve-engine", "python bench/", "python3 bench/")
#: Commands that read or write the store alone, run for real when they name no placeholder and no other file.
RUNS = {"init", "query", "signals", "migrations", "candidates", "weights", "sample", "drift", "report"}
#: Options whose value is a file other than the store: a command giving one is parsed, not run.
OTHER_FILES = {"--compare", "--read"}


@dataclass(frozen=True)
class Command:
    source: str  # file:line
    words: tuple[str, ...]  # after the program: the arguments (a placeholder in capitals is filled when parsed)
    program: str  # "coevolve-engine" or "bench/X.py"
    placeholder: bool  # a placeholder was substituted
    mention: bool  # inline code in prose: a missing argument is allowed
    stdin: str | None = None  # the text an `echo "..." |` before it feeds it

    def __str__(self) -> str:
        return f"{self.source}: {self.program} {shlex.join(self.words)}"


# --- collecting -------------------------------------------------------------------------------------------

FENCE = re.compile(r"^```(\w*)\s*$")
INLINE = re.compile(r"`([^`]+)`")
CAPITALS = re.compile(r"^[A-Z][A-Z0-9_]*$")
ALTERNATIVE = "\x00"


def blocks_and_prose(text: str) -> tuple[list[tuple[int, str, str]], list[tuple[int, str]]]:
    """(line number, line, fence label) of the shell-like fenced blocks, and (line number, inline code) of the
    prose."""
    block_lines, inline = [], []
    fence = None
    prose: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line.strip())
        if match:
            fence = None if fence is not None else match.group(1)
            continue
        if fence is None:
            prose.append((number, line))
        elif fence in ("", "bash", "sh", "text"):
            block_lines.append((number, line, fence))
    # inline code may wrap across lines of a paragraph
    joined = "\n".join(line for _, line in prose)
    starts = [number for number, _ in prose]
    offsets, at = [], 0
    for _, line in prose:
        offsets.append(at)
        at += len(line) + 1
    for match in INLINE.finditer(joined):
        index = max(i for i, offset in enumerate(offsets) if offset <= match.start())
        inline.append((starts[index], " ".join(match.group(1).split())))
    return block_lines, inline


def joined_lines(lines: list[tuple[int, str, str]]) -> list[tuple[int, str, str, bool]]:
    """Lines with their continuations joined: (first line number, text, fence label, indented)."""
    out, pending, first = [], "", None
    for number, line, fence in lines:
        if first is None:
            first, indented = number, line[:1].isspace()
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((first, pending + line, fence, indented))
        pending, first = "", None
    return out


def pieces(text: str) -> list[tuple[str, str | None]]:
    """The commands of one shell line: (command text, stdin text of an `echo "..." |` before it)."""
    text = re.sub(r"(?<=\S)\|(?=\S)", ALTERNATIVE, text)  # a|b is one word (alternatives), not a pipe
    text = text.replace("\\$", "$")  # bash reads \$ as $, in double quotes too (shlex keeps the backslash there)
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:
        return []
    found, current, stdin = [], [], None
    for word in words + [";"]:
        if word in (";", "&&", "|", "||"):
            if current:
                found.append((current, stdin))
            stdin = " ".join(current[1:]) + "\n" if word == "|" and current[:1] == ["echo"] else None
            current = []
            continue
        current.append(word)
    commands = []
    for words, stdin in found:
        cut = next((i for i, w in enumerate(words) if set(w) <= set("<>") or re.fullmatch(r"\d?>+", w)), len(words))
        commands.append((shlex.join(w.replace(ALTERNATIVE, "|") for w in words[:cut]), stdin))
    return commands


def expand(words: list[str]) -> tuple[list[list[str]], bool]:
    """The placeholder rule: the argument lists one command's words stand for, and whether any was a placeholder."""
    placeholder = False
    out: list[str] = []
    for word in words:
        bare = word.removesuffix("...").strip("[]").removesuffix("...")
        if not bare:
            continue
        if bare != word:
            placeholder = True
        value = bare
        if CAPITALS.match(value):  # a value: filled in by ``fill`` once its option is known
            placeholder = True
        elif all(CAPITALS.match(part) for part in value.split("=")):  # NAME=VALUE
            value, placeholder = "1=1", True
        out.append(value)
    variants = max((len(w.split("|")) for w in out if not w.startswith(("select", "SELECT"))), default=1)
    lists = []
    for i in range(variants):
        lists.append([w if " " in w else w.split("|")[min(i, len(w.split("|")) - 1)] for w in out])
    placeholder = placeholder or variants > 1
    if "COMMAND" in out:
        lists = [[c if w == "COMMAND" else w for w in words] for words in lists for c in sorted(cli.commands)]
        placeholder = True
    return lists, placeholder


def collect(path: Path) -> list[Command]:
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(REPO).as_posix()
    block_lines, inline = blocks_and_prose(text)
    candidates = []
    for number, line, fence, indented in joined_lines(block_lines):
        if indented:
            continue
        line = line.strip()
        if fence in ("text", ""):  # an overview line: the command, then its description after 2+ spaces
            line = re.split(r"\s{2,}(?=[a-z(])", line, maxsplit=1)[0]
        candidates.extend((number, piece, stdin, False) for piece, stdin in pieces(line))
    for number, code in inline:
        if code.startswith(PREFIXES):
            candidates.extend((number, piece, stdin, True) for piece, stdin in pieces(code))
    commands = []
    for number, piece, stdin, mention in candidates:
        if not piece.startswith(PREFIXES):
            continue
        words = shlex.split(piece)
        if words[0].endswith("coevolve-engine"):
            program, args = "coevolve-engine", words[1:]
        else:
            program, args = words[1], words[2:]
        for variant in (expanded := expand(args))[0]:
            commands.append(Command(f"{name}:{number}", tuple(variant), program, expanded[1], mention, stdin))
    return commands


COMMANDS = [command for doc in DOCS for command in collect(doc)]


# --- checking ---------------------------------------------------------------------------------------------

def fill(args: list[str], choices_of, leaf: bool) -> list[str]:
    """The placeholder values (words in capitals) replaced: after an option with choices, its first choice; any
    other, ``1`` (left for the subcommand to fill while ``leaf`` is false)."""
    out = []
    for i, word in enumerate(args):
        if CAPITALS.match(word) and word != "COMMAND":
            choices = choices_of(args[i - 1]) if i else None
            if choices:
                word = str(choices[0])
            elif leaf or choices is not None:
                word = "1"
        out.append(word)
    return out


def click_choices(command: click.Command):
    """option -> its choices (a list), [] for an option without choices, None for a word that is no option."""
    options = {name: param for param in command.params for name in (*param.opts, *param.secondary_opts)}

    def choices_of(word: str):
        if word not in options or options[word].is_flag:
            return None
        return list(getattr(options[word].type, "choices", None) or [])
    return choices_of


@contextlib.contextmanager
def inputs_not_looked_for(command: click.Command):
    """The command's path options parsed without looking for the files: they exist where the command is run."""
    types = [param.type for param in command.params if isinstance(param.type, click.Path) and param.type.exists]
    for kind in types:
        kind.exists = False
    try:
        yield
    finally:
        for kind in types:
            kind.exists = True


def parse_cli(words: tuple[str, ...], mention: bool) -> list[str]:
    """Parse with click down to the last subcommand; the names of the commands reached."""
    with contextlib.redirect_stdout(io.StringIO()):  # what --help prints
        return _parse_cli(words, mention)


def _parse_cli(words: tuple[str, ...], mention: bool) -> list[str]:
    names = []
    try:
        context = cli.make_context("coevolve-engine", fill(list(words), click_choices(cli), False))
        command = cli
        while isinstance(command, click.Group):
            rest = [*context._protected_args, *context.args] if hasattr(context, "_protected_args") \
                else [*context.protected_args, *context.args]
            if not rest:
                break
            name, command, args = command.resolve_command(context, rest)
            names.append(name)
            args = fill(args, click_choices(command), not isinstance(command, click.Group))
            with inputs_not_looked_for(command):
                context = command.make_context(name, args, parent=context)
    except click.exceptions.Exit as stop:  # --help, --version
        assert stop.exit_code == 0
    except click.MissingParameter:
        if not mention:
            raise
    return names


def bench_parser(script: str) -> argparse.ArgumentParser:
    path = REPO / script
    assert path.is_file(), f"{script} does not exist"
    sys.path.insert(0, str(path.parent))  # a script imports its neighbours, as when it is run
    try:
        spec = importlib.util.spec_from_file_location(f"readme_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as an import does: a dataclass looks its module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    assert hasattr(module, "build_parser"), f"{script} has no build_parser()"
    return module.build_parser()


def test_the_docs_print_commands():
    programs = {command.program for command in COMMANDS}
    assert len(COMMANDS) > 50 and "coevolve-engine" in programs and "bench/signals_bench.py" in programs


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_each_printed_command_parses(command):
    if command.program == "coevolve-engine":
        parse_cli(command.words, command.mention)
    else:
        parser = bench_parser(command.program)
        actions = parser._option_string_actions
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
                parser.parse_args(fill(list(command.words), lambda word: list(actions[word].choices or [])
                                       if word in actions and actions[word].nargs != 0 else None, True))
        except SystemExit as stop:
            assert stop.code == 0, f"{command}: argparse refused it: {said.getvalue().strip()}"


def runs_for_real(command: Command) -> bool:
    return (command.program == "coevolve-engine" and not command.placeholder and not command.mention
            and bool(command.words) and command.words[0] in RUNS and "--help" not in command.words
            and not OTHER_FILES & set(command.words))


def scratch_args(words: tuple[str, ...], db: Path) -> list[str]:
    """The command's words with --db pointed at the scratch store (added when the command gives none)."""
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "--db":
            skip = True
            continue
        out.append(word)
    return [*out, "--db", str(db)]


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("readme-sample") / "coevolve.duckdb"
    result = CliRunner().invoke(cli, ["init", "--sample", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture
def scratch(sample_store, tmp_path) -> tuple[Path, Path]:
    """A scratch folder with its own copy of the sample store: every command runs as if alone."""
    shutil.copy(sample_store, tmp_path / "coevolve.duckdb")
    return tmp_path, tmp_path / "coevolve.duckdb"


REAL = [command for command in COMMANDS if runs_for_real(command)]


def test_some_commands_run_for_real():
    assert {command.words[0] for command in REAL} >= {"init", "query", "signals", "weights", "drift"}


@pytest.mark.parametrize("command", REAL, ids=str)
def test_each_quick_command_runs(command, scratch, monkeypatch):
    folder, db = scratch
    monkeypatch.chdir(folder)
    if command.words[0] == "sample":  # a batch is drawn from weights, which the README always computes first
        assert CliRunner().invoke(cli, ["weights", "--strategy", "coevolve", "--db", str(db)]).exit_code == 0
    result = CliRunner().invoke(cli, scratch_args(command.words, db), input=command.stdin)
    assert "Traceback" not in result.output
    assert result.exit_code == 0, f"{command}\n{result.output}"
