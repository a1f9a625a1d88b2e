"""The fault matrix, resumes and the check before a round: what `run` may remove when it redoes a phase, and
what a value that no round can use must never do to a store.

- A redone train phase removes the rollouts its interrupted attempt wrote, and only those: rows another command
  put at the round's steps stay.
- A value the round would refuse (a seed out of range, a trl_args key TRL's config rejects, a launcher that is
  not there, a negative temperature) is refused before anything is written, naming the --set; the store is as it
  was, and the corrected command runs.
- The weak cases of the configuration: a strategy typo beside its settings, a plugin option's bad value given
  by --set, a TOML file that starts with a UTF-8 byte order mark.
"""

from __future__ import annotations

import codecs
import time
from pathlib import Path

import pytest

from coevolve_engine.core.store import Store
from test_store_safety import calc_store, invoke, table_hashes  # noqa: F401 (calc_store is a fixture)

pytest.importorskip("torch")
pytest.importorskip("trl")

#: one round of two GRPO steps of one group of two rollouts on calc, no feedback, no evaluation: the cheapest
#: real round
CONFIG = """\
env = "calc"
rounds = 1
seed = 0
[trainer]
model = "{policy}"
steps_per_round = 2
output_dir = "{checkpoints}"
[trainer.options]
group_size = 2
groups_per_step = 1
learning_rate = 1e-3
max_completion_length = 96
[episode]
max_new_tokens = 8
max_model_calls_per_turn = 2
max_steps = 3
[synthesis]
synthesizer = "none"
[eval]
every = 0
"""


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    """A tiny random Qwen3 policy whose tokenizer knows calc's words."""
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3

    tasks = load_environment("calc").load_tasks(split="seed", n=12)
    corpus = [t["prompt"] for t in tasks] * 4 + ['<tool_call>\n{"name": "add", "arguments": {"n": 1}}\n</tool_call>']
    return build_tiny_qwen3(tmp_path_factory.mktemp("resume") / "policy", corpus, hidden_size=32, vocab_size=300,
                            digits=True)


@pytest.fixture
def run_toml(tmp_path, policy) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(CONFIG.format(policy=policy, checkpoints=tmp_path / "checkpoints"))
    return path


def rows(db: Path, sql: str) -> list[tuple]:
    with Store(db, read_only=True) as store:
        return store.execute(sql).fetchall()


# -- a redone phase removes only what its interrupted attempt wrote ---------------------------------------------------

def interrupt_round_0_train(db: Path, config_path: Path) -> None:
    """The store a run killed -9 inside round 0's train phase leaves, built by the run's own code: the weights
    phase finished, the train phase started (its first step recorded) and one GRPO group written by the
    phase's store sink."""
    from coevolve_engine.core.rollout import Rollout
    from coevolve_engine.core.sink import StoreSink
    from coevolve_engine.loop import RunLoop, load_config, training

    loop = RunLoop(db, load_config(config_path))
    loop.ledger.start(0, "weights")
    loop.ledger.finish(0, "weights", {}, time.perf_counter(), training.weights)
    loop.ledger.start(0, "train")
    policy, first, removed = training._start_round(loop.context, 0)
    assert (first, removed) == (1, 0)
    task = rows(db, "SELECT min(task_id) FROM tasks")[0][0]
    sink = StoreSink(db, label="run round 0 train")  # as the train phase names its writes
    sink.write_group([Rollout(task_id=task, policy="policy@1", sample_index=k) for k in range(2)], step=1,
                     group_id="r0-s1-g0")


def test_a_resumed_train_phase_removes_only_the_rollouts_its_interrupted_attempt_wrote(calc_store, run_toml, jsonl):
    interrupt_round_0_train(calc_store, run_toml)
    assert rows(calc_store, "SELECT count(*) FROM trajectories WHERE step = 1") == [(2,)]
    task = rows(calc_store, "SELECT max(task_id) FROM tasks")[0][0]
    mine = jsonl([{"trajectory_id": f"user-{step}", "task_id": task, "step": step, "reward": 1.0}
                  for step in (1, 2, 3)], name="mine.jsonl")  # at the round's steps 1 and 2, and after them
    ingested = invoke("ingest", "trajectories", mine, "--db", calc_store)
    assert ingested.exit_code == 0 and "3 added" in ingested.output, ingested.output
    users = "SELECT * EXCLUDE (ingest_id) FROM trajectories WHERE trajectory_id LIKE 'user-%' ORDER BY ALL"
    before = rows(calc_store, users)

    result = invoke("run", "--config", run_toml, "--db", calc_store)
    assert result.exit_code == 0, result.output
    assert "removed 2 rollouts of the interrupted attempt" in result.output
    assert rows(calc_store, users) == before  # the user's rows, all three, as they were
    assert rows(calc_store, "SELECT path, added FROM ingests WHERE path LIKE '%mine.jsonl'") == [(str(mine), 3)]
    assert rows(calc_store, "SELECT count(*) FROM trajectories WHERE trajectory_id LIKE 'r0-s1-g0#%'") == [(0,)]
    # the redone attempt's own rollouts, at the round's steps, each write named by the round's train phase
    assert rows(calc_store, "SELECT step, count(*) FROM trajectories JOIN ingests USING (ingest_id) WHERE "
                            "starts_with(path, 'run round 0 train ') GROUP BY step ORDER BY step") == [(1, 2), (2, 2)]
    assert rows(calc_store, "SELECT phase, status, attempts FROM run_phases ORDER BY started_at") == [
        ("weights", "finished", 1), ("train", "finished", 2)]


