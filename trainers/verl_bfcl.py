"""Multi-turn episodes of the store's environments (BFCL first) in verl's agent loop, scored by the project.

Importable only where verl is installed (checked against verl 0.9.1 by ``bench/verl_check.py``). ``coevolve-engine
export --layout verl`` writes the files that name what is here:

- ``compute_score`` is the reward function (``reward.custom_reward_function.path=pkg://coevolve_engine.trainers.
  verl_bfcl``): it replays the episode's answers, in order, through the episode player (``adapters.agents.player``)
  on a fresh episode of the task, so the verdict is the environment's checker's (for BFCL its multi-turn
  checker), the one ``eval`` gives on the same answers. It returns the score and, as reward extras that verl
  writes into every rollout dump line, the task, the draw's ``uid``, the turns reached, the stop, and the chat
  and tool calls as JSON text: what ``import-rollouts`` reads back.
- ``EpisodeInteraction`` gives the next user turn and the tools released at it (verl's Interaction interface of
  0.4 - 0.6: ``start_interaction``, ``generate_response``, ``calculate_score``, ``finalize_interaction``; verl
  0.9 dropped interactions from its own loop, so ``interaction_config.yaml`` is read by the agent loop below).
  It plays each answer through the episode player: the player's turn rules hold, wherever they change.
- ``EpisodeTool`` is a verl tool (``verl.tools.base_tool.BaseTool``; ``tool_config.yaml`` lists one per function
  the exported tasks can show, with the environment's own schema) that runs a call on the episode of its
  trajectory: one environment instance per episode, created when the interaction starts it.
- ``EpisodeAgentLoop`` (``agent_loop.yaml`` registers it as ``coevolve_episode``) is verl's ``ToolAgentLoop`` playing
  a whole episode: it generates with verl's server manager from the ids the token path builds (``verl_tokens``:
  the same ``ChatTokens`` as trl-grpo and ``eval``, so the policy reads the same ids at every model call; released
  functions in front of their turn's user message; response mask 1 on generated tokens only), hands each answer
  to the interaction (decoded as BFCL's handler for the policy's family decodes it) and appends the tool results
  and the next user turn (mask 0) until the episode is over or ``response_length`` is reached. A chat template
  that drops earlier turns' reasoning (Qwen3 with thinking on) is refused with a message: verl returns one
  sequence per episode and cannot carry the re-rendered contexts. Each request asks for at most
  ``max_new_tokens`` (agent_loop.json; trl-grpo's per-answer cap) within what is left of ``response_length``, and
  an opening longer than ``prompt_length`` is refused, not left-truncated as verl's own loops do
  (``coevolve-engine export`` measures both lengths on the data).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from typing import Any
from uuid import uuid4

if importlib.util.find_spec("verl") is None:  # pragma: no cover - the project's own venv has no verl
    raise ModuleNotFoundError(
        "coevolve_engine.trainers.verl_bfcl runs inside verl; install verl (python bench/verl_check.py --venv DIR "
        "--install builds a virtual environment with it)", name="verl")

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import ToolResponse
from verl.utils.import_utils import load_extern_object, resolve_config_path

from coevolve_engine.adapters.agents.base import ModelReply
from coevolve_engine.adapters.agents.player import Play
from coevolve_engine.adapters.agents.answer_format import answer_decoder
from coevolve_engine.adapters.agents.chat_tokens import tool_name
from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.environment import Episode, Observation, ToolCall
from coevolve_engine.core.rollout import STOP_MAX_TOKENS, Rollout
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.trainers.export.verl_files import AGENT_LOOP
from coevolve_engine.trainers.verl_tokens import ThinkingOnRefused, episode_chat, play_tokens  # noqa: F401 - exported

INTERACTION = "coevolve"
ANSWERS = "coevolve_answers"  # extra field: the model's answers (decoded text), JSON list, in order
POLICY = "verl"

_EPISODES: dict[str, Episode] = {}  # interaction instance id -> the episode its tools act on
_LOCK = threading.Lock()


class VerlEpisodeError(CoevolveError):
    """A rollout the reward function cannot score (it did not come from the coevolve agent loop)."""




def reply_from_text(text: str, family: str = "qwen") -> ModelReply:
    """An answer's text as the token path decodes it: as BFCL's handler for the policy's family does
    (``answer_format``; the agent loop refuses templates of no known family, so its answers are Qwen's)."""
    return answer_decoder(family)(text)


def start_play(task_id: str, spec: Any, env: str | None, *, instance_id: str | None = None,
               tools: dict[str, "EpisodeTool"] | None = None) -> Play:
    """A fresh episode of the task in the episode player; with ``tools`` its calls run through those verl tools."""
    spec = json.loads(spec) if isinstance(spec, str) else spec
    episode = load_environment(env or "bfcl").start(task_id, spec)
    if tools is not None and instance_id is not None:
        with _LOCK:
            _EPISODES[instance_id] = episode
        episode = _ToolRouted(episode, instance_id, tools)
    return Play(episode, task_id=task_id, policy=POLICY)


def replay(task_id: str, spec: Any, env: str | None, answers: list[str]) -> Rollout:
    """The rollout the episode player makes of these answers, in order; answers that run out before the episode
    is over (verl's response_length cut it short) end it as a failure, stop "max_tokens"."""
    play = start_play(task_id, spec, env)
    for text in answers:
        if play.done:
            break
        play.answer(reply_from_text(text))
    if not play.done:
        play.stop(STOP_MAX_TOKENS, "the episode ran past verl's response_length")
    return play.finish()


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's ``custom_reward_function``: the environment's verdict on the episode's answers (see the module doc)."""
    extra_info = extra_info or {}
    if ANSWERS not in extra_info:
        raise VerlEpisodeError(
            f"rollout of {ground_truth!r} ({data_source}) has no {ANSWERS}: play coevolve's exported data with the "
            f"{AGENT_LOOP} agent loop (actor_rollout_ref.rollout.agent.agent_loop_config_path=EXPORT/agent_loop.yaml)")
    task_id = extra_info.get("task_id") or ground_truth
    rollout = replay(task_id, extra_info["spec"], extra_info.get("env"), json.loads(extra_info[ANSWERS]))
    return {
        "score": float(rollout.reward),
        "task_id": task_id,
        "uid": str(extra_info.get("uid") or ""),
        "turns": rollout.turns,
        "success": rollout.success,
        "stop": rollout.stop,
        "reason": rollout.reason,
        "messages": json.dumps(rollout.messages, ensure_ascii=False),
        "actions": json.dumps(rollout.actions, ensure_ascii=False),
    }


# -- tools ---------------------------------------------------------------------------------------------------------

class EpisodeTool(BaseTool):
    """One environment function as a verl tool; ``instance_id`` is the interaction's, naming the episode."""

    def __init__(self, config: dict, tool_schema):
        self.config, self.tool_schema, self.name = config, tool_schema, tool_schema.function.name  # no print
        self.calls = 0  # calls this tool ran (on any episode)

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        if instance_id not in _EPISODES:
            raise VerlEpisodeError(f"tool {self.name}: no episode {instance_id!r} (the interaction starts it)")
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any):
        self.calls += 1
        observation = self.run(instance_id, parameters, kwargs.get("call_id"))
        return ToolResponse(text=observation.content), 0.0, {"error": observation.error}

    def run(self, instance_id: str, parameters: dict[str, Any], call_id: str | None = None) -> Observation:
        return _EPISODES[instance_id].execute(ToolCall(self.name, parameters, call_id))


