"""A run is one optimization: trl-grpo split into rounds (each a new trainer built from the last round's
checkpoint, as `coevolve-engine run` builds them) trains exactly as one long trainer does.

The tiny Qwen3 answers counter tasks (no tools) graded by the length of its first answer, so groups have mixed
rewards from the first step and the parameters, the Adam moments and the KL term all move.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

import torch  # noqa: E402

from coevolve_engine.core.environment import Score  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402
from coevolve_engine.trainers import TRAINERS, BatchSource, TrainContext  # noqa: E402
from toy_env import CounterEnvironment, CounterEpisode, counter_task  # noqa: E402

K = 2
OPTIONS = {"group_size": K, "groups_per_step": 2, "learning_rate": 1e-3, "beta": 0.04, "max_new_tokens": 8,
           "max_completion_length": 64, "max_model_calls_per_turn": 1, "temperature": 1.0}


class ShortAnswerEpisode(CounterEpisode):
    """No tools and no system prompt: short sequences, so a step takes a fraction of a second."""

    def system_prompt(self):
        return None

    def tools(self):
        return []

    def score(self) -> Score:
        first = self.replies[0] if self.replies and self.replies[0] else ""
        reward = 1.0 / (1.0 + len(first))
        return Score(reward, reward > 0.5, f"first answer of {len(first)} characters")


class ShortAnswerEnvironment(CounterEnvironment):
    name = "counter"

    def start(self, task_id, spec):
        return ShortAnswerEpisode(task_id, spec)


class Collected:
    """A trajectory sink keeping the rollouts in memory."""

    def __init__(self) -> None:
        self.rollouts = []

    def write_groups(self, groups, *, step):
        for _, group in groups:
            self.rollouts += [(step, r.task_id, tuple(r.actions), r.reward) for r in group]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: a tiny model's steps are several times faster so on a loaded 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """A folder holding the starting policy and a store of three tasks."""
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, qwen3_chat_template

    folder = tmp_path_factory.mktemp("one-optimization")
    tasks = [counter_task(f"counter/{i}", [f"Add {i} to the counter."], i) for i in range(1, 4)]
    build_tiny_qwen3(folder / "policy", [qwen3_chat_template()] + [t["prompt"] for t in tasks] * 4,
                     hidden_size=32, vocab_size=400)
    with Store(folder / "store.duckdb") as store:
        store.add_records("tasks", tasks)
    return folder


def train_round(folder: Path, out: str, steps: int, *, start_step: int = 0, model: str = "", resume_from: str = "",
                schedule_steps: int = 0, trl_args: dict | None = None):
    """One round's trainer as the run builds it (``TRAINERS.build`` with the run's context), trained ``steps``."""
    policy = str(folder / "policy")
    sink = Collected()
    context = TrainContext(store_path=folder / "store.duckdb", env="counter",
                           environment=ShortAnswerEnvironment(), seed=0,
                           source=BatchSource({f"counter/{i}": 1.0 for i in range(1, 4)}, seed=0), sink=sink,
                           model=model or policy, output_dir=str(folder / out), start_step=start_step,
                           policy_name="tiny", resume_from=resume_from, reference_model=policy,
                           schedule_steps=schedule_steps)
    trainer = TRAINERS.build("trl-grpo", {**OPTIONS, "use_cpu": True, "trl_args": trl_args or {}}, context)
    report = trainer.train(steps)
    return trainer, report, sink.rollouts


def optimizer_state(checkpoint: Path) -> dict:
    return torch.load(checkpoint / "optimizer.pt", weights_only=True)["state"]


def weights(checkpoint: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(checkpoint / "model.safetensors"))


def assert_close(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], dict):
            assert_close(a[key], b[key])
        else:
            torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-7, msg=f"{key} differs")


@pytest.fixture(scope="module")
def runs(start):
    _, long, long_rollouts = train_round(start, "long", 10)
    _, first, first_rollouts = train_round(start, "split-0", 5)
    trainer, second, second_rollouts = train_round(start, "split-1", 5, start_step=5, model=str(first.checkpoint),
                                                   resume_from=str(first.checkpoint))
    return long, (first, second), long_rollouts, first_rollouts + second_rollouts, trainer


def test_two_rounds_of_5_steps_end_where_one_round_of_10_does(runs, start):
    long, (first, second), long_rollouts, split_rollouts, _ = runs
    assert len({reward for *_, reward in long_rollouts}) > 1  # mixed rewards: GRPO had something to learn
    assert_close(weights(second.checkpoint), weights(long.checkpoint))
    assert_close(optimizer_state(second.checkpoint), optimizer_state(long.checkpoint))  # Adam's moments and steps
    assert split_rollouts == long_rollouts  # the same draws and the same sampled episodes, step by step
    assert (long.checkpoint.name, first.checkpoint.name, second.checkpoint.name) == (
        "checkpoint-10", "checkpoint-5", "checkpoint-10")  # the optimizer's step count went on
    assert not torch.equal(weights(long.checkpoint)["model.embed_tokens.weight"],
                           weights(start / "policy")["model.embed_tokens.weight"])


def test_the_kl_reference_stays_the_starting_policy_in_the_next_round(runs, start):
    first = runs[1][0]
    trainer = runs[4]
    reference = weights(start / "policy")
    for name, parameter in trainer._grpo.ref_model.named_parameters():
        assert torch.equal(parameter.detach(), reference[name]), f"{name}: the reference is not the starting policy"
    moved = weights(first.checkpoint)["model.embed_tokens.weight"]
    assert not torch.equal(moved, reference["model.embed_tokens.weight"])  # round 1's start differs from it


def test_a_fresh_optimization_each_round_ends_elsewhere(runs, start):
    """trainer.optimization = "round": the second round starts from the checkpoint with new Adam moments and that
    checkpoint as KL reference, and does not end where the long run does."""
    long, (first, _), *_ = runs
    _, fresh, _ = train_round(start, "fresh-1", 5, start_step=5, model=str(first.checkpoint))
    assert not torch.allclose(weights(fresh.checkpoint)["model.embed_tokens.weight"],
                              weights(long.checkpoint)["model.embed_tokens.weight"], rtol=1e-5, atol=1e-7)


def test_a_resumed_round_says_nothing_of_the_tied_output_embedding(runs, start):
    """A tied lm_head is saved once, under the input embedding: resuming from such a checkpoint ties it again and
    does not warn that the checkpoint misses 'lm_head.weight' (it printed in every round of the demo after the
    first)."""
    first = runs[1][0]
    assert "lm_head.weight" not in weights(first.checkpoint)  # tied: the checkpoint holds it once, as embed_tokens
    said: list[str] = []
    heard = logging.Handler(logging.WARNING)
    heard.emit = lambda record: said.append(record.getMessage())
    transformers_logger = logging.getLogger("transformers")  # transformers.trainer's warnings pass through it
    transformers_logger.addHandler(heard)
    try:
        trainer, _, _ = train_round(start, "resumed-quiet", 1, start_step=5, model=str(first.checkpoint),
                                    resume_from=str(first.checkpoint))
    finally:
        transformers_logger.removeHandler(heard)
    assert not [line for line in said if "missing keys" in line], said
    model = trainer.model
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still one weight


#: a schedule that moves at every step: cosine decay after one warm-up step
COSINE = {"lr_scheduler_type": "cosine", "warmup_steps": 1}


def logged_learning_rates(checkpoint: Path) -> list[float]:
    """The learning rate transformers logged at each optimizer step of the optimization (its trainer_state.json)."""
    import json

    history = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    return [entry["learning_rate"] for entry in history if "learning_rate" in entry]


def test_a_cosine_schedule_with_warm_up_spans_the_runs_steps_not_each_rounds(start):
    """2 rounds of 2 steps under one schedule of 4 steps follow the learning rates of 1 round of 4, and end with its
    weights; a round that would run past the schedule's steps is refused."""
    _, long, _ = train_round(start, "cosine-long", 4, schedule_steps=4, trl_args=COSINE)
    _, first, _ = train_round(start, "cosine-0", 2, schedule_steps=4, trl_args=COSINE)
    _, second, _ = train_round(start, "cosine-1", 2, start_step=2, model=str(first.checkpoint),
                               resume_from=str(first.checkpoint), schedule_steps=4, trl_args=COSINE)
    # warm-up to 1e-3 over one step, then cosine decay to 0 at step 4
    assert logged_learning_rates(long.checkpoint) == pytest.approx([0.0, 1e-3, 7.5e-4, 2.5e-4], abs=1e-12)
    assert logged_learning_rates(second.checkpoint) == logged_learning_rates(long.checkpoint)
    assert_close(weights(second.checkpoint), weights(long.checkpoint))
    with pytest.raises(Exception, match="past the 4 steps its learning-rate schedule spans"):
        train_round(start, "cosine-2", 2, start_step=4, model=str(second.checkpoint),
                    resume_from=str(second.checkpoint), schedule_steps=4, trl_args=COSINE)


