"""Trainers: the contract between the engine and whatever trains the policy.

    from coevolve_engine.trainers import TRAINERS, BatchSource, StoreSink
    trainer_cls = TRAINERS.load("trl-grpo")

Nothing heavy is imported here: torch, transformers and TRL load when a trainer is looked up.
"""

from coevolve_engine.core.registry import Registry

from .base import BatchSource, StoreSink, TrainContext, Trainer, TrainReport, TrajectorySink, group_records

TRAINERS = Registry(
    "trainer", entry_point_group="coevolve_engine.trainers",
    unknown_hint=("A trainer implements the contract coevolve_engine.trainers.base.Trainer and comes from a package "
                  "that declares it in the entry-point group coevolve_engine.trainers (pip install it); see "
                  "docs/trainers.md and examples/frozen-trainer"))
TRAINERS.register(
    "trl-grpo",
    "coevolve_engine.trainers.trl_grpo:TRLGRPOTrainer",
    install_hint='pip install "coevolve-engine[local]" "trl>=1.16"',
    requires=("torch", "transformers", "trl"),
    description="TRL's GRPOTrainer in process; tool calls run in the task's environment through environment_factory",
)
TRAINERS.register(
    "sft",
    "coevolve_engine.trainers.sft:RFTTrainer",
    install_hint='pip install "coevolve-engine[local]" "trl>=1.16"',
    requires=("torch", "transformers", "trl"),
    description="rejection-sampling fine-tuning: TRL's SFTTrainer on the store's successful trajectories "
                "(e.g. reference demonstrations), a warm-up before GRPO",
)

__all__ = [
    "TRAINERS",
    "BatchSource",
    "StoreSink",
    "TrainContext",
    "TrainReport",
    "Trainer",
    "TrajectorySink",
    "group_records",
]
