"""An environment of one's own, end to end from the docs alone: the commands of docs/environments.md's "A complete
example" block, run as written, from `pip install -e ./examples/counter-env` to two rounds of `run` whose config
(examples/counter-env/run.toml) names `env = "counter"` and has no [synthesis] section.

The commands run in a folder laid out as the repository's root (a copy of examples/counter-env and of the recipe),
in a new virtual environment that sees this test's packages (the engine and its extras) but installs the example
into its own site-packages, so this test's environment is left as it was: `pip` is this interpreter's pip aimed at
the new one (`--python`, offline: no index, no build isolation), `coevolve-engine` and `python` its interpreter.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

for _module in ("torch", "trl", "sentence_transformers"):
    pytest.importorskip(_module)

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "environments.md"


def documented_commands() -> list[str]:
    """The commands of the bash block under "## A complete example" in docs/environments.md."""
    section = DOC.read_text(encoding="utf-8").split("## A complete example\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "docs/environments.md: no bash block under '## A complete example'"
    return [line for line in block.group(1).splitlines() if line.strip()]


def as_run(command: str, python: Path) -> list[str]:
    """The documented command as this test runs it in the new environment."""
    words = shlex.split(command)
    if words[:2] == ["pip", "install"]:
        return [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                "--no-build-isolation", *words[2:]]
    if words[0] == "coevolve-engine":
        return [str(python), "-m", "coevolve_engine.cli", *words[1:]]
    if words[0] == "python":
        return [str(python), *words[1:]]
    raise AssertionError(f"docs/environments.md: the test cannot run {command!r} (pip, coevolve-engine or python)")


@pytest.fixture(scope="module")
def documented_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("counter-root")
    shutil.copytree(REPO / "examples" / "counter-env", root / "examples" / "counter-env",
                    ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    (root / "recipes").mkdir()
    shutil.copy(REPO / "recipes" / "build_tiny_policy.py", root / "recipes")
    venv = tmp_path_factory.mktemp("counter-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    (own,) = json.loads(subprocess.run([str(python), "-c", "import json, site; print(json.dumps(site.getsitepackages()))"],
                                       capture_output=True, text=True, check=True).stdout)
    dirs = [d for d in site.getsitepackages() if Path(d).is_dir()]
    Path(own, "zz_coevolve_test.pth").write_text(  # this test's packages, their .pth files read
        "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in dirs) + "\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1")
    outputs = {}
    for command in documented_commands():
        done = subprocess.run(as_run(command, python), cwd=root, env=env, capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        outputs[command] = done.stdout
    return root, python, env, outputs


def test_the_documented_commands_install_the_example_and_run_two_rounds(documented_run):
    root, _, _, outputs = documented_run
    commands = list(outputs)
    assert commands[0].startswith("pip install -e ./examples/counter-env")
    assert commands[-1].startswith("coevolve-engine run --config examples/counter-env/run.toml")
    config = tomllib.loads((root / "examples" / "counter-env" / "run.toml").read_text())
    assert config["env"] == "counter" and "synthesis" not in config
    listed = next(out for command, out in outputs.items() if command.startswith("coevolve-engine plugins"))
    assert re.search(r"\| environment +\| counter +\| coevolve-counter-env +\| yes", listed), listed
    assert re.search(r"\| synthesizer +\| offline:counter +\| coevolve-counter-env +\| yes", listed), listed
    ran = outputs[commands[-1]]
    assert "2 of 2 rounds finished" in ran, ran
    assert "offline:bfcl" not in ran and "coevolve-engine[bfcl]" not in ran, ran  # nothing asked of BFCL


def test_the_run_synthesized_with_the_environments_own_synthesizer(documented_run):
    root, python, env, _ = documented_run
    done = subprocess.run([str(python), "-m", "coevolve_engine.cli", "query", "--db", "counter.duckdb", "--format",
                           "json", "SELECT round, phase, status FROM run_phases ORDER BY round, started_at"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    phases = json.loads(done.stdout)
    assert {(r["round"], r["phase"]) for r in phases} >= {(0, "synthesize"), (1, "synthesize"), (1, "validate")}
    assert {r["status"] for r in phases} == {"finished"}
    done = subprocess.run([str(python), "-m", "coevolve_engine.cli", "query", "--db", "counter.duckdb", "--format",
                           "json", "SELECT DISTINCT synthesizer, env FROM candidates"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert json.loads(done.stdout) == [{"synthesizer": "offline:counter", "env": "counter"}], done.stdout
    printed = subprocess.run([str(python), "-m", "coevolve_engine.cli", "run", "--config",
                              "examples/counter-env/run.toml", "--print-config"],
                             cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert 'synthesizer = "offline:counter"' in printed.stdout, printed.stdout[-2000:]