class _ToolRouted(Episode):
    """An episode whose calls go through the verl tools (``create``/``execute``/``release``), on the event loop
    of the agent loop when there is one."""

    def __init__(self, inner: Episode, instance_id: str, tools: dict[str, EpisodeTool]) -> None:
        self.inner, self.instance_id, self.verl_tools = inner, instance_id, tools
        self.task_id = getattr(inner, "task_id", None)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.tool_calls = 0

    def system_prompt(self):
        return self.inner.system_prompt()

    def next_turn(self):
        return self.inner.next_turn()

    def tools(self):
        return self.inner.tools()

    def end_turn(self, reply):
        return self.inner.end_turn(reply)

    def score(self):
        return self.inner.score()

    def close(self):
        with _LOCK:
            _EPISODES.pop(self.instance_id, None)
        return self.inner.close()

    def execute(self, call: ToolCall) -> Observation:
        tool = self.verl_tools.get(call.name)
        if tool is None:  # not a declared function: the environment refuses it as it refuses any unknown name
            return self.inner.execute(call)
        self.tool_calls += 1
        coroutine = self._through_tool(tool, call)
        if self.loop is None:
            return asyncio.run(coroutine)
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _through_tool(self, tool: EpisodeTool, call: ToolCall) -> Observation:
        instance_id, _ = await tool.create(self.instance_id)
        try:
            response, _, metrics = await tool.execute(instance_id, call.arguments, call_id=call.call_id)
        finally:
            await tool.release(instance_id)
        return Observation(response.text or "", metrics.get("error"))


