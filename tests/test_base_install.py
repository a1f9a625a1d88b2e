"""`pip install .` alone, no extra, in a new virtual environment: the CLI starts and the README's "A first query"
block runs as written, every command exiting 0; the commands of the later blocks that need an extra say which.

The package is built from a copy of the source tree (pip builds in the tree it is given), with pip's own
configuration (its index and cache): nothing of this test's environment is visible to the new one.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: what the build does not need (and what building or testing leaves in a working tree)
LEFT_OUT = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                  "tests", "bench", "docs", "examples", "recipes", "*.duckdb", "*.duckdb.wal")


def readme_block(heading: str) -> list[str]:
    """The commands of the first ```bash block under the README's ``## heading``."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"README.md: no bash block under '## {heading}'"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory) -> Path:
    """A new virtual environment with `pip install .` done in it, and nothing else."""
    folder = tmp_path_factory.mktemp("base-install")
    source = shutil.copytree(REPO, folder / "coevolve-engine", ignore=LEFT_OUT)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return venv


def shell(venv: Path, command: str, cwd: Path) -> subprocess.CompletedProcess:
    """``command`` as a user's shell runs it with the virtual environment activated."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv), HF_HUB_OFFLINE="1")
    return subprocess.run(shlex.split(command), cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_base_install_has_no_extra(base_venv):
    listed = shell(base_venv, "python -m pip list --format freeze", base_venv).stdout.lower()
    for extra_package in ("torch", "transformers", "jinja2", "trl", "litellm", "matplotlib", "sentence-transformers"):
        assert f"\n{extra_package}==" not in f"\n{listed}", f"{extra_package} came with `pip install .`"


def test_the_readme_first_query_runs_on_the_base_install(base_venv, tmp_path):
    commands = readme_block("A first query")
    assert commands[0] == "coevolve-engine init --sample" and len(commands) >= 3
    for command in commands:
        done = shell(base_venv, command, tmp_path)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, f"{command}\n{done.stderr[-3000:]}"
    assert "files-" in done.stdout or "trajectories" in done.stdout  # the queries answered with rows


def test_on_the_base_install_a_command_that_needs_an_extra_names_it(base_venv, tmp_path):
    assert shell(base_venv, "coevolve-engine init --sample", tmp_path).returncode == 0
    assert shell(base_venv, "coevolve-engine weights --strategy coevolve", tmp_path).returncode == 0
    quickstart = "\n".join(readme_block("Your own rollouts: a quickstart"))
    for command, extra in (("coevolve-engine sample -b 8 -k 4 --seed 0", "local"),
                           ("coevolve-engine report -o report.html", "report")):
        done = shell(base_venv, command, tmp_path)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert f"coevolve-engine[{extra}]" in done.stderr, done.stderr[-3000:]
        assert command.split()[1] in quickstart  # the README block that shows the command ...
    trainers = shell(base_venv, "coevolve-engine plugins --kind trainer", tmp_path)
    assert trainers.returncode == 0 and "| trl-grpo " in trainers.stdout, trainers.stdout + trainers.stderr
    assert "trainer 'trl-grpo' needs a package that is not installed" in trainers.stdout
    head = (REPO / "README.md").read_text(encoding="utf-8").split("## Your own rollouts: a quickstart\n")[1]
    head = head.split("```bash", 1)[0]
    for extra in ("local", "report"):  # ... names the extra before it
        assert f"`[{extra}]`" in head, f"the quickstart does not name the [{extra}] extra at its top"
    assert "pip install 'coevolve-engine[local,report]'" in head
