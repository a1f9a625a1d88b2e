"""`coevolve-engine run` end to end on CPU: a tiny local policy, three BFCL tasks, the offline synthesizer.

The store starts as a user's would: three multi_turn_base tasks and reference rollouts of them at step 0
(`coevolve-engine rollout --model reference`). The run warms the random policy up by SFT on those rollouts
(so it solves the tasks some of the time and GRPO has something to learn from), then does two rounds.

One run goes straight through; another is killed with SIGKILL at every phase boundary of round 0 and in the
middle of four phases, and resumed each time. Both must end in the same store.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("bfcl_eval")

from click.testing import CliRunner  # noqa: E402

from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

#: Two TradingBot tasks the warmed-up policy solves some of the time, and a TicketAPI/TravelAPI one: the offline
#: synthesizer cannot rename or renumber anything in multi_turn_base_104 (the task round 0 flags), and splices a
#: task only with one that shares no stateful class, so the third task is what round 0's candidates grow from.
TASKS = ["bfcl/multi_turn_base_100", "bfcl/multi_turn_base_104", "bfcl/multi_turn_base_177"]  # 2 turns each
K = 4  # rollouts per group
F = 2  # steps per round
CONFIG = """\
rounds = 2
seed = 0
[warmup]
steps = {warmup_steps}
[warmup.options]
learning_rate = 5e-3
max_length = 1024
trl_args = {{truncation_mode = "keep_end"}}
[trainer]
model = "{policy}"
steps_per_round = {F}
output_dir = "{checkpoints}"
[trainer.options]
group_size = {K}
groups_per_step = 2
learning_rate = 1e-3
beta = 0.0
max_completion_length = 2048
temperature = 0.6
[episode]
max_new_tokens = 40
max_model_calls_per_turn = 6
[synthesis]
max_candidates = 4
"""
WARMUP_STEPS = 100


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A folder with a store holding the tasks and their reference rollouts, and a tiny policy whose tokenizer
    was trained on those demonstrations (built as in tests/test_trainer_sft.py)."""
    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.trainers.sft import demonstrations
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, demonstration_corpus

    folder = tmp_path_factory.mktemp("run-prepared")
    environment = load_environment("bfcl")
    db = folder / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", [t for t in environment.load_tasks(category="multi_turn_base")
                                    if t["task_id"] in TASKS])
    args = ["rollout", "--env", "bfcl", "--model", "reference", "-k", "2", "--step", "0", "--db", str(db),
            "--no-progress"]
    for task_id in TASKS:
        args += ["--task-id", task_id]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    corpus = demonstration_corpus(demonstrations(db, environment), vocab_size=2048)
    build_tiny_qwen3(folder / "policy", corpus * 2, hidden_size=96, vocab_size=2048, sliding_window=64)
    return folder


