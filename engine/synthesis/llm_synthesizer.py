"""The LLM synthesizer: explore the environment around each failure pattern, then abstract tasks from it.

For a pattern, with its LLM summary (``summarize``) as guidance:

1. **Exploration.** An explorer model acts in a real episode of the environment, in the world of the
   pattern's closest member task (same classes, same initial state), driven by the prompt matched to the
   pattern's dominant signal: reinforce forgotten skills (``explore_forgetting``), explore boundary cases
   (``explore_boundary``) or explore rare scenarios (``explore_rare``). Every call it makes is executed.
2. **Abstraction.** A model turns the explored interaction into task drafts in the environment's own format
   (for BFCL: the user's turns, the ground-truth calls per turn, a completion criterion), validated against the
   environment's draft schema; each draft is set in the seed task's world as a candidate.

Every model call goes through ``LLMClient`` and so is logged (and cached) in ``llm_calls``. A pattern whose
exploration or abstraction fails still yields one candidate, carrying the failure as its ``synthesis_error``,
which validation rejects with that reason: nothing is lost silently.

``ExplorationSynthesizer`` holds what every LLM synthesizer shares (the two clients, one exploration episode
followed by the ``abstract`` prompt); the unguided synthesizer that bootstraps D_0
(``coevolve_engine.synthesis.bootstrap``) uses it with no pattern.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from coevolve_engine.adapters.agents.base import MAX_EXPLORE_STEPS, Agent, AgentFault, EpisodeLimits, ModelReply
from coevolve_engine.adapters.agents.litellm_agent import parse_completion, wire_messages
from coevolve_engine.errors import CoevolveError
from coevolve_engine.llm import LLMClient, LLMError
from coevolve_engine.prompts import Prompt, load_prompt
from coevolve_engine.core.candidates import Candidate, FailurePattern, Synthesizer
from coevolve_engine.registry import PluginContext

if TYPE_CHECKING:
    from coevolve_engine.core.rollout import Rollout
    from coevolve_engine.core.environment import Environment
    from coevolve_engine.store import Store

EXPLORE_PROMPTS = {"forgetting": "explore_forgetting", "boundary": "explore_boundary", "rare": "explore_rare"}
NAME = "llm"


class LoggedAgent(Agent):
    """An agent whose every model call goes through an ``LLMClient`` (logged in llm_calls, cached)."""

    def __init__(self, client: LLMClient, *, purpose: str, prompt_version: str, system_prompt: str | None,
                 max_steps: int) -> None:
        self.client = client
        self.purpose = purpose
        self.prompt_version = prompt_version
        self.system_prompt = system_prompt
        self.policy = client.model
        self.limits = EpisodeLimits(max_steps=max_steps, max_model_calls_per_turn=max_steps + 1)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        try:
            result = self.client.complete(self.purpose, self.prompt_version, wire_messages(messages), tools=tools)
        except LLMError as exc:
            raise AgentFault(str(exc)) from exc
        return parse_completion({"choices": [{"message": result.message}]})


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(str(v) for v in value) or "(none)"
    return str(value) if value not in (None, "") else "(none)"


def _render(prompt: Prompt, values: dict[str, Any]) -> list[dict[str, str]]:
    """Render with the values the prompt asks for (the synthesizer offers more than any one prompt uses)."""
    return prompt.render(**{name: values[name] for name in prompt.placeholders})


def render_exploration(rollout: "Rollout", limit: int = 6000) -> str:
    """The explored interaction as text: each executed call with the result it got."""
    lines: list[str] = []
    for message in rollout.messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                lines.append(f"CALL {function.get('name')}({function.get('arguments')})")
        elif message.get("role") == "tool":
            lines.append(f"  -> {str(message.get('content'))[:400]}")
    text = "\n".join(lines) or "(the explorer made no calls)"
    return text if len(text) <= limit else text[:limit] + "\n..."


def _tool_names(tools: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"- {t['function']['name']}({', '.join(t['function'].get('parameters', {}).get('properties', {}))}): "
        f"{(t['function'].get('description') or '').splitlines()[0][:120] if t['function'].get('description') else ''}"
        for t in tools
    )


class ExplorationFailed(CoevolveError):
    """Exploration or abstraction gave no task; ``stage`` says which ('exploration' or 'abstraction')."""

    def __init__(self, stage: str, error: str) -> None:
        super().__init__(f"{stage}: {error}")
        self.stage, self.error = stage, error


@dataclass(frozen=True)
class WrittenTask:
    """A task the abstraction wrote: its first user message, its spec in the seed's world, and provenance
    (carrying ``synthesis_error`` when the draft is flawed, e.g. too few calls)."""

    prompt: str
    spec: dict[str, Any]
    provenance: dict[str, Any]


class ExplorationSynthesizer(Synthesizer):
    """What every LLM synthesizer shares: the explorer and abstraction clients, and ``explore_and_abstract``
    (one exploration episode in a world, then the ``abstract`` prompt turning it into task drafts)."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: PluginContext) -> "ExplorationSynthesizer":
        """Built with the store the run reads (``store_path``), unless the options name one."""
        return cls(**{"store_path": context.store_path, **options})

    def __init__(self, *, store_path: str | Path, model: str, explorer_model: str | None = None,
                 api_base: str | None = None, api_key: str | None = None, explorer_api_base: str | None = None,
                 max_explore_steps: int = MAX_EXPLORE_STEPS, min_calls: int = 3, temperature: float = 0.7,
                 timeout: float = 60.0, retries: int = 2, cache: bool = True) -> None:
        common = dict(temperature=temperature, timeout=timeout, retries=retries, cache=cache)
        self.client = LLMClient(store_path, model, api_base=api_base, api_key=api_key, **common)
        self.explorer = LLMClient(store_path, explorer_model or model, api_base=explorer_api_base or api_base,
                                  api_key=api_key, **common)
        self.max_explore_steps = max_explore_steps
        self.min_calls = min_calls

    def explore_and_abstract(self, env: "Environment", seed_spec: dict[str, Any], *, label: str,
                             explore_prompt: Prompt, abstract_prompt: Prompt, values: dict[str, Any],
                             provenance: dict[str, Any], wanted: int) -> list[WrittenTask]:
        """Explore ``seed_spec``'s world as episode ``label``, then abstract at most ``wanted`` tasks from it.

        ``values`` fill both prompts (``exploration`` and ``tools`` are added here); ``provenance`` gets
        ``exploration_actions`` and ``abstraction_call`` as they become known, so a failure raised after them
        (``ExplorationFailed``) still finds them there.
        """
        messages = _render(explore_prompt, values)
        system = next((m["content"] for m in messages if m["role"] == "system"), None)
        instruction = "\n\n".join(m["content"] for m in messages if m["role"] == "user")
        try:
            spec = env.exploration_spec(seed_spec, instruction)
            episode_tools = env.start(label, spec)
        except (NotImplementedError, ValueError) as exc:
            raise ExplorationFailed("exploration", str(exc)) from exc
        try:
            episode_tools.next_turn()
            tools = episode_tools.tools()
        finally:
            episode_tools.close()
        explorer = LoggedAgent(self.explorer, purpose="exploration", prompt_version=explore_prompt.id,
                               system_prompt=system, max_steps=self.max_explore_steps)
        rollout = explorer.run(env, label, spec)
        provenance["exploration_actions"] = rollout.actions
        if rollout.error is not None:
            raise ExplorationFailed("exploration", rollout.error)
        values = {**values, "exploration": render_exploration(rollout), "tools": _tool_names(tools)}
        schema = {"type": "object", "additionalProperties": False, "required": ["tasks"],
                  "properties": {"tasks": {"type": "array", "minItems": 1, "items": env.draft_schema()}}}
        try:
            result = self.client.complete("abstraction", abstract_prompt.id, _render(abstract_prompt, values),
                                          json_schema=schema)
        except LLMError as exc:
            raise ExplorationFailed("abstraction", str(exc)) from exc
        provenance["abstraction_call"] = result.call_id
        written = []
        for index, draft in enumerate(result.data["tasks"][:wanted]):
            calls = sum(len(turn) for turn in draft.get("ground_truth", []))
            problems = [] if calls >= self.min_calls else [
                f"the ground truth makes {calls} calls; a task needs at least {self.min_calls}"]
            task_provenance = {**provenance, "draft": index, "completion_criterion": draft.get("completion_criterion")}
            if problems:
                task_provenance["synthesis_error"] = "abstraction: " + "; ".join(problems)
            written.append(WrittenTask(draft["turns"][0], env.spec_from_draft(seed_spec, draft), task_provenance))
        return written


