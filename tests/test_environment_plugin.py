"""An environment from another package: examples/counter-env, pip-installed, found through its entry points
(coevolve_engine.environments and coevolve_engine.synthesizers) by the registries that hold the built-ins, and a
round of `synthesize` (its own offline synthesizer, picked from the tasks' environment with no option) and
`validate` (its episodes replay the reference solutions) run on its tasks with no change to the engine.

The package is installed with pip into a folder of the test's own (``--target``), so the test's environment is left
as it was: the first command runs as a subprocess with that folder on PYTHONPATH, as a user's shell runs it; the
others in this process with the folder on sys.path (the registries read the entry points again, and forget them
after the test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "counter-env"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """PYTHONPATH holding the installed example package (its dist-info with the entry points)."""
    folder = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(EXAMPLE, folder / "counter-env")  # pip builds in the tree: a copy, not the repo's
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(folder / "site"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((folder / "site").glob("coevolve_counter_env-*.dist-info/entry_points.txt"))
    return str(folder / "site")


@pytest.fixture
def on_path(installed, monkeypatch):
    """The installed package importable here, and the registries reading their entry points again."""
    from coevolve_engine.adapters.environments import ENVIRONMENTS
    from coevolve_engine.synthesis.candidates import SYNTHESIZERS

    monkeypatch.syspath_prepend(installed)
    saved = [(registry, dict(registry._entries), registry._entry_points_read)
             for registry in (ENVIRONMENTS, SYNTHESIZERS)]
    for registry, _, _ in saved:
        registry._entry_points_read = False
    yield
    for registry, entries, read in saved:
        registry._entries, registry._entry_points_read = entries, read
    sys.modules.pop("coevolve_counter_env", None)


def invoke(*args):
    from click.testing import CliRunner

    from coevolve_engine.cli import cli

    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


def engine(site, *args, check=True):
    env = {**os.environ, "PYTHONPATH": site, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "coevolve_engine.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_round_of_synthesis_and_validation_on_a_plugin_environment(installed, on_path, tmp_path):
    db = str(tmp_path / "counter.duckdb")
    imported = engine(installed, "tasks", "import", "counter", "--db", db, "--create")
    assert "6" in imported.stdout   # the package's load_tasks, through the registry
    # one step of rollouts: every group half solved (boundary), so there are failure patterns to synthesize for
    rollouts = tmp_path / "rollouts.jsonl"
    with rollouts.open("w") as out:
        for i in range(1, 7):
            for k in range(4):
                out.write(json.dumps({"task_id": f"counter-{i:03d}", "step": 1, "group_id": f"c{i}@1",
                                      "reward": float(k % 2), "actions": [{"name": "increment", "arguments": {}}]})
                          + "\n")
    invoke("ingest", "trajectories", str(rollouts), "--db", db)
    invoke("patterns", "--step", "1", "--db", db)
    proposed = invoke("synthesize", "--max-candidates", "4", "--db", db)
    assert "offline:counter proposed 4 candidates" in proposed.stdout, proposed.stdout
    invoke("validate", "--novelty-threshold", "0.999", "--no-progress", "--db", db)
    verdicts = invoke("query", "SELECT verdict, reason, env FROM candidates ORDER BY candidate_id",
                      "--db", db, "--format", "json")
    rows = json.loads(verdicts.stdout)
    assert len(rows) == 4 and {r["env"] for r in rows} == {"counter"}
    assert {r["verdict"] for r in rows} == {"accepted"}, rows   # each reference solution replayed and scored 1
    tasks = invoke("query", "SELECT count(*) AS n FROM tasks WHERE source = 'synthesized'", "--db", db,
                   "--format", "json")
    assert json.loads(tasks.stdout) == [{"n": 4}]


def test_plugins_lists_what_the_package_registers_with_its_package(installed):
    rows = json.loads(engine(installed, "plugins", "--format", "json").stdout)
    theirs = {(r["kind"], r["name"]): r for r in rows if r["package"] == "coevolve-counter-env"}
    assert set(theirs) == {("environment", "counter"), ("synthesizer", "offline:counter")}
    assert all(r["ready"] for r in theirs.values()), theirs
    assert theirs[("environment", "counter")]["target"] == "coevolve_counter_env:CounterEnvironment"
    table = engine(installed, "plugins", "--kind", "environment").stdout
    assert "| counter " in table and "coevolve-counter-env" in table


def test_an_unknown_environment_names_the_contract_and_the_docs(tmp_path):
    from coevolve_engine.adapters.environments import ENVIRONMENTS
    from coevolve_engine.core.registry import RegistryError

    with pytest.raises(RegistryError) as raised:
        ENVIRONMENTS.load("shop")
    message = str(raised.value)
    assert "unknown environment 'shop'" in message and "coevolve_engine.core.environment.Environment" in message
    assert "coevolve_engine.environments" in message and "docs/environments.md" in message
    assert (EXAMPLE.parent.parent / "docs" / "environments.md").is_file()


def test_without_a_synthesizer_the_tasks_own_environment_is_asked(tmp_path):
    from click.testing import CliRunner

    from coevolve_engine.cli import cli
    from coevolve_engine.core.store import Store

    db = tmp_path / "shop.duckdb"
    with Store(db) as store:
        store.add_records("tasks", [{"task_id": "t1", "env": "shop", "prompt": "buy"}])
        store.add_records("trajectories", [{"task_id": "t1", "step": 0, "group_id": "g", "reward": r,
                                             "trajectory_id": f"t1#{i}"} for i, r in enumerate((0.0, 1.0))])
        store.execute("INSERT INTO failure_patterns (pattern_id, round, step, cluster, size, dominant_signal, "
                      "signal_counts, representative_trajectory) VALUES ('p', 0, 0, 0, 2, 'boundary', "
                      "'{\"boundary\": 2}', 't1#0')")
        store.execute("INSERT INTO pattern_members (pattern_id, trajectory_id, signals) VALUES "
                      "('p', 't1#0', ['boundary']), ('p', 't1#1', ['boundary'])")
    result = CliRunner().invoke(cli, ["synthesize", "--db", str(db)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "environment 'shop', which registers no offline synthesizer (offline:shop" in result.output
    assert "docs/environments.md" in result.output and "install bfcl-eval" not in result.output


def test_a_missing_package_is_named_once_with_what_to_install(tmp_path, monkeypatch):
    from coevolve_engine.core.registry import Registry, RegistryError

    (tmp_path / "needs_extra.py").write_text(
        "raise ImportError(\"the shop environment needs shoplib: pip install 'shop[all]'\")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry("environment")
    registry.register("shop", "needs_extra:Shop", install_hint="pip install 'shop[all]'")
    registry.register("gone", "no_such_module_anywhere:Gone", install_hint="pip install gone")
    with pytest.raises(RegistryError) as raised:
        registry.load("shop")
    assert str(raised.value).count("pip install") == 1, raised.value
    with pytest.raises(RegistryError) as raised:
        registry.load("gone")
    assert str(raised.value).count("pip install gone") == 1 and "no_such_module_anywhere" in str(raised.value)