# -- the interaction -------------------------------------------------------------------------------------------------

class EpisodeInteraction:
    """The user side of an episode: the next user turn and the functions released at it (see the module doc)."""

    def __init__(self, config: dict | None = None) -> None:
        self.config = dict(config or {})
        self.name = self.config.get("name", INTERACTION)
        self._plays: dict[str, Play] = {}

    async def start_interaction(self, instance_id: str | None = None, *, task_id: str, spec: Any,
                                env: str | None = None, tools: dict[str, EpisodeTool] | None = None,
                                **kwargs: Any) -> str:
        instance_id = instance_id or uuid4().hex
        self._plays[instance_id] = start_play(task_id, spec, env, instance_id=instance_id, tools=tools or {})
        return instance_id

    def play(self, instance_id: str) -> Play:
        """The episode in play: its chat so far, the tools shown now, whether it is over."""
        return self._plays[instance_id]

    async def answer(self, instance_id: str, text: str) -> list[dict[str, Any]]:
        """Play one answer; the messages it added after the assistant's (tool results, the next user turn)."""
        play = self._plays[instance_id]
        episode = play.episode
        if isinstance(episode, _ToolRouted):
            episode.loop = asyncio.get_running_loop()
        before = len(play.messages)
        await asyncio.get_running_loop().run_in_executor(None, play.answer, reply_from_text(text))
        return [dict(m) for m in play.messages[before + 1:]]

    async def generate_response(self, instance_id: str, messages: list[dict[str, Any]] | None = None,
                                **kwargs: Any) -> tuple[bool, str, float, dict[str, Any]]:
        """verl's Interaction contract: (episode over, next user message, score, the tools shown now)."""
        play = self._plays[instance_id]
        if play.done:
            return True, "", float(play.rollout.reward), {"turn": play.turn}
        users = [m for m in play.messages if m.get("role") == "user"]
        return False, users[-1]["content"] if users else "", 0.0, {"turn": play.turn, "tools": play.tools}

    def done(self, instance_id: str) -> bool:
        return self._plays[instance_id].done

    def stop(self, instance_id: str, stop: str, reason: str) -> None:
        self._plays[instance_id].stop(stop, reason)

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        play = self._plays[instance_id]
        return float(play.rollout.reward) if play.done else 0.0

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> Rollout | None:
        play = self._plays.pop(instance_id, None)
        if play is None:
            return None
        if not play.done:
            play.stop(STOP_MAX_TOKENS, "the episode ran past verl's response_length")
        return play.finish()


def load_interactions(path: str | None) -> dict[str, EpisodeInteraction]:
    """The interactions an ``interaction_config.yaml`` names (verl's format: ``interaction: [{name, class_name,
    config}]``); without a file, the project's own under its default name."""
    if not path:
        return {INTERACTION: EpisodeInteraction({"name": INTERACTION})}
    found = {}
    for entry in OmegaConf.to_container(OmegaConf.load(resolve_config_path(path)))["interaction"]:
        module, _, name = entry["class_name"].rpartition(".")
        cls = load_extern_object(module_path=f"pkg://{module}", object_name=name)
        found[entry.get("name", INTERACTION)] = cls({"name": entry.get("name", INTERACTION), **entry.get("config", {})})
    return found


