"""The documentation stays true to the code: docs/cli.md is what the commands' own --help prints today, every
command is documented by name, the README stays short, every link between the pages leads somewhere, and no page
or docstring sends the reader to a file outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from coevolve_engine.cli import cli, docs

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
CLI_PAGE = REPO / "docs" / "cli.md"


def test_the_cli_reference_is_what_the_commands_print():
    committed = CLI_PAGE.read_text(encoding="utf-8") if CLI_PAGE.is_file() else ""
    assert committed == docs.render(), f"docs/cli.md is stale: regenerate it with `{docs.REGENERATE}`"


@pytest.mark.parametrize("path", [(), *(path for path, _ in docs.commands())], ids=" ".join)
def test_each_section_is_what_help_prints_on_a_wide_terminal(path):
    printed = CliRunner().invoke(cli, [*path, "--help"], prog_name=docs.PROGRAM, terminal_width=docs.TERMINAL)
    assert printed.exit_code == 0, printed.output
    assert docs.help_text(path) == "\n".join(line.rstrip() for line in printed.output.splitlines()).strip() + "\n"


def test_the_reference_renders_the_same_on_any_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    narrow = docs.render()
    monkeypatch.setenv("COLUMNS", "250")
    assert docs.render() == narrow


def test_the_reference_has_every_visible_command_and_no_hidden_one():
    page = CLI_PAGE.read_text(encoding="utf-8")
    headings = set(re.findall(r"^#{2,4} (coevolve-engine.*)$", page, re.M))
    expected = {" ".join(("coevolve-engine", *path)) for path, _ in docs.commands()}
    assert headings == expected | {"coevolve-engine"}
    assert {"coevolve-engine ingest", "coevolve-engine tasks import", "coevolve-engine run"} <= headings
    hidden_shown, hidden = [], 0
    for path, command in docs.commands():
        section = docs.help_text(path)
        visible = {o for param in command.params if not getattr(param, "hidden", False)
                   for o in (*param.opts, *param.secondary_opts)}
        for param in command.params:
            if getattr(param, "hidden", False):
                hidden += 1
                hidden_shown += [f"{' '.join(path)} {o}" for o in param.opts if o not in visible
                                 and re.search(rf"^\s+(-\w, )?{re.escape(o)}\b", section, re.M)]
    assert hidden, "the CLI keeps the previous release's spellings as hidden options"
    assert not hidden_shown, hidden_shown


@pytest.mark.parametrize("words", [" ".join(("coevolve-engine", *path)) for path, _ in docs.commands()])
def test_every_command_is_documented_by_name_outside_the_generated_reference(words):
    prose = "\n".join(page.read_text(encoding="utf-8") for page in PAGES if page != CLI_PAGE)
    assert re.search(rf"{re.escape(words)}(?![\w-])", prose), (
        f"`{words}` appears in no page but the generated docs/cli.md: say in README.md or docs/*.md what it is for")


def test_the_readme_is_short_and_keeps_its_glossary_last():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings[0] == "Set up on a fresh machine" and headings[-1] == "Glossary"


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {anchor(heading) for heading in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def links(page: Path) -> list[tuple[str, str]]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return re.findall(r"\]\(([^)\s:]*?)(?:#([^)\s]+))?\)", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_link_between_pages_leads_to_a_file_and_a_heading(page):
    for target, fragment in links(page):
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name} links to {target}, which does not exist"
        if fragment and path.suffix == ".md":
            assert fragment in anchors(path), f"{page.name} links to {target}#{fragment}: no such heading"


#: a design or planning file that lives beside the repository, not in it, or an absolute path of one machine
OUTSIDE = re.compile(r"\S*(?:\b(?:DESIGN|STYLE|FACTS)\.md|\bshared/[A-Za-z]\S*|/work/\S+|/home/\w+/\S+)")


def test_nothing_cites_a_file_outside_the_repository():
    cited = []
    sources = [*PAGES, *(REPO / "recipes").glob("*"),
               *(p for folder in ("engine", "adapters", "trainers", "tests", "bench", "sql")
                 for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".md", ".sql", ".toml"))]
    for path in sources:
        if path.is_file() and path != Path(__file__):
            text = path.read_text(encoding="utf-8", errors="replace")
            cited += [f"{path.relative_to(REPO)}: {m}" for m in OUTSIDE.findall(text)]
    assert not cited, cited
    for name in ("architecture.md", "store.md", "run.md", "trainers.md", "bfcl.md", "benchmarks.md"):
        assert (REPO / "docs" / name).is_file(), f"docs/{name} is missing"


def test_the_pages_state_the_episode_step_cap_eval_has():
    """`eval --max-steps` defaults to MAX_STEPS (0: no cap, as BFCL); a page that quotes a default quotes that one."""
    from coevolve_engine.adapters.agents.rules import MAX_STEPS

    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for number in re.findall(r"at most `--max-steps` (\d+)", text):
            assert int(number) == MAX_STEPS, f"{page.name}: at most `--max-steps` {number}; the default: {MAX_STEPS}"
    run_page = (REPO / "docs" / "run.md").read_text(encoding="utf-8")
    assert ("no cap on its environment steps by default" in run_page) == (MAX_STEPS == 0)