def test_the_patterns_phase_keeps_patterns_another_command_stored_for_its_round(calc_store, run_toml):
    """The phase's patterns land with its 'finished' mark, so an interrupted attempt leaves none: patterns the
    round has when the phase commits were stored by `coevolve-engine patterns`, and stay (as a weight set stored
    by hand does)."""
    from coevolve_engine.loop import RunLoop, load_config
    from coevolve_engine.loop.feedback import describe_patterns, patterns

    interrupt_round_0_train(calc_store, run_toml)
    with Store(calc_store) as store:  # what `coevolve-engine patterns --round 0` stores
        store.execute("INSERT INTO failure_patterns (pattern_id, round, step, cluster, size, dominant_signal, "
                      "signal_counts) VALUES ('0-0', 0, 2, 0, 3, 'boundary', '{\"boundary\": 3}')")
    stored = rows(calc_store, "SELECT * FROM failure_patterns")
    loop = RunLoop(calc_store, load_config(run_toml, ["synthesis.synthesizer=offline:calc"]))
    loop.ledger.start(0, "patterns")
    outputs, _ = loop.ledger.finish(0, "patterns", {}, time.perf_counter(), patterns)
    assert rows(calc_store, "SELECT * FROM failure_patterns") == stored
    assert describe_patterns(outputs) == "kept the 1 stored patterns of the round (sizes [3])"


# -- a value no round can use is refused before the round writes -------------------------------------------------

@pytest.mark.parametrize("override, words", [
    ("seed=99999999999999999999999", "--set seed=99999999999999999999999: seed must be an integer in [-2^63, "
                                      "2^63 - 1]"),
    ("trainer.options.trl_args={bogus_arg = 1}", "--set trainer.options.trl_args={bogus_arg = 1}: trainer.options: "
                                                 "trainer trl-grpo: trl_args: bogus_arg is not a field of TRL's "
                                                 "GRPOConfig"),
    ("trainer.launcher=no-such-launcher --num_processes 2", "trainer.launcher: 'no-such-launcher' is not an "
                                                            "executable file nor a command on PATH"),
    ("trainer.options.temperature=-1.0", "--set trainer.options.temperature=-1.0: trainer.options: trainer "
                                         "trl-grpo: temperature must be > 0"),
    ("trainer.options.max_steps=5", "trainer.options: set max_steps under [episode]"),
    ("rounds=99999999999", "--set rounds=99999999999: rounds must be at most 10,000"),
    ("synthesis.max_candidates=99999999999", "synthesis.max_candidates must be at most 10,000, got 99,999,999,999"),
    ("validation.attempts=99999999999", "validation.attempts must be at most 4,096"),
])
def test_a_value_the_round_would_refuse_is_refused_before_it_writes(calc_store, run_toml, override, words):
    before = table_hashes(calc_store)
    result = invoke("run", "--config", run_toml, "--set", override, "--db", calc_store)
    assert result.exit_code == 1 and words in result.output, result.output
    assert table_hashes(calc_store) == before


def test_after_a_refused_value_the_corrected_command_runs(calc_store, run_toml):
    before = table_hashes(calc_store)
    for override in ("seed=99999999999999999999999", "trainer.options.trl_args={bogus_arg = 1}",
                     "trainer.launcher=no-such-launcher", "trainer.options.temperature=-1.0"):
        assert invoke("run", "--config", run_toml, "--set", override, "--db", calc_store).exit_code == 1
    assert table_hashes(calc_store) == before
    result = invoke("run", "--config", run_toml, "--db", calc_store)  # no "started with a different configuration"
    assert result.exit_code == 0, result.output
    assert rows(calc_store, "SELECT round, status FROM rounds") == [(0, "finished")]


# -- the weak cases of the configuration -----------------------------------------------------------------------

def test_a_strategy_typo_beside_its_settings_is_named_as_a_strategy_typo(calc_store, tmp_path):
    before = table_hashes(calc_store)
    result = invoke("run", "--set", "env=calc", "--set", f"trainer.model={tmp_path}", "--set",
                    "curriculum.strategy=coevolv", "--set", "curriculum.settings.forgetting=2", "--db", calc_store)
    assert result.exit_code == 1, result.output
    assert "curriculum.strategy: unknown curriculum strategy 'coevolv'; known: " in result.output
    assert "coevolve" in result.output.split("known: ")[1] and "uniform" in result.output.split("known: ")[1]
    assert "curriculum.settings" not in result.output
    assert table_hashes(calc_store) == before


def test_a_bad_plugin_option_given_by_set_names_the_set(calc_store, run_toml):
    before = table_hashes(calc_store)
    result = invoke("run", "--config", run_toml, "--set", "trainer.options.learning_rate=abc", "--db", calc_store)
    assert result.exit_code == 1, result.output
    assert ("--set trainer.options.learning_rate=abc: trainer.options: trainer trl-grpo: option learning_rate must "
            "be a number, got 'abc'") in result.output
    assert table_hashes(calc_store) == before


def test_a_config_file_with_a_utf8_byte_order_mark_is_read(tmp_path, calc_store):
    config = tmp_path / "run.toml"
    config.write_bytes(codecs.BOM_UTF8 + b'env = "calc"\nrounds = 3\n[trainer]\nmodel = "m"\n')
    result = invoke("run", "--config", config, "--print-config", "--db", calc_store)
    assert result.exit_code == 0, result.output
    assert 'env = "calc"' in result.output and "rounds = 3" in result.output
    broken = tmp_path / "broken.toml"
    broken.write_bytes(codecs.BOM_UTF8 + b'env = "calc"\n# caf\xe9\n')
    result = invoke("run", "--config", broken, "--db", calc_store)
    assert result.exit_code == 1 and f"{broken}, line 2: not UTF-8 text (byte 0xe9 at offset 21)" in result.output