class LLMSynthesizer(ExplorationSynthesizer):
    """Signal-guided exploration and abstraction with any litellm model (``model``; ``explorer_model`` acts)."""

    name = NAME

    def __init__(self, *, store_path: str | Path, model: str, explorer_model: str | None = None,
                 api_base: str | None = None, api_key: str | None = None, explorer_api_base: str | None = None,
                 tasks_per_pattern: int = 2, max_explore_steps: int = MAX_EXPLORE_STEPS, min_calls: int = 3,
                 temperature: float = 0.7, timeout: float = 60.0, retries: int = 2, cache: bool = True) -> None:
        if tasks_per_pattern < 1:
            raise ValueError(f"tasks_per_pattern must be >= 1, got {tasks_per_pattern}")
        super().__init__(store_path=store_path, model=model, explorer_model=explorer_model, api_base=api_base,
                         api_key=api_key, explorer_api_base=explorer_api_base, max_explore_steps=max_explore_steps,
                         min_calls=min_calls, temperature=temperature, timeout=timeout, retries=retries, cache=cache)
        self.tasks_per_pattern = tasks_per_pattern

    def propose(self, store: "Store", patterns: Sequence[FailurePattern], *, max_candidates: int,
                seed: int) -> list[Candidate]:
        from coevolve_engine.adapters.environments import load_environment

        candidates: list[Candidate] = []
        for pattern in patterns:
            if len(candidates) >= max_candidates:
                break
            seed_task = next((pattern.tasks[t] for t in pattern.task_ids if pattern.tasks[t].get("env")), None)
            if seed_task is None:
                continue  # no member task is in the store: nothing to explore from
            env = load_environment(seed_task["env"])
            wanted = min(self.tasks_per_pattern, max_candidates - len(candidates))
            candidates += self._for_pattern(env, pattern, seed_task, wanted, seed)
        return candidates[:max_candidates]

    # -- one pattern ---------------------------------------------------------------------------------

    def _values(self, pattern: FailurePattern, seed_task: dict[str, Any]) -> dict[str, Any]:
        summary = pattern.summary or {}
        return {
            "summary": summary.get("summary") or f"{pattern.size} rollouts flagged '{pattern.dominant_signal}' "
                                                  "(no summary yet: run `coevolve-engine summarize`)",
            "failure_cause": _text(summary.get("failure_cause")),
            "instability_pattern": _text(summary.get("instability_pattern")),
            "focus_pattern": _text(summary.get("focus_pattern")),
            "exploration_objectives": _text(summary.get("exploration_objectives")),
            "do_not_repeat": _text(summary.get("do_not_repeat")),
            "seed_task": seed_task.get("prompt") or "(no prompt)",
            "signal": pattern.dominant_signal,
            "min_calls": self.min_calls,
            "max_calls": self.max_explore_steps,
            "n_tasks": self.tasks_per_pattern,
        }

    def _failed(self, env: "Environment", pattern: FailurePattern, stage: str, error: str,
                provenance: dict[str, Any]) -> Candidate:
        spec = {"unwritten": True, "pattern_id": pattern.pattern_id, "stage": stage, "error": error}
        return Candidate.create(
            round=pattern.round, pattern_id=pattern.pattern_id, signal=pattern.dominant_signal, env=env.name,
            synthesizer=NAME, prompt="", spec=spec,
            provenance={**provenance, "synthesis_error": f"{stage}: {error}"},
        )

    def _for_pattern(self, env: "Environment", pattern: FailurePattern, seed_task: dict[str, Any], wanted: int,
                     seed: int) -> list[Candidate]:
        explore_prompt = load_prompt(EXPLORE_PROMPTS.get(pattern.dominant_signal, "explore_boundary"))
        abstract_prompt = load_prompt("abstract")
        provenance: dict[str, Any] = {
            "seed": seed, "seed_task": seed_task["task_id"], "parent_tasks": [seed_task["task_id"]],
            "model": self.client.model, "explorer_model": self.explorer.model,
            "prompt_versions": [explore_prompt.id, abstract_prompt.id],
        }
        try:
            written = self.explore_and_abstract(
                env, seed_task["spec"], label=f"explore/{pattern.pattern_id}", explore_prompt=explore_prompt,
                abstract_prompt=abstract_prompt, values=self._values(pattern, seed_task), provenance=provenance,
                wanted=wanted)
        except ExplorationFailed as exc:
            return [self._failed(env, pattern, exc.stage, exc.error, provenance)]
        return [Candidate.create(round=pattern.round, pattern_id=pattern.pattern_id, signal=pattern.dominant_signal,
                                 env=env.name, synthesizer=NAME, prompt=task.prompt, spec=task.spec,
                                 provenance=task.provenance)
                for task in written]
