"""Where a local policy runs and in which precision, chosen in one place for training, evaluation and rollouts.

    from coevolve_engine.core.device import placement
    where = placement()            # Placement(device="cuda", dtype="bfloat16") on a GPU with bf16, else cpu/float32

The trl-grpo trainer trains in this precision (TRL's ``bf16``/``use_cpu`` follow it), and the run's eval phase,
``coevolve-engine eval`` and local agents load checkpoints onto this device in it, so a GPU machine evaluates
the policy where it trained it, with the same dtype, and a CPU machine stays in float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Placement:
    device: str  # "cuda" or "cpu"
    dtype: str  # a torch dtype's name: "bfloat16", "float16" or "float32"

    @property
    def torch_dtype(self) -> Any:
        import torch

        return getattr(torch, self.dtype)


def placement(use_cpu: bool | None = None) -> Placement:
    """The accelerator when there is one (bf16 where it supports it, else fp16), else the CPU in float32;
    ``use_cpu=True`` forces the CPU."""
    import torch

    if use_cpu or (use_cpu is None and not torch.cuda.is_available()):
        return Placement("cpu", "float32")
    return Placement("cuda", "bfloat16" if torch.cuda.is_bf16_supported() else "float16")


def load_policy(path: str, where: Placement | None = None) -> Any:
    """A transformers causal LM from ``path`` in ``where``'s dtype, on its device (default: ``placement()``)."""
    from transformers import AutoModelForCausalLM

    where = where or placement()
    return AutoModelForCausalLM.from_pretrained(str(path), dtype=where.torch_dtype).to(where.device)


def training_dtype() -> Any:
    """The dtype the trained policy loads in: float32 on every device.

    Mixed precision keeps fp32 master weights and computes in the placement's dtype: TRL's ``bf16``/``fp16``
    (accelerate's autocast) needs the parameters in fp32, and Adam's updates at the paper's learning rate (1e-6)
    vanish below bf16's resolution if the weights themselves are bf16. Under DeepSpeed ZeRO-3 the fp32 load is
    also what DeepSpeed wants: ``from_pretrained`` runs inside its ``zero.Init``, which partitions each tensor as
    it loads (no process holds the whole fp32 model), keeps the fp32 master shard in its optimizer and a 16-bit
    shard for forward and backward (``--mixed_precision bf16``). Per parameter and process that is 2 (bf16
    weights) + 2 (bf16 gradients) + 12 (fp32 master weights and two Adam moments) bytes, divided by the processes.
    The KL reference and the eval phase, which only read the weights, load in ``placement()``'s dtype."""
    import torch

    return torch.float32
