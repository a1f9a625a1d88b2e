"""The offline calc synthesizer on patterns found in real rollouts: the contract, moves per signal, validation.

The pattern store: 30 seed-split calc tasks. A scripted agent (its replies are fixed per task and step; the
episodes, their tool results and their scores are the environment's own, run by the shared episode driver)
plays two steps of four rollouts per task, written through ``StoreSink`` as GRPO groups:

- forgetting tasks (index % 3 == 0) are solved at step 0 and missed by one at step 1;
- boundary tasks (index % 3 == 1) are solved at step 0 and half solved at step 1;
- rare tasks (index % 3 == 2) are missed at step 0 and, at step 1, answered with a chain of tools no other
  rollout uses (action patterns under 5% of the 240 rollouts).

Then ``find_patterns`` clusters what the signal views flag at step 1 into round-1 failure patterns.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sentence_transformers")  # find_patterns embeds the flagged rollouts

from synthesizer_contract import SynthesizerContract  # noqa: E402

from coevolve_engine.adapters.agents.base import Agent, EpisodeLimits, ModelReply  # noqa: E402
from coevolve_engine.adapters.calls import ParsedCall  # noqa: E402
from coevolve_engine.core.environment import replay  # noqa: E402
from coevolve_engine.adapters.environments.calc import CalcEnvironment  # noqa: E402
from coevolve_engine.adapters.environments.calc.synthesizer import (  # noqa: E402
    OfflineCalcSynthesizer,
    cell_of,
    neighbours,
    skill_space,
)
from coevolve_engine.core.store import Store  # noqa: E402
from coevolve_engine.synthesis.candidates import (  # noqa: E402
    SYNTHESIZERS,
    load_patterns,
    load_synthesizer,
    synthesize,
)
from coevolve_engine.trainers.base import StoreSink  # noqa: E402


# --- the pattern store ------------------------------------------------------------------------------------

SIGNALS = ("forgetting", "boundary", "rare")
#: Chains no seed task asks for, one per rare task (consecutive tools differ, so each is its own pattern).
ODD_CHAINS = [c for n in (2, 3) for c in itertools.product(("add", "sub", "mul"), repeat=n)
              if all(a != b for a, b in zip(c, c[1:]))]


class ScriptedCalcAgent(Agent):
    """Answers the turn with fixed calls, then ends it with 'done'."""

    policy = "scripted"
    limits = EpisodeLimits(max_steps=8, max_model_calls_per_turn=3)
    system_prompt = None

    def __init__(self, calls: list[tuple[str, int]]) -> None:
        self.calls = calls

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        if messages[-1]["role"] == "tool":
            return ModelReply("done")
        return ModelReply(None, [ParsedCall(name, {"n": n}, json.dumps({"n": n})) for name, n in self.calls])


def _calls(spec: dict[str, Any], signal: str, index: int, step: int, sample: int) -> list[tuple[str, int]]:
    right = [(s["op"], s["n"]) for s in spec["steps"]]
    off_by_one = [(op, n + 1) for op, n in right]
    if signal == "forgetting":
        return right if step == 0 else off_by_one
    if signal == "boundary":
        return right if step == 0 or sample % 2 == 0 else off_by_one
    if step == 0:
        return off_by_one
    return [(op, 2) for op in ODD_CHAINS[index // 3]]


def build_calc_pattern_store(path: Path, tasks: int = 30) -> list[dict[str, Any]]:
    """Create the store at ``path`` with rollouts and round-1 patterns; returns the task records."""
    from coevolve_engine.patterns import PatternSelection, find_patterns

    env = CalcEnvironment()
    records = list(env.load_tasks(split="seed", n=tasks))
    with Store(path) as store:
        store.add_records("tasks", records, label="calc seed tasks")
    sink = StoreSink(path, label="scripted calc")
    for step in (0, 1):
        for index, task in enumerate(records):
            signal = SIGNALS[index % 3]
            group = []
            for sample in range(4):
                agent = ScriptedCalcAgent(_calls(task["spec"], signal, index, step, sample))
                rollout = agent.run(env, task["task_id"], task["spec"])
                rollout.sample_index = sample
                group.append(rollout)
            sink.write_group(group, step=step, group_id=f"{task['task_id']}@{step}")
    with Store(path) as store:
        find_patterns(store, PatternSelection(round=1, step=1, max_k=3, seed=0))
    return records


@pytest.fixture(scope="module")
def pattern_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("calc-synthesis") / "store.duckdb"
    build_calc_pattern_store(path)
    return path


@pytest.fixture(scope="module")
def patterns(pattern_db):
    with Store(pattern_db, read_only=True) as store:
        return {pattern.dominant_signal: pattern for pattern in load_patterns(store)}


class TestOfflineCalcSynthesizerContract(SynthesizerContract):
    @pytest.fixture
    def synthesizer(self):
        return OfflineCalcSynthesizer()


def test_registered_as_offline_calc():
    assert SYNTHESIZERS.load("offline:calc") is OfflineCalcSynthesizer
    assert isinstance(load_synthesizer("offline:calc", attempts=2), OfflineCalcSynthesizer)
    with pytest.raises(ValueError, match="attempts must be >= 1"):
        OfflineCalcSynthesizer(attempts=0)


def test_the_rollouts_flag_one_pattern_per_signal(patterns):
    assert set(patterns) == set(SIGNALS)
    for signal, pattern in patterns.items():
        assert pattern.signal_counts[signal] >= pattern.size / 2 and pattern.task_ids


def propose_for(synthesizer, pattern_db, pattern, n=12, seed=0):
    with Store(pattern_db, read_only=True) as store:
        return synthesizer.propose(store, [pattern], max_candidates=n, seed=seed)


def test_forgetting_reinforces_the_same_skill_with_fresh_numbers(pattern_db, patterns):
    pattern = patterns["forgetting"]
    made = propose_for(OfflineCalcSynthesizer(), pattern_db, pattern)
    assert len(made) == 12
    for candidate in made:
        parent = pattern.tasks[candidate.provenance["parents"][0]]
        assert candidate.spec["skill"] == parent["spec"]["skill"]
        assert candidate.prompt != parent["prompt"]
        assert candidate.provenance["moves"] == ["none: fresh numbers, same skill"]


def test_boundary_moves_one_parameter_one_notch(pattern_db, patterns):
    pattern = patterns["boundary"]
    made = propose_for(OfflineCalcSynthesizer(), pattern_db, pattern)
    assert len(made) == 12
    moved = set()
    for candidate in made:
        parent = cell_of(pattern.tasks[candidate.provenance["parents"][0]]["spec"])
        (move,) = candidate.provenance["moves"]
        assert cell_of(candidate.spec) in {cell for _, _, _, cell in neighbours(parent)}
        moved.add(move.split(" ")[0])
    assert len(moved) >= 3  # several parameters, not one


def test_rare_moves_twice_towards_what_the_store_lacks(pattern_db, patterns):
    pattern = patterns["rare"]
    made = propose_for(OfflineCalcSynthesizer(), pattern_db, pattern, n=20)
    assert len(made) == 20
    assert all(len(c.provenance["moves"]) == 2 for c in made)
    skills = [c.spec["skill"] for c in made]
    # the store holds only seed tasks (1-2 calls, small, no distractors): moves go where it has none
    novel = sum(1 for s in skills if "mul" in s["tools"] or s["calls"] > 1 or s["operands"] == "large"
                or s["distractors"] > 0)
    assert novel >= 16


@pytest.mark.parametrize("signal", SIGNALS)
def test_a_space_keeps_every_candidate_inside_it(pattern_db, patterns, signal):
    space = {"forms": ["steps"], "distractors": [0, 1]}
    made = propose_for(load_synthesizer("offline:calc", space=space), pattern_db, patterns[signal], n=20)
    assert len(made) == 20
    assert all(c.spec["form"] == "steps" and c.spec["skill"]["distractors"] <= 1 for c in made)
    for candidate in made:  # a 'goal' seed is first moved to its 'steps' twin, then moved as its signal says
        moves = candidate.provenance["moves"]
        if patterns[signal].tasks[candidate.provenance["parents"][0]]["spec"]["form"] == "goal":
            assert moves[0] == "into the synthesizer's space"
            moves = moves[1:]
        assert len(moves) == {"forgetting": 0, "boundary": 1, "rare": 2}[signal] or moves == [
            "none: fresh numbers, same skill"]


def test_a_space_must_narrow_the_full_one():
    assert skill_space(None) == skill_space({}) and skill_space({"forms": "steps"}).forms == ("steps",)
    with pytest.raises(ValueError, match="unknown skill parameter"):
        skill_space({"form": ["steps"]})
    with pytest.raises(ValueError, match="non-empty subset"):
        skill_space({"calls": [4]})
    with pytest.raises(ValueError, match="non-empty subset"):
        skill_space({"forms": []})


def test_candidates_replay_and_pass_the_schema_and_ground_truth_checks(db):
    from coevolve_engine.synthesis.candidates import pending_candidates

    with Store(db) as store:
        report = synthesize(store, synthesizer="offline:calc", max_candidates=15, seed=3)
        assert (report.proposed, report.added) == (15, 15) and set(report.by_signal) == set(SIGNALS)
        again = synthesize(store, synthesizer="offline:calc", max_candidates=15, seed=3)
        assert again.added == 0
        pending = pending_candidates(store)
        seed_prompts = {p for (p,) in store.execute("SELECT prompt FROM tasks").fetchall()}
    env = CalcEnvironment()
    assert len({c.prompt for c in pending}) == 15 and not {c.prompt for c in pending} & seed_prompts
    for candidate in pending:
        assert candidate.task_id.startswith("calc-syn/")
        score = replay(env, candidate.task_id, candidate.spec, env.reference_solution(candidate.spec))
        assert score.success, score.reason


# --- stepping stones ---------------------------------------------------------------------------------------

def test_frontier_prefers_partial_success():
    from coevolve_engine.adapters.environments.calc.synthesizer import frontier

    assert frontier(3, 0.5, 0.5) == 1.0  # too few rollouts: unknown
    assert frontier(16, 0.5, 0.5) == pytest.approx(1.1)  # binary reward: 0.1 + 4 p (1 - p)
    assert frontier(16, 0.0, 0.5) == pytest.approx(2.1)  # never solved whole, half done: a stepping stone
    assert frontier(16, 1.0, 1.0) == pytest.approx(0.1)  # solved
    assert frontier(16, 0.0, 0.0) == pytest.approx(0.1)  # hopeless


def test_policy_outcomes_read_the_latest_training_rollouts(pattern_db):
    from coevolve_engine.adapters.environments.calc.synthesizer import policy_outcomes

    with Store(pattern_db, read_only=True) as store:
        outcomes, tool_use = policy_outcomes(store, window=1)  # step 1 only
        rows = store.execute(
            "SELECT r.success, r.reward, r.action_pattern, t.spec FROM trajectories r JOIN tasks t USING (task_id) "
            "WHERE r.step = 1").fetchall()
    expected: dict[tuple, list] = {}
    calls: dict[str, int] = {}
    for success, reward, pattern, spec in rows:
        skill = json.loads(spec)["skill"]
        key = (skill["calls"], skill["operands"], skill["distractors"], skill.get("turns", "one"))
        expected.setdefault(key, []).append((success, reward))
        for tool in (pattern.split(">") if pattern else []):
            calls[tool] = calls.get(tool, 0) + 1
    assert set(outcomes) == set(expected)
    for key, got in outcomes.items():
        n, p, r = got
        assert n == len(expected[key])
        assert p == pytest.approx(sum(s for s, _ in expected[key]) / n)
        assert r == pytest.approx(sum(w for _, w in expected[key]) / n)
    assert dict(tool_use) == calls


def test_boundary_moves_go_to_the_neighbour_of_partial_success():
    import random

    from coevolve_engine.adapters.environments.calc.synthesizer import _Run, outcome_key
    from coevolve_engine.adapters.environments.calc.tasks import Cell

    cell = Cell(("add", "sub"), "small", 0, "steps")
    stone = Cell(("add", "sub", "add"), "small", 0, "steps")
    run = _Run([], seed=0, attempts=1)
    moves = [run._move(cell, random.Random(i), rare=False)[0] for i in range(400)]
    plain = sum(outcome_key(m) == outcome_key(stone) for m in moves)
    # every neighbour solved but the 3-call cell, where the policy does part of the task
    run.outcomes = {outcome_key(c): (40, 1.0, 1.0) for _, _, _, c in neighbours(cell)}
    run.outcomes[outcome_key(stone)] = (40, 0.0, 0.6)
    moves = [run._move(cell, random.Random(i), rare=False)[0] for i in range(400)]
    steered = sum(outcome_key(m) == outcome_key(stone) for m in moves)
    assert plain < 100 and steered > 250  # one move in eight, then three in four


def test_rare_moves_bring_in_the_tool_the_policy_calls_least():
    import random

    from coevolve_engine.adapters.environments.calc.synthesizer import _Run
    from coevolve_engine.adapters.environments.calc.tasks import Cell

    cell = Cell(("add",), "small", 0, "steps")
    run = _Run([], seed=0, attempts=1)
    run.pool_size, run.tool_use = 100, Counter({"add": 90, "sub": 9, "mul": 1})
    # the task set holds every other value of the neighbours often: only the tools differ in rarity
    run.counts.update({("calls", 2): 100, ("operands", "large"): 100, ("distractors", 1): 100, ("form", "goal"): 100})
    moves = [run._move(cell, random.Random(i), rare=True)[0] for i in range(400)]
    with_mul = sum("mul" in m.chain for m in moves)
    with_sub = sum("sub" in m.chain for m in moves)
    assert with_mul > 2 * with_sub


def test_stepping_stones_can_be_turned_off(pattern_db, patterns):
    off = propose_for(OfflineCalcSynthesizer(stepping_stones=False), pattern_db, patterns["boundary"])
    assert len(off) == 12
    with pytest.raises(ValueError, match="window must be >= 1"):
        OfflineCalcSynthesizer(window=0)


@pytest.mark.parametrize("signal", ["boundary", "rare"])
def test_keep_holds_the_seeds_calls_and_turns(pattern_db, patterns, signal):
    pattern = patterns[signal]

    def shape(cell):
        return len(cell.chain), cell.turns

    free = propose_for(OfflineCalcSynthesizer(), pattern_db, pattern, n=20)
    kept = propose_for(load_synthesizer("offline:calc", keep=["calls", "turns"]), pattern_db, pattern, n=20)
    assert len(kept) == 20
    changed = [c for c in free if shape(cell_of(c.spec)) != shape(cell_of(pattern.tasks[c.provenance["parents"][0]]
                                                                          ["spec"]))]
    assert changed  # without keep, some moves change the number of calls or of turns
    for candidate in kept:
        parent = cell_of(pattern.tasks[candidate.provenance["parents"][0]]["spec"])
        assert shape(cell_of(candidate.spec)) == shape(parent)
        assert not any(move.startswith(("append", "drop", "turns")) for move in candidate.provenance["moves"])
    with pytest.raises(ValueError, match="keep: unknown parameter.s. chain"):
        OfflineCalcSynthesizer(keep=["chain"])
