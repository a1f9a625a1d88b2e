"""The memory arithmetic of bench/scale_memory.py: its shapes are the published models' (parameter counts against
transformers' own modules, built on the meta device, and against the published totals), and its reading of a
launcher."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from scale_memory import SHAPES, Batch, Launch, generation_bytes, model_config, predict, shape_of  # noqa: E402


def module_parameters(shape, layers):
    config, cls = model_config(shape, layers)
    with torch.device("meta"):
        model = cls(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_shape_counts_the_parameters_transformers_builds(name):
    shape = SHAPES[name]
    for layers in (1, 2):
        assert shape.depth(layers).parameters() == module_parameters(shape, layers)


def test_the_shapes_give_the_published_totals():
    published = {"Qwen3-4B": 4.02e9, "Qwen3-8B": 8.19e9, "Qwen2.5-7B": 7.62e9, "Qwen3-30B-A3B": 30.53e9}
    for name, total in published.items():
        assert SHAPES[name].parameters() == pytest.approx(total, rel=0.005), name
    assert shape_of("models/Qwen2.5-7B-Instruct").name == "Qwen2.5-7B"


def test_a_launcher_names_its_processes_and_zero_stage():
    launch = Launch.from_launcher("accelerate launch --num_processes 16 --use_deepspeed --zero_stage 3 "
                                  "--mixed_precision bf16")
    assert (launch.processes, launch.zero_stage) == (16, 3)
    assert (Launch.from_launcher("").processes, Launch.from_launcher("").zero_stage) == (1, 0)


def test_the_scores_of_32_episodes_of_1024_tokens_are_about_20_gb():
    shape = SHAPES["Qwen3-4B"]
    batch = Batch(gen_episodes=32, gen_prompt=2000, gen_new=1024, train_rows=1, train_width=1, scores_kept=True)
    assert generation_bytes(shape, batch, 2)["scores"] == 32 * 1024 * 151936 * 4


def test_sharding_divides_the_states_and_gathering_adds_the_whole_model_to_generation():
    shape = SHAPES["Qwen3-4B"]
    batch = Batch(gen_episodes=1, gen_prompt=100, gen_new=10, train_rows=1, train_width=110, train_completion=10)
    one, eight = predict(shape, Launch(processes=1, zero_stage=3), batch), predict(shape, Launch(8, 3), batch)
    assert eight.optimizer == pytest.approx(one.optimizer / 8) and eight.weights == pytest.approx(one.weights / 8)
    assert one.gathered_generation == 0 and eight.gathered_generation == pytest.approx(2 * shape.parameters() * 7 / 8)


@pytest.mark.parametrize("name", ["bfcl_paper", "bfcl_paper_qwen2_5_7b", "bfcl_paper_qwen3_30b_a3b"])
def test_each_paper_recipe_quotes_the_predicted_peak_and_fits_its_gpus_with_15_percent_headroom(name):
    import re

    from scale_rehearsal import GPU_GB, HEADROOM, recipe_batch

    from coevolve_engine.loop.config_files import load_config

    path = Path(__file__).resolve().parent.parent / "recipes" / f"{name}.toml"
    recipe = load_config(path, check=False)
    shape = shape_of(recipe.trainer.model)
    launch = Launch.from_launcher(recipe.trainer.launcher)
    peak = predict(shape, launch, recipe_batch(recipe, shape, True)).peak() / 1e9
    gpu = GPU_GB[path.name]
    assert peak <= gpu * (1 - HEADROOM)
    quoted = re.search(r"predicted peak\s+(?:#\s+)?(\d+) GB per GPU on (\d+) GPUs of (\d+) GB \((\d+)% headroom",
                       path.read_text())
    assert quoted, "the header quotes no predicted peak"
    assert (int(quoted[1]), int(quoted[2]), int(quoted[3])) == (round(peak), launch.processes, gpu)
    assert int(quoted[4]) == round(100 * (1 - peak / gpu))
    before = predict(shape, launch, recipe_batch(recipe, shape, False)).peak() / 1e9
    assert before > gpu  # the bounds are what make it fit
