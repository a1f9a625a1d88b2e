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

    For a task whose environment is installed, the row is the episode's opening as the episode player plays it
    (``episode_opening``): ``prompt`` is the system prompt and first user turn, ``extra_info.tools`` the tool
    schemas shown at it (JSON text), ``tools_kwargs`` names every function the episode can show
    (``{<function>: {"create_kwargs": {"task_id"}}}``), and ``agent_name`` the verl agent loop that plays the
    whole episode (``coevolve_engine.trainers.verl_bfcl``).

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

from coevolve_engine.adapters.agents.player import Play


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


@dataclass(frozen=True)
class EpisodeOpening:
    """How an episode of a task starts in the episode player, and every function it can show."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    functions: list[dict[str, Any]]  # the schemas of every turn, first shown first


def episode_opening(environment: Any, task: ExportTask) -> EpisodeOpening:
    """Start an episode of ``task`` in the episode player, read its opening, then walk its turns (no answers) for
    the functions later turns release."""
    play = Play(environment.start(task.task_id, _spec_object(task)), task_id=task.task_id)
    episode = play.episode
    try:
        if play.done:
            raise ValueError(play.rollout.error or play.rollout.reason)
        functions = {tool["function"]["name"]: tool for tool in play.tools}
        while episode.next_turn() is not None:
            functions.update({tool["function"]["name"]: tool for tool in episode.tools()
                              if tool["function"]["name"] not in functions})
        return EpisodeOpening([dict(m) for m in play.messages], play.tools, list(functions.values()))
    finally:
        episode.close()


def verl_row(
    task: ExportTask, index: int, *, split: str = "train", interaction: str | None = "coevolve",
    tools: tuple[str, ...] = (), opening: EpisodeOpening | None = None, agent_loop: str | None = None,
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
    elif opening is not None:
        extra_info["need_tools_kwargs"] = True
        extra_info["tools_kwargs"] = {tool["function"]["name"]: {"create_kwargs": {"task_id": task.task_id}}
                                      for tool in opening.functions}
    row = {
        "data_source": data_source(task),
        "prompt": opening.messages if opening is not None else prompt_messages(task),
        "ability": "agent",
        "reward_model": {"style": "rule", "ground_truth": task.task_id},
        "extra_info": extra_info,
    }
    if opening is not None:
        extra_info["tools"] = json.dumps(opening.tools, ensure_ascii=False)
        row["agent_name"] = agent_loop
    return row


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