def copy_run(prepared: Path, folder: Path) -> tuple[Path, Path]:
    """A fresh copy of the prepared store, and a config file pointing at it."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "store.duckdb"
    shutil.copy(prepared / "store.duckdb", db)
    config = folder / "run.toml"
    config.write_text(CONFIG.format(policy=prepared / "policy", checkpoints=folder / "checkpoints", F=F, K=K,
                                    warmup_steps=WARMUP_STEPS))
    return db, config


@pytest.fixture(scope="module")
def straight(prepared, tmp_path_factory) -> Path:
    """The store after two rounds run without interruption, each round's training launched as a process of
    its own (trainer.launcher), as `accelerate launch` would run it; the killed run trains in process.

    The run is a process of its own, as the killed run's are: inside this test process, after earlier tests
    called torch.set_num_threads (even to set back the count they found), its warm-up sums in another order and
    ends at another loss, and every round after it differs (docs/store.md, "Training's threads")."""
    db, config = copy_run(prepared, tmp_path_factory.mktemp("run-straight"))
    code, lines = run_until(db, config, None, "--set", f"trainer.launcher={json.dumps(sys.executable)}")
    output = "\n".join(lines)
    assert code == 0, output
    assert "2 of 2 rounds finished" in output
    assert "Loop cost: feedback " in output and "over 2 rounds" in output
    return db


def rows(db: Path, sql: str) -> list[tuple]:
    with Store(db, read_only=True) as store:
        return store.execute(sql).fetchall()


def test_every_phase_of_both_rounds_finished_once(straight):
    phases = rows(straight, "SELECT round, phase, status, attempts FROM run_phases ORDER BY round, started_at")
    expected = [(0, p) for p in ("weights", "warmup", "train", "eval", "signals", "patterns", "synthesize",
                                 "validate")]
    expected += [(1, p) for p in ("weights", "train", "eval", "signals", "patterns", "synthesize", "validate")]
    assert [(r, p) for r, p, *_ in phases] == expected
    assert {(status, attempts) for *_, status, attempts in phases} == {("finished", 1)}
    assert rows(straight, "SELECT round, status FROM rounds ORDER BY round") == [(0, "finished"), (1, "finished")]


def test_the_policy_changed_and_each_round_starts_from_the_last_checkpoint(straight):
    from safetensors.torch import load_file

    (warmed,), = rows(straight, "SELECT json_extract_string(outputs, '$.checkpoint') FROM run_phases "
                                "WHERE phase = 'warmup'")
    (r0_policy, r0_checkpoint, r0_first), (r1_policy, r1_checkpoint, r1_first) = rows(
        straight, "SELECT policy, checkpoint, first_step FROM rounds ORDER BY round")
    assert r0_policy == warmed and r1_policy == r0_checkpoint
    assert (r0_first, r1_first) == (1, 1 + F)
    tensors = [load_file(Path(path) / "model.safetensors") for path in (warmed, r0_checkpoint, r1_checkpoint)]
    for before, after in zip(tensors, tensors[1:]):
        moved = [name for name in before if not (before[name] == after[name]).all()]
        assert moved, "GRPO changed no parameter in a round"


def test_training_rollouts_are_in_the_store_in_whole_groups_with_their_steps(straight):
    groups = rows(straight, "SELECT step, group_id, count(*), min(policy), max(policy) FROM trajectories "
                            "WHERE step > 0 GROUP BY ALL ORDER BY ALL")
    assert {step for step, *_ in groups} == set(range(1, 2 * F + 1))
    assert len(groups) == 2 * F * 2  # groups_per_step = 2
    for step, group_id, count, low, high in groups:
        assert count == K and group_id.endswith(f"@{step}") or f"@{step}~" in group_id
        assert low == high == f"policy@{step - 1}"
    # the warmed-up policy solves the tasks some of the time: GRPO had groups with mixed outcomes to learn from
    (mixed,), = rows(straight, "SELECT count(*) FROM group_outcomes WHERE step > 0 AND successes BETWEEN 1 AND "
                               "rollouts - 1")
    assert mixed > 0


def test_training_rollouts_are_whole_episodes_every_user_turn_played(straight):
    """trl-grpo plays every user turn of a task: an episode that ends normally shows all T user turns of its task;
    one cut short by a limit (as BFCL's inference cuts it) shows the turns up to the one where it failed."""
    played = rows(straight, "SELECT t.task_id, t.messages, t.meta, k.spec FROM trajectories t JOIN tasks k "
                            "USING (task_id) WHERE t.step > 0")
    assert played
    done = 0
    for task_id, messages, meta, spec in played:
        messages, meta, turns = json.loads(messages), json.loads(meta), len(json.loads(spec)["turns"])
        users = sum(m["role"] == "user" for m in messages)
        assert users == meta["turns"]
        if meta["stop"] == "done":
            done += 1
            assert users == turns, task_id
        else:
            assert users == meta["failed_turn"] <= turns
    assert done > 0 and max(len(json.loads(spec)["turns"]) for *_, spec in played) > 1


def test_new_tasks_from_round_0_are_drawn_in_round_1_and_the_weights_say_why_they_moved(straight):
    accepted = rows(straight, "SELECT task_id FROM candidates WHERE round = 0 AND verdict = 'accepted'")
    assert accepted, "round 0 accepted no candidate"
    drawn = rows(straight, f"SELECT DISTINCT t.task_id FROM trajectories t JOIN candidates c USING (task_id) "
                           f"WHERE c.round = 0 AND t.step > {F}")
    assert drawn, "no task synthesized in round 0 was trained on in round 1"
    (reason,), = rows(straight, "SELECT reason FROM weight_sets WHERE round = 1")
    assert f"{len(accepted)} task{'s' if len(accepted) > 1 else ''} added ({len(accepted)} synthesized)" in reason
    (changed,), = rows(straight, "SELECT count(*) FROM task_weights a FULL JOIN task_weights b "
                                 "ON a.task_id = b.task_id AND a.round = 0 AND b.round = 1 "
                                 "WHERE a.round IS DISTINCT FROM 0 OR b.round IS DISTINCT FROM 1 "
                                 "OR a.weight <> b.weight")
    assert changed > 0


def test_the_figures_the_run_printed_are_recomputed_from_the_tables(straight):
    """run_phases.outputs holds what each phase printed; the run_rounds view recomputes them from the data."""
    printed = {(r, p): json.loads(o) for r, p, o in rows(straight, "SELECT round, phase, outputs FROM run_phases")}
    for round_, rollouts, success, forgetting, boundary, rare, patterns, candidates, accepted in rows(
            straight, "SELECT round, rollouts, train_success, forgetting, boundary, rare, patterns, candidates, "
                      "accepted FROM run_rounds ORDER BY round"):
        signals = printed[(round_, "signals")]
        assert (rollouts, round(success, 4)) == (signals["rollouts"], signals["success_rate"])
        assert round(success, 4) == printed[(round_, "train")]["success_rate"]
        flagged = {s: v["trajectories"] for s, v in signals["by_signal"].items()}
        assert (forgetting, boundary, rare) == tuple(flagged.get(s, 0) for s in ("forgetting", "boundary", "rare"))
        assert patterns == printed[(round_, "patterns")]["patterns"]
        assert (candidates, accepted) == (printed[(round_, "validate")]["candidates"],
                                          printed[(round_, "validate")]["accepted"])


def test_each_round_reports_its_training_and_feedback_seconds(straight):
    """Training is the train phase less its store writes (one per step); feedback is the rest of the round."""
    printed = {r: json.loads(o) for r, o in rows(straight, "SELECT round, outputs FROM run_phases WHERE phase = 'train'")}
    for round_, training, feedback, share, store_seconds, measured in rows(
            straight, "SELECT r.round, r.training_seconds, r.feedback_seconds, r.feedback_share, c.store_seconds, "
                      "c.measured_by FROM run_rounds AS r JOIN round_costs AS c USING (round) ORDER BY round"):
        assert printed[round_]["store_writes"] == F  # one unit of work per training step
        assert store_seconds == pytest.approx(printed[round_]["store_seconds"])
        assert training > 0 and feedback > store_seconds and measured == "span"
        assert share == pytest.approx(feedback / training)


def test_a_finished_run_has_nothing_to_do_and_more_rounds_extend_it(straight, prepared):
    from coevolve_engine.loop import RunLoop, load_config

    config_path = straight.parent / "run.toml"
    before = rows(straight, "SELECT count(*) FROM trajectories")
    result = CliRunner().invoke(cli, ["run", "--config", str(config_path), "--db", str(straight)])
    assert result.exit_code == 0 and "nothing to do" in result.output
    assert rows(straight, "SELECT count(*) FROM trajectories") == before
    more = RunLoop(straight, load_config(config_path, ["rounds=3"]))
    assert more.remaining() == [(2, p) for p in ("weights", "train", "eval", "signals", "patterns", "synthesize",
                                                 "validate")]


# -- kill -9 and resume ------------------------------------------------------------------------------------

# Kill the run when a line containing the text appears (its work is committed by then), at every phase
# boundary of round 0 and in the middle of four phases; round 1 then runs to the end.
KILL_AT = [
    "round 0 · weights    done",
    "round 0 · warmup     sft:",  # mid warm-up: the phase has started, its trainer is being built
    "round 0 · warmup     done",
    "step 1/2: group",  # mid train: one group written
    "round 0 · train      done",
    "round 0 · signals    done",
    "round 0 · patterns   embedding",  # mid patterns
    "round 0 · patterns   done",
    "round 0 · synthesize done",
    "round 0 · validate   1:",  # mid validate: one verdict stored
    "round 0 · validate   done",
    "round 1 · train      step 1/2: group",  # mid train of round 1, which continues round 0's optimization
]


def run_until(db: Path, config: Path, kill_at: str | None, *options: str) -> tuple[int, list[str]]:
    """Run `run` in a process of its own, killing it with SIGKILL once a line containing ``kill_at`` appears."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
    command = [sys.executable, "-m", "coevolve_engine.cli", "run", "--config", str(config), "--db", str(db),
               "--verbose", *options]  # the mid-phase lines it kills at are detail lines
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    seen = []
    assert process.stdout is not None
    for line in process.stdout:
        seen.append(line.rstrip())
        if kill_at is not None and kill_at in line:
            process.send_signal(signal.SIGKILL)
            break
    process.stdout.close()
    return process.wait(timeout=600), seen


def snapshot(db: Path) -> dict[str, list[tuple]]:
    """What two runs of the same configuration must agree on."""
    return {
        "tasks": rows(db, "SELECT task_id, source FROM tasks ORDER BY task_id"),
        "trajectories": rows(db, "SELECT task_id, step, group_id, trajectory_id, reward, policy, actions::VARCHAR "
                                 "FROM trajectories ORDER BY trajectory_id, step"),
        "candidates": rows(db, "SELECT candidate_id, round, verdict, reason, task_id FROM candidates ORDER BY ALL"),
        "patterns": rows(db, "SELECT pattern_id, size, dominant_signal FROM failure_patterns ORDER BY ALL"),
        "weights": rows(db, "SELECT round, task_id, weight FROM task_weights ORDER BY ALL"),
        "phases": rows(db, "SELECT round, phase, status FROM run_phases ORDER BY ALL"),
        "rounds": rows(db, "SELECT round, status, first_step FROM rounds ORDER BY ALL"),
    }


def test_killed_at_every_phase_boundary_and_mid_phase_the_run_resumes_to_the_same_store(prepared, straight,
                                                                                           tmp_path):
    db, config = copy_run(prepared, tmp_path / "killed")
    for kill_at in KILL_AT:
        code, lines = run_until(db, config, kill_at)
        assert code == -signal.SIGKILL, f"the run ended before {kill_at!r}:\n" + "\n".join(lines[-20:])
        (duplicates,), = rows(db, "SELECT count(*) - count(DISTINCT trajectory_id) FROM trajectories")
        assert duplicates == 0
    code, lines = run_until(db, config, None)
    assert code == 0, "\n".join(lines[-30:])
    assert lines[0].startswith("took over the lease of `run`")  # the killed run's, before anything else
    assert any(line.startswith("resuming at round 0") for line in lines) or lines[1].startswith("resuming")
    assert snapshot(db) == snapshot(straight)
    resumed = rows(db, "SELECT round, phase FROM run_phases WHERE attempts > 1 ORDER BY ALL")
    assert (0, "train") in resumed and (0, "warmup") in resumed and (1, "train") in resumed  # killed inside them
    # the same final policy: round 1, killed and trained again, continued round 0's optimizer state as the
    # uninterrupted run's did (float32 on CPU: equal within 1e-6 of the largest weight)
    final = [weights(folder / "checkpoints" / "round-1" / f"checkpoint-{2 * F}") for folder in (db.parent,
                                                                                            straight.parent)]
    largest = max(float(w.abs().max()) for w in final[1].values())
    assert max(float((final[0][k] - final[1][k]).abs().max()) for k in final[1]) <= 1e-6 * largest


def weights(checkpoint: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(checkpoint / "model.safetensors"))


def training_processes(spec: Path) -> list[int]:
    """Processes running the launched training of ``spec``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"coevolve_engine.loop.train_round" in command and str(spec).encode() in command:
            found.append(int(proc.name))
    return found


def test_a_launched_training_stops_when_the_run_is_killed(prepared, tmp_path):
    db, config = copy_run(prepared, tmp_path / "launched")
    config.write_text(config.read_text().replace("[warmup]\nsteps = 100", "[warmup]\nsteps = 0")
                      .replace("[trainer]\n", f"[trainer]\nlauncher = {json.dumps(sys.executable)}\n"))
    code, lines = run_until(db, config, "step 1/2: group")
    assert code == -signal.SIGKILL, "\n".join(lines[-20:])
    spec = tmp_path / "launched" / "checkpoints" / "round-0" / "round-spec.json"
    assert spec.exists()
    for _ in range(50):
        if not training_processes(spec):
            break
        time.sleep(0.2)
    assert not training_processes(spec), "the launched training outlived the run"
    (status,), = rows(db, "SELECT status FROM run_phases WHERE round = 0 AND phase = 'train'")
    assert status == "running"


def test_a_round_cannot_be_resumed_with_a_different_configuration(prepared, tmp_path):
    db, config = copy_run(prepared, tmp_path / "changed")
    code, _ = run_until(db, config, "round 0 · weights    done")
    assert code == -signal.SIGKILL
    result = CliRunner().invoke(cli, ["run", "--config", str(config), "--db", str(db),
                                      "--set", "trainer.options.learning_rate=0.01"])
    assert result.exit_code != 0
    assert "round 0 was started with a different configuration (trainer.options.learning_rate differ)" in result.output
