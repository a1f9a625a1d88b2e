"""The verl route: the overrides our docs print (parsed as bench/verl_check.py parses them), the weighted draws
our verl dataset class serves, and, when a verl venv is given (COEVOLVE_VERL_VENV), the check itself against
that verl: overrides, datasets, BFCL episodes in verl's agent loop, and verl's dump imported back."""

from __future__ import annotations

import collections
import importlib
import importlib.util
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from coevolve_engine.trainers.verl_sampler import SamplerConfigError, weighted_draws

REPO = Path(__file__).resolve().parent.parent
CHECK = REPO / "bench" / "verl_check.py"


@pytest.fixture(scope="module")
def check():
    return runpy.run_path(str(CHECK))


def test_the_trainers_page_prints_a_whole_uniform_and_a_whole_weighted_verl_command(check):
    found = check["collect"]()
    page = [c for c in found["commands"] if c["source"] == "docs/trainers.md" and c["complete"]]
    uniform = check["route_overrides"](found["commands"], weighted=False)
    weighted = check["route_overrides"](found["commands"], weighted=True)
    assert len(page) == 2 and uniform != weighted
    assert "data.shuffle=True" in uniform and not any("custom_cls" in o for o in uniform)
    assert {"data.custom_cls.path=pkg://coevolve_engine.trainers.verl_sampler",
            "data.custom_cls.name=WeightedRLHFDataset"} <= set(weighted)
    # the paper's hyperparameters, in verl's names
    for override in ("algorithm.adv_estimator=grpo", "data.train_batch_size=32", "actor_rollout_ref.rollout.n=8",
                     "actor_rollout_ref.actor.optim.lr=1e-6", "actor_rollout_ref.actor.kl_loss_coef=0.001",
                     "actor_rollout_ref.actor.clip_ratio_low=0.2", "actor_rollout_ref.actor.clip_ratio_high=0.28",
                     "actor_rollout_ref.rollout.temperature=0.9", "trainer.total_training_steps=10"):
        assert override in uniform and override in weighted, override


def test_no_doc_names_the_sampler_section_verl_0_9_refuses(check):
    found = check["collect"]()
    printed = {o for overrides in found["per_source"].values() for o in overrides}
    assert printed and not [o for o in printed if o.lstrip("+").startswith("data.sampler.")]


def test_commands_join_continuation_lines_and_tell_excerpts(check):
    text = ("#   python3 -m verl.trainer.main_ppo a.b=1 \\\n#     data.c=x `d.e=2` \\\n#     trainer.f=3 ...\n"
            "python -m verl.trainer.main_ppo +data.g=4\n")
    assert check["commands"](text) == [{"overrides": ["a.b=1", "data.c=x", "d.e=2", "trainer.f=3"], "complete": False},
                                       {"overrides": ["+data.g=4"], "complete": True}]
    assert check["loose_overrides"]("set `data.custom_cls.name=X` and trainer.model=p, then +data.k=5.") == [
        "data.custom_cls.name=X", "+data.k=5"]


class Rows:
    """A dataset as verl's RLHFDataset holds it: rows in ``dataframe`` (a datasets.Dataset)."""

    def __init__(self, weights):
        datasets = pytest.importorskip("datasets")
        self.dataframe = datasets.Dataset.from_list(
            [{"extra_info": {"task_id": f"t{i}", "weight": w}} for i, w in enumerate(weights)])


def test_weighted_draws_follow_the_weights_and_the_seed():
    rows = Rows([3.0, 1.0, 0.0, 1.0])
    draws = weighted_draws(rows, {"weighted_draws": 5000, "seed": 7})
    counts = collections.Counter(draws)
    assert len(draws) == 5000 and counts[2] == 0
    assert abs(counts[0] / 5000 - 0.6) < 0.03 and abs(counts[1] / 5000 - 0.2) < 0.03
    assert weighted_draws(rows, {"weighted_draws": 5000, "seed": 7}) == draws
    assert weighted_draws(rows, {"weighted_draws": 5000, "seed": 8}) != draws
    assert len(weighted_draws(rows, {"seed": None})) == 4  # defaults: one draw per row, seed 0
    with pytest.raises(SamplerConfigError, match="data.weighted_draws must be a whole number of at least 1"):
        weighted_draws(rows, {"weighted_draws": 0})


@pytest.mark.skipif(not os.environ.get("COEVOLVE_VERL_VENV"), reason="set COEVOLVE_VERL_VENV to a venv with verl "
                    "(python bench/verl_check.py --venv DIR --install makes one)")
def test_the_verl_check_passes_against_the_installed_verl():
    result = subprocess.run([sys.executable, str(CHECK), "--venv", os.environ["COEVOLVE_VERL_VENV"]],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "all checks passed against verl" in result.stdout and "REFUSED" not in result.stdout
    # the multi-turn part: verl's agent loop played the BFCL episodes, and verl's dump came back
    for item in ("verl's AgentLoopWorker played 50 episodes", "every user turn played",
                 "reward function's verdict == the episode player's on the same answers in 50/50 episodes",
                 "response mask: 1 on exactly the tokens the server generated", "ran through the verl tools",
                 "0 truncated prompts: every episode's prompt is its whole opening",
                 "requests asked for at most 256 tokens", "is refused, not cut",
                 "verl's RayPPOTrainer._log_rollout_data wrote", "in 2 groups named by verl's uid",
                 "signal view boundary"):
        assert item in result.stdout, item


@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="verl is installed here")
def test_the_verl_integration_says_it_needs_verl():
    with pytest.raises(ModuleNotFoundError, match="runs inside verl; install verl") as caught:
        importlib.import_module("coevolve_engine.trainers.verl_bfcl")
    assert caught.value.name == "verl"
