"""Agents: policies that play environment episodes and return rollouts.

    from coevolve_engine.adapters.agents import load_agent, run_rollouts
    from coevolve_engine.core.endpoint import Endpoint
    served = Endpoint("hosted_vllm/Qwen/Qwen3-8B", api_base="http://127.0.0.1:8000/v1")
    agent = load_agent(served, {"temperature": 0.9})
    rollouts = run_rollouts(env, tasks, agent, group_size=8, concurrency=4, step=0, on_rollout=sink)

Nothing heavy is imported here: litellm, torch and transformers load when an agent first needs them.
"""

from pathlib import Path
from typing import Any, Mapping

from coevolve_engine.core.endpoint import Endpoint
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.core.registry import PluginContext, Registry

from .base import Agent, AgentFault, AgentOptions, EpisodeLimits, ModelReply
from .player import Play, play_all, run_episode, run_task, start_play
from coevolve_engine.core.rollout import STOPS, Rollout, Usage
from .runner import default_group_id, run_rollouts
from ..calls import ParsedCall, parse_arguments, parse_tool_call_text

AGENTS = Registry("agent", entry_point_group="coevolve_engine.agents")
AGENTS.register(
    "litellm",
    "coevolve_engine.adapters.agents.litellm_agent:LiteLLMAgent",
    install_hint='pip install "coevolve-engine[agents]"',
    requires=("litellm",),
    description="any model litellm can call: hosted APIs, vLLM and other OpenAI-compatible servers",
)
AGENTS.register(
    "local",
    "coevolve_engine.adapters.agents.local_agent:LocalAgent",
    install_hint='pip install "coevolve-engine[local]"',
    requires=("torch", "transformers"),
    description="a transformers causal LM from a local path, run in process",
)
AGENTS.register(
    "reference",
    "coevolve_engine.adapters.agents.reference_agent:ReferenceAgent",
    install_hint="pip install coevolve-engine",
    description="plays the environment's reference solution; demonstrations for SFT warm-up and sanity checks",
)



def agent_kind(model: str) -> str:
    """Which registered agent plays ``model``: "reference", a local model directory, or any other model string
    (litellm)."""
    if model == "reference":
        return "reference"
    return "local" if Path(model).is_dir() else "litellm"


def load_agent(model: Endpoint | str, options: Mapping[str, Any] | None = None,
               context: PluginContext | None = None) -> Agent:
    """The agent that plays ``model`` (a model string, or an ``Endpoint``: a served model with its server and
    key), built through ``AGENTS`` from ``AgentOptions`` (the other fields)."""
    where = model.request() if isinstance(model, Endpoint) else {"model": model}
    try:
        return AGENTS.build(agent_kind(where["model"]), {**dict(options or {}), **where}, context)
    except (TypeError, ValueError, ImportError, OSError) as exc:  # TypeError: an option no agent takes
        raise CoevolveError(f"cannot use model {where['model']!r}: {exc}") from exc


__all__ = [
    "AGENTS",
    "Agent",
    "AgentFault",
    "AgentOptions",
    "EpisodeLimits",
    "ModelReply",
    "ParsedCall",
    "Play",
    "Rollout",
    "STOPS",
    "Usage",
    "agent_kind",
    "default_group_id",
    "load_agent",
    "parse_arguments",
    "parse_tool_call_text",
    "play_all",
    "run_episode",
    "run_rollouts",
    "run_task",
    "start_play",
]
