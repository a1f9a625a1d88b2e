"""One exported row per task, in the layouts verl and OpenRLHF read.

verl (``verl.utils.dataset.rl_dataset.RLHFDataset`` reads Parquet with ``datasets``; the layout follows
verl's ``examples/data_preprocess/*.py``):

    data_source   "coevolve/<env>"; verl's reward dispatch and metrics group by it
    prompt        the chat messages to start from: [{"role": "user", "content": <task prompt>}]
    ability       "agent"
    reward_model  {"style": "rule", "ground_truth": <task_id>}: verl copies ground_truth into every rollout
                  dump line (``gts``), which is how an imported dump finds its task again
    extra_info    {"index", "task_id", "env", "weight", "split", "spec" (the task's spec, JSON text),
                   "interaction_kwargs": {"name", "task_id", "env", "spec"},
                   "tools_kwargs": {<tool>: {"create_kwargs": {"task_id", "env", "spec"}}} (only with tools)}

OpenRLHF (``--prompt_data`` / ``--data.prompt_dataset`` a JSONL file, ``--input_key input --label_key label
--apply_chat_template``; its ``PromptDataset`` reads the input key, the label key and ``datasource``):

    input         the chat messages, as for verl
    label         JSON text {"task_id", "env", "spec"}: what OpenRLHF hands the reward function as ``labels``
    datasource    "coevolve/<env>"
    task_id, index, weight   kept for the sampler and the importer (OpenRLHF ignores extra keys)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ExportTask:
    """A task as it leaves the store: its spec is the stored JSON text, untouched."""

    task_id: str
    env: str | None
    prompt: str | None
    spec: str | None  # JSON text exactly as stored
    weight: float


def data_source(task: ExportTask) -> str:
    return f"coevolve/{task.env or 'unknown'}"


def prompt_messages(task: ExportTask) -> list[dict[str, str]]:
    return [{"role": "user", "content": task.prompt or ""}]


def _spec_object(task: ExportTask) -> Any:
    return json.loads(task.spec) if task.spec is not None else None


def verl_row(
    task: ExportTask, index: int, *, split: str = "train", interaction: str | None = "coevolve",
    tools: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One row of verl's RL dataset for ``task`` at position ``index``."""
    handle = {"task_id": task.task_id, "env": task.env, "spec": task.spec}
    extra_info: dict[str, Any] = {
        "index": index,
        "task_id": task.task_id,
        "env": task.env,
        "weight": task.weight,
        "split": split,
        "spec": task.spec,
    }
    if interaction:
        extra_info["interaction_kwargs"] = {"name": interaction, **handle}
    if tools:
        extra_info["need_tools_kwargs"] = True
        extra_info["tools_kwargs"] = {tool: {"create_kwargs": dict(handle)} for tool in tools}
    return {
        "data_source": data_source(task),
        "prompt": prompt_messages(task),
        "ability": "agent",
        "reward_model": {"style": "rule", "ground_truth": task.task_id},
        "extra_info": extra_info,
    }


def openrlhf_label(task: ExportTask) -> str:
    """The label OpenRLHF passes to the reward function: task id, environment and the spec."""
    return json.dumps({"task_id": task.task_id, "env": task.env, "spec": _spec_object(task)}, ensure_ascii=False)


def openrlhf_record(task: ExportTask, index: int) -> dict[str, Any]:
    """One JSON line of an OpenRLHF prompt dataset for ``task``."""
    return {
        "input": prompt_messages(task),
        "label": openrlhf_label(task),
        "datasource": data_source(task),
        "task_id": task.task_id,
        "index": index,
        "weight": task.weight,
    }
