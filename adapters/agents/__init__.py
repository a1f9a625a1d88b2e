"""Agents: policies that play environment episodes and return rollouts.

    from coevolve_engine.adapters.agents import AGENTS, run_rollouts
    agent = AGENTS.load("litellm")("hosted_vllm/Qwen/Qwen3-8B", api_base="http://127.0.0.1:8000/v1")
    rollouts = run_rollouts(env, tasks, agent, k=8, concurrency=4, step=0, on_rollout=sink)

Nothing heavy is imported here: litellm, torch and transformers load when an agent first needs them.
"""

from coevolve_engine.registry import Registry

from .base import Agent, AgentFault, EpisodeLimits, ModelReply
from .player import Play, play_all, run_episode, run_task, start_play
from .rollout import STOPS, Rollout, Usage
from .runner import default_group_id, run_rollouts
from ..calls import ParsedCall, parse_arguments, parse_tool_call_text

AGENTS = Registry("agent", entry_point_group="coevolve_engine.agents")
AGENTS.register(
    "litellm",
    "coevolve_engine.adapters.agents.litellm_agent:LiteLLMAgent",
    install_hint='pip install "coevolve-engine[agents]"',
    description="any model litellm can call: hosted APIs, vLLM and other OpenAI-compatible servers",
)
AGENTS.register(
    "local",
    "coevolve_engine.adapters.agents.local_agent:LocalAgent",
    install_hint='pip install "coevolve-engine[local]"',
    description="a transformers causal LM from a local path, run in process",
)
AGENTS.register(
    "reference",
    "coevolve_engine.adapters.agents.reference_agent:ReferenceAgent",
    install_hint="pip install coevolve-engine",
    description="plays the environment's reference solution; demonstrations for SFT warm-up and sanity checks",
)

__all__ = [
    "AGENTS",
    "Agent",
    "AgentFault",
    "EpisodeLimits",
    "ModelReply",
    "ParsedCall",
    "Play",
    "Rollout",
    "STOPS",
    "Usage",
    "default_group_id",
    "parse_arguments",
    "parse_tool_call_text",
    "play_all",
    "run_episode",
    "run_rollouts",
    "run_task",
    "start_play",
]