# -- the agent loop --------------------------------------------------------------------------------------------------

@register(AGENT_LOOP)
class EpisodeAgentLoop(ToolAgentLoop):
    """verl's tool agent loop, playing whole episodes with the interaction and the tools (see the module doc)."""

    def __init__(self, *args: Any, interaction_config_path: str | None = None, max_new_tokens: int | None = None,
                 **kwargs: Any) -> None:
        kwargs.pop("name", None)  # the agent loop config's own name
        super().__init__(*args, **kwargs)
        self.interactions = load_interactions(interaction_config_path)
        self.max_new_tokens = max_new_tokens  # per answer, as trl-grpo caps each (agent_loop.json; None: no cap)

    def _cap_text_prompt_length(self, prompt_ids: list[int]) -> list[int]:
        """verl left-truncates an opening longer than prompt_length with a warning; a cut opening is another
        task, so it is refused (``export`` measures data.max_prompt_length on the exported openings)."""
        if len(prompt_ids) > self.prompt_length:
            raise VerlEpisodeError(f"an episode opening of {len(prompt_ids)} tokens exceeds data.max_prompt_length="
                                   f"{self.prompt_length}: verl would cut it; use the lengths `coevolve-engine export` "
                                   "printed for this data and this tokenizer (--tokenizer)")
        return prompt_ids

    def _answer_params(self, sampling_params: dict[str, Any], used: int) -> dict[str, Any]:
        """The request's sampling parameters with its token cap: the per-answer cap within what is left of
        response_length."""
        if not self.max_new_tokens:
            return sampling_params
        return {**sampling_params, "max_tokens": max(1, min(self.max_new_tokens, self.response_length - used))}

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra_info = dict(kwargs.get("extra_info") or {})
        handle = dict(kwargs.get("interaction_kwargs") or extra_info.get("interaction_kwargs") or {})
        name = handle.pop("name", INTERACTION)
        if name not in self.interactions:
            raise VerlEpisodeError(f"no interaction {name!r} (interaction config names {sorted(self.interactions)})")
        interaction = self.interactions[name]
        handle.setdefault("task_id", extra_info.get("task_id"))
        handle.setdefault("spec", extra_info.get("spec"))
        handle.setdefault("env", extra_info.get("env"))
        chat = episode_chat(self.tokenizer, self.apply_chat_template_kwargs)  # refuses thinking on, saying why
        request_id = uuid4().hex
        instance_id = await interaction.start_interaction(request_id, tools=self.tools, **handle)

        async def generate(prompt_ids: list[int], used: int) -> tuple[list[int], list[float] | None]:
            if not used:  # the episode's opening: refused when verl would cut it
                self._cap_text_prompt_length(prompt_ids)
            output = await self.server_manager.generate(request_id=request_id, prompt_ids=prompt_ids,
                                                        sampling_params=self._answer_params(sampling_params, used))
            return list(output.token_ids), (list(output.log_probs) if output.log_probs else None)

        try:
            played = await play_tokens(interaction.play(instance_id), chat,
                                       lambda text: interaction.answer(instance_id, text), generate,
                                       response_length=self.response_length)
        finally:
            rollout = await interaction.finalize_interaction(instance_id)
        tokens, limit = played.tokens, self.response_length
        released = [tool_name(tool) for tools in tokens.releases.values() for tool in tools]
        return AgentLoopOutput(
            prompt_ids=tokens.prompt_ids, response_ids=tokens.completion_ids[:limit], response_mask=tokens.mask[:limit],
            response_logprobs=tokens.logprobs[:limit] if played.logprobs else None,
            num_turns=len(rollout.messages) if rollout else 0, metrics={},
            extra_fields={ANSWERS: json.dumps(played.answers, ensure_ascii=False), "uid": str(kwargs.get("uid") or ""),
                          "request_id": request_id, "coevolve_turns": rollout.turns if rollout else 0,
                          "coevolve_released": json.dumps(released)})
