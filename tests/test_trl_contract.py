"""What trl-grpo relies on in TRL's GRPOTrainer beyond its documented arguments, pinned so that a TRL upgrade
that changes it fails here, by name, rather than training on the wrong groups without a word.

trl-grpo (``trainers/trl_grpo/grpo.py``) overrides two private methods: ``_get_train_sampler``, to draw its
groups with the engine's weighted sampler (it reads the settings TRL passes its own ``RepeatSampler``), and
``_generate_and_score_completions``, whose scored batch it rebuilds with a row per token segment. It hands the
step's rows to ``rollout_func`` through transformers' public ``training_step``, which must see the very batch
whose prompts TRL then gives ``rollout_func``.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

trl = pytest.importorskip("trl")
from trl import GRPOConfig, GRPOTrainer  # noqa: E402


def changed(what: str, relied_on: str) -> str:
    return (f"TRL {trl.__version__} changed {what}; trl-grpo relies on {relied_on} "
            "(trainers/trl_grpo/grpo.py): adapt CoevolveGRPOTrainer to the new TRL, then this test")


def source(function) -> str:
    return inspect.getsource(function)


def test_the_train_sampler_hook_is_what_trl_grpo_overrides():
    parameters = list(inspect.signature(GRPOTrainer._get_train_sampler).parameters.values())
    assert [p.name for p in parameters] == ["self", "dataset"] and parameters[1].default is None, changed(
        f"GRPOTrainer._get_train_sampler{inspect.signature(GRPOTrainer._get_train_sampler)}",
        "_get_train_sampler(self, dataset=None) returning the training DataLoader's sampler")
    assert "sampler_fn=self._get_train_sampler" in source(GRPOTrainer.get_train_dataloader), changed(
        "GRPOTrainer.get_train_dataloader", "its DataLoader taking its sampler from self._get_train_sampler")
    # the layout the override reproduces: RepeatSampler with these settings
    sampler = source(GRPOTrainer._get_train_sampler)
    for setting in ("mini_repeat_count=self.num_generations",
                    "batch_size=self.args.generation_batch_size // self.num_generations",
                    "repeat_count=self.num_iterations * self.args.steps_per_generation"):
        assert setting in sampler, changed("GRPOTrainer._get_train_sampler's RepeatSampler", setting)


def test_the_settings_the_sampler_reads_are_there():
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    for name in ("generation_batch_size", "steps_per_generation", "num_generations", "num_iterations"):
        assert name in fields, changed("GRPOConfig", f"its field {name}")
    init = source(GRPOTrainer.__init__)
    for attribute in ("self.num_generations = args.num_generations", "self.num_iterations = args.num_iterations",
                      "self.rollout_func = rollout_func"):
        assert attribute in init, changed("GRPOTrainer.__init__", f"`{attribute}`")


def test_rollout_func_gets_the_prompts_of_the_batch_training_step_saw():
    parameters = inspect.signature(GRPOTrainer.__init__).parameters
    assert "rollout_func" in parameters, changed("GRPOTrainer(...)", "its rollout_func argument")
    step = inspect.signature(GRPOTrainer.training_step)
    assert list(step.parameters)[:3] == ["self", "model", "inputs"], changed(
        f"GRPOTrainer.training_step{step}", "training_step(self, model, inputs, num_items_in_batch)")
    from transformers import Trainer

    assert "inputs = self._prepare_inputs(inputs)" in source(Trainer.training_step), changed(
        "transformers' Trainer.training_step", "it preparing (generating for) the very inputs it is given")
    assert "self._generate_and_score_completions(generation_batch)" in source(GRPOTrainer._prepare_inputs), changed(
        "GRPOTrainer._prepare_inputs", "it generating for the generation batch it is given")
    assert 'prompts = [x["prompt"] for x in inputs]' in source(GRPOTrainer._generate_and_score_completions), \
        changed("GRPOTrainer._generate_and_score_completions", "the prompts being the inputs' prompts, in order")
    assert "self.rollout_func(prompts, self)" in source(GRPOTrainer._generate), changed(
        "GRPOTrainer._generate", "rollout_func(prompts, trainer) with the prompts in the inputs' order")


def test_the_scored_batch_segment_batch_rebuilds_is_trls():
    # CoevolveGRPOTrainer._generate_and_score_completions hands TRL's scored batch to segment_batch
    # (trainers/trl_grpo/episodes.py), which rebuilds it with a row per token segment: it relies on the method's
    # signature, on the batch's keys and on the trainer members it reads to recompute log-probabilities
    score = inspect.signature(GRPOTrainer._generate_and_score_completions)
    assert list(score.parameters) == ["self", "inputs"], changed(
        f"GRPOTrainer._generate_and_score_completions{score}", "_generate_and_score_completions(self, inputs)")
    logps = list(inspect.signature(GRPOTrainer._get_per_token_logps_and_entropies).parameters)
    assert logps[:6] == ["self", "model", "input_ids", "attention_mask", "logits_to_keep", "batch_size"], changed(
        f"GRPOTrainer._get_per_token_logps_and_entropies{tuple(logps)}",
        "(model, input_ids, attention_mask, logits_to_keep, batch_size) returning the log-probabilities first")
    trainer = source(GRPOTrainer)
    for key in ('"prompt_ids"', '"prompt_mask"', '"completion_ids"', '"completion_mask"', '"tool_mask"',
                '"advantages"', '"num_items_in_batch"', '"old_per_token_logps"', '"ref_per_token_logps"',
                '"sampling_per_token_logps"'):
        assert key in trainer, changed("GRPOTrainer's scored batch", f"its key {key}")
    for member in ("self.pad_to_multiple_of", "self.mask_truncated_completions", "self.eos_token_ids",
                   "self._tokenizer", "self.ref_model"):
        assert member in trainer, changed("GRPOTrainer", f"the member {member}")