@pytest.mark.parametrize("schedule", ["reduce_lr_on_plateau", "greedy"])
def test_a_schedule_that_follows_metrics_is_refused_before_a_round(schedule):
    """Their learning rate is not a function of the step: trl-grpo's options check refuses them by name."""
    from coevolve_engine.core.errors import CoevolveError

    trainer = TRAINERS.load("trl-grpo")
    with pytest.raises(CoevolveError, match=f"lr_scheduler_type = '{schedule}'"):
        trainer.check_options({**OPTIONS, "trl_args": {"lr_scheduler_type": schedule}}, "trainer trl-grpo")


# -- the same from the outside: `coevolve-engine demo --quick` --------------------------------------------------

#: nothing changes the data between rounds: no synthesis, uniform weights, no evaluation; a KL term; a learning
#: rate that changes at every step (cosine after one warm-up step), which the rounds must share
STEADY = ["--set", "synthesis.synthesizer=none", "--set", "curriculum.strategy=uniform",
          "--set", "curriculum.settings={}", "--set", "eval.every=0", "--set", "trainer.options.beta=0.04",
          "--set", 'trainer.options.trl_args={lr_scheduler_type = "cosine", warmup_steps = 1}']


def demo(folder: Path, *args: str) -> None:
    from click.testing import CliRunner

    from coevolve_engine.cli import cli

    result = CliRunner().invoke(cli, ["demo", "--quick", "--dir", str(folder), *args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    """The quick demo as 1 round of 4 steps after its warm-up, and on a copy of its prepared folder as 2 rounds of
    2 steps from that warm-up's checkpoint (both runs' starting policy and KL reference)."""
    import shutil

    from coevolve_engine.loop.demo import QUICK, prepare

    root = tmp_path_factory.mktemp("demo-split")
    prepare(root / "long", QUICK, echo=lambda line: None)
    shutil.copytree(root / "long", root / "split")
    demo(root / "long", *STEADY, "--rounds", "1", "--set", "trainer.steps_per_round=4")
    (warm,) = (root / "long" / "checkpoints" / "round-0" / "warmup").glob("step-*")
    demo(root / "split", *STEADY, "--set", f"trainer.model={warm}", "--set", "warmup.steps=0")
    return root, warm


def test_the_quick_demo_as_2_rounds_of_2_steps_ends_where_1_round_of_4_does_under_cosine_with_warm_up(demos):
    root, warm = demos
    split = weights(root / "split" / "checkpoints" / "round-1" / "checkpoint-4")
    long = weights(root / "long" / "checkpoints" / "round-0" / "checkpoint-4")
    largest = max(float(w.abs().max()) for w in long.values())
    differences = {name: float((split[name] - long[name]).abs().max()) for name in long}
    assert max(differences.values()) < 1e-5 * largest, differences
    start = weights(warm)
    assert any(not torch.equal(start[name], long[name]) for name in long)  # GRPO moved the policy
    rates = logged_learning_rates(root / "long" / "checkpoints" / "round-0" / "checkpoint-4")
    assert len(rates) == 4 and rates[0] == 0.0 and rates[1] > rates[2] > rates[3] > 0  # warm-up, then cosine
    assert logged_learning_rates(root / "split" / "checkpoints" / "round-1" / "checkpoint-4") == rates
    with Store(root / "split" / "demo.duckdb", read_only=True) as a, \
            Store(root / "long" / "demo.duckdb", read_only=True) as b:
        query = "SELECT step, group_id, reward, actions::VARCHAR FROM trajectories WHERE step > 0 ORDER BY ALL"
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
