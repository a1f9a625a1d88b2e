"""What verl needs besides the data to play whole episodes: the tool, interaction and agent-loop configs, and the
command that uses them (``coevolve_engine.trainers.verl_bfcl`` holds the classes they name).

The configs are written as JSON, which is YAML too (verl reads them with OmegaConf):

    tool_config.json         {"tools": [{"class_name": ...EpisodeTool, "config": {"type": "native"},
                                          "tool_schema": <the environment's schema>}, ...]}  one per function
    interaction_config.json  {"interaction": [{"name": "coevolve", "class_name": ...EpisodeInteraction,
                                                "config": {}}]}
    agent_loop.json          [{"name": "coevolve_episode", "_target_": ...EpisodeAgentLoop,
                               "interaction_config_path": <interaction_config.json>}]
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.outputs import write_output
from coevolve_engine.trainers.export.layouts import episode_opening
from coevolve_engine.trainers.export.weights import ExportError

if TYPE_CHECKING:
    from coevolve_engine.trainers.export.layouts import EpisodeOpening, ExportTask
    from coevolve_engine.trainers.export.verl_lengths import VerlLengths

logger = logging.getLogger(__name__)

MODULE = "coevolve_engine.trainers.verl_bfcl"
AGENT_LOOP = "coevolve_episode"  # the name agent_loop.json gives verl_bfcl.EpisodeAgentLoop; rows name it
FILES = {"tools": "tool_config.json", "interaction": "interaction_config.json", "agent_loop": "agent_loop.json"}


def episode_openings(tasks: list["ExportTask"], environments: dict[str, object] | None = None
                     ) -> dict[str, "EpisodeOpening"]:
    """Each task's episode opening, for the tasks whose environment this install can load (others keep the
    task's prompt alone, as a single-turn row); ``environments`` (by name) is filled with those loaded."""
    environments = {} if environments is None else environments
    openings = {}
    for task in tasks:
        name = task.env or ""
        if name not in environments:
            try:
                environments[name] = load_environment(name)
            except Exception as exc:  # noqa: BLE001 - unknown or not installed: those rows stay single-turn
                logger.warning("export: environment %r cannot be loaded (%s); its tasks keep their prompt only",
                               name, exc)
                environments[name] = None
        if environments[name] is None:
            continue
        try:
            openings[task.task_id] = episode_opening(environments[name], task)
        except Exception as exc:  # noqa: BLE001 - a spec the environment refuses
            raise ExportError(f"task {task.task_id!r}: its {name} episode cannot start: {exc}") from None
    return openings


def write_verl_files(out_dir: Path, openings: list["EpisodeOpening"], interaction: str, *, db: Path | None,
                     force: bool = False, max_new_tokens: int | None = None) -> dict[str, Path]:
    """Write the three configs into ``out_dir``; returns their paths by kind. ``max_new_tokens``: the agent loop's
    cap on the tokens of each answer (verl's own loop has none: one answer may take the whole response)."""
    paths = {kind: out_dir / name for kind, name in FILES.items()}
    functions: dict[str, dict] = {}
    for opening in openings:
        for tool in opening.functions:
            functions.setdefault(tool["function"]["name"], tool)
    tools = {"tools": [{"class_name": f"{MODULE}.EpisodeTool", "config": {"type": "native"}, "tool_schema": schema}
                       for _, schema in sorted(functions.items())]}
    interactions = {"interaction": [{"name": interaction, "class_name": f"{MODULE}.EpisodeInteraction",
                                     "config": {}}]}
    loops = [{"name": AGENT_LOOP, "_target_": f"{MODULE}.EpisodeAgentLoop",
              "interaction_config_path": str(paths["interaction"]),
              **({"max_new_tokens": max_new_tokens} if max_new_tokens else {})}]
    for kind, content in (("tools", tools), ("interaction", interactions), ("agent_loop", loops)):
        write_output(paths[kind], json.dumps(content, indent=1, ensure_ascii=False) + "\n", "json", db=db,
                     force=force)
    return paths


def verl_command(data_file: Path, files: dict[str, Path], lengths: "VerlLengths | None" = None) -> str:
    """A verl command that plays the exported episodes: the configs, the reward function, the data and the lengths
    measured on it (``verl_lengths``); the hyperparameters (docs/trainers.md, "verl and OpenRLHF") and MODEL,
    ROLLOUTS and the GPUs are the user's."""
    lines = [
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo",
        f"data.train_files={data_file} data.val_files={data_file} trainer.val_before_train=False",
        *([" ".join(lengths.overrides()[:2]), lengths.overrides()[2]] if lengths is not None else []),
        "actor_rollout_ref.model.path=MODEL actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.rollout.multi_turn.enable=True",
        # thinking off: verl keeps one sequence per episode, so it cannot show a policy the contexts a template that
        # drops earlier turns' reasoning re-renders (the agent loop refuses thinking on; verl_tokens)
        "+data.apply_chat_template_kwargs.enable_thinking=False",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={files['tools']}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={files['agent_loop']}",
        f"reward.custom_reward_function.path=pkg://{MODULE} reward.custom_reward_function.name=compute_score",
        "trainer.rollout_data_dir=ROLLOUTS trainer.n_gpus_per_node=8 trainer.nnodes=1",
    ]
    return " \\\n  ".join(lines)
