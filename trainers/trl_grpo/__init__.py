"""The ``trl-grpo`` trainer: TRL's GRPOTrainer drawing weighted GRPO groups and writing rollouts to the store."""

from .trainer import TRLGRPOConfig, TRLGRPOTrainer

__all__ = ["TRLGRPOConfig", "TRLGRPOTrainer"]
