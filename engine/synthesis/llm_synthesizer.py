"""The LLM synthesizer: explore the environment around each failure pattern, then abstract tasks from it.

For a pattern, with its LLM summary (``summarize``) as guidance:

1. **Exploration.** An explorer model acts in a real episode of the environment, in the world of the
   pattern's closest member task (same classes, same initial state), driven by the prompt matched to the
   pattern's dominant signal: reinforce forgotten skills (``explore_forgetting``), explore boundary cases
   (``explore_boundary``) or explore rare scenarios (``explore_rare``). Every call it makes is executed.
2. **Abstraction.** A model turns the explored interaction into task drafts in the environment's own format
   (for BFCL: the user's turns, the ground-truth calls per turn, a completion criterion), validated against the
   environment's draft schema; each draft is set in the seed task's world as a candidate.

**Kinds.** Each task is asked for as one of the environment's kinds (``Environment.draft_kinds``; for BFCL
the multi-turn categories base, miss_func, miss_param, long_context), drawn with the ``kinds`` shares (default:
base only) from ``random.Random(f"{seed}:{label}:kinds")``, so the same seed asks for the same kinds. The
abstraction prompt says which kind each task is to be; a draft written as another kind, or whose kind fields
do not parse (``DraftError`` or ``ValueError`` from ``spec_from_draft``), is kept with a ``synthesis_error``
naming the draft and the field. Provenance records ``kind``.

Every model call goes through ``LLMClient`` and so is logged (and cached) in ``llm_calls``. A pattern whose
exploration or abstraction fails still yields one candidate, carrying the failure as its ``synthesis_error``,
which validation rejects with that reason: nothing is lost silently.

``ExplorationSynthesizer`` holds what every LLM synthesizer shares (the two clients, one exploration episode
followed by the ``abstract`` prompt); the unguided synthesizer that bootstraps D_0
(``coevolve_engine.synthesis.bootstrap``) uses it with no pattern.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from coevolve_engine.adapters.agents.base import MAX_EXPLORE_STEPS, Agent, AgentFault, EpisodeLimits, ModelReply
from coevolve_engine.adapters.agents.litellm_agent import parse_completion, wire_messages
from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.endpoint import CallSettings, Endpoint, call_options
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.models.llm import LLMClient, LLMError
from coevolve_engine.prompts import Prompt, load_prompt
from coevolve_engine.core.candidates import Candidate, FailurePattern, Synthesizer
from coevolve_engine.core.registry import PluginContext

if TYPE_CHECKING:
    from coevolve_engine.core.rollout import Rollout
    from coevolve_engine.core.environment import Environment
    from coevolve_engine.core.store import Store

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


def check_kinds(kinds: Mapping[str, float] | None, offered: Mapping[str, str]) -> dict[str, float]:
    """The kind shares to draw from: ``kinds`` normalised to sum 1 (None or empty: base only). Raises
    ``CoevolveError`` naming a kind the environment does not write or a share that is not a number >= 0."""
    if not kinds:
        return {"base": 1.0}
    if not isinstance(kinds, Mapping):
        raise CoevolveError(f"kinds must be a table of kind = share, got {kinds!r}")
    unknown = [kind for kind in kinds if kind not in offered]
    if unknown:
        raise CoevolveError(f"kinds: {', '.join(map(repr, unknown))} not written by this environment; it writes "
                            f"{', '.join(offered)}")
    for kind, share in kinds.items():
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not share >= 0:
            raise CoevolveError(f"kinds.{kind}: a share must be a number >= 0, got {share!r}")
    total = float(sum(kinds.values()))
    if total <= 0:
        raise CoevolveError(f"kinds: the shares sum to {total:g}; at least one must be positive")
    return {kind: share / total for kind, share in kinds.items() if share > 0}


def draw_kinds(shares: Mapping[str, float], n: int, *, seed: int, label: str) -> list[str]:
    """``n`` kinds drawn with ``shares`` from ``random.Random(f"{seed}:{label}:kinds")``."""
    rng = random.Random(f"{seed}:{label}:kinds")
    names = sorted(shares)
    return rng.choices(names, weights=[shares[name] for name in names], k=n)


def describe_kinds(asked: Sequence[str], offered: Mapping[str, str]) -> str:
    """The prompt's $kinds: which kind each task is to be, and what that kind means."""
    lines = [f"Task {index + 1}: kind {kind}" for index, kind in enumerate(asked)]
    lines += [f"- {kind}: {offered[kind]}" for kind in dict.fromkeys(asked)]
    return "\n".join(lines)


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

    explores = True
    writes_kinds = True

    @classmethod
    def from_options(cls, options: Mapping[str, Any], context: PluginContext) -> "ExplorationSynthesizer":
        """Built with the store the run reads (``store_path``), unless the options name one; ``timeout`` and
        ``retries`` (as a config names them) make its ``CallSettings``."""
        return cls(**{"store_path": context.store_path, **call_options(options)})

    def __init__(self, *, store_path: str | Path, model: Endpoint | str, explorer: Endpoint | str | None = None,
                 calls: CallSettings = CallSettings(), max_explore_steps: int = MAX_EXPLORE_STEPS, min_calls: int = 3,
                 temperature: float = 0.7, cache: bool = True, kinds: Mapping[str, float] | None = None) -> None:
        """``model`` abstracts; ``explorer`` (default: ``model``) explores; each call is made as ``calls`` says
        and logged (and, with ``cache``, answered again) in ``store_path``'s llm_calls. max_explore_steps: tool
        calls one exploration may make; min_calls: the fewest calls a written task's solution must make.
        temperature: both models' sampling. kinds: the share of each kind of task asked for (for BFCL: base,
        miss_func, miss_param, long_context; default: base only), drawn for each exploration from the seed."""
        common = dict(calls=calls, temperature=temperature, cache=cache)
        self.client = LLMClient(store_path, model, **common)
        self.explorer = LLMClient(store_path, model if explorer is None else explorer, **common)
        self.max_explore_steps = max_explore_steps
        self.min_calls = min_calls
        self.kinds = dict(kinds or {})
        check_kinds(self.kinds, {kind: "" for kind in self.kinds})  # the shares; the kinds once the env is known

    def ask_kinds(self, env: "Environment", n: int, *, seed: int, label: str) -> list[str]:
        """The kinds the ``n`` tasks abstracted under ``label`` are asked to be (see the module doc)."""
        return draw_kinds(check_kinds(self.kinds, env.draft_kinds()), n, seed=seed, label=label)

    def explore_and_abstract(self, env: "Environment", seed_spec: dict[str, Any], *, label: str,
                             explore_prompt: Prompt, abstract_prompt: Prompt, values: dict[str, Any],
                             provenance: dict[str, Any], wanted: int, seed: int = 0) -> list[WrittenTask]:
        """Explore ``seed_spec``'s world as episode ``label``, then abstract at most ``wanted`` tasks from it.

        ``values`` fill both prompts (``exploration``, ``tools`` and ``kinds`` are added here: the kinds asked
        are drawn from ``seed`` and ``label``); ``provenance`` gets
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
        draft_schema, offered = env.draft_schema(), env.draft_kinds()
        own_kind = "kind" in draft_schema.get("properties", {})
        if not own_kind:  # every draft may say its kind, as the prompt shows
            draft_schema = {**draft_schema, "properties": {**draft_schema.get("properties", {}),
                                                           "kind": {"type": "string", "enum": list(offered)}}}
        schema = {"type": "object", "additionalProperties": False, "required": ["tasks"],
                  "properties": {"tasks": {"type": "array", "minItems": 1, "items": draft_schema}}}
        asked = self.ask_kinds(env, wanted, seed=seed, label=label)
        values = {**values, "exploration": render_exploration(rollout), "tools": _tool_names(tools),
                  "kinds": describe_kinds(asked, offered)}
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
            kind = draft.get("kind", asked[index])
            task_provenance = {**provenance, "draft": index, "kind": kind,
                               "completion_criterion": draft.get("completion_criterion")}
            if kind != asked[index]:
                problems.append(f"draft {index}: field 'kind': asked for a {asked[index]} task, the draft is {kind}")
            try:
                fields = {key: value for key, value in draft.items() if key != "kind"}
                spec = env.spec_from_draft(seed_spec, {**fields, "kind": kind} if own_kind else fields)
            except ValueError as exc:  # the draft's fields cannot make a task: kept with the reason
                problems.append(f"draft {index}: {exc}")
                spec = {"unparsed_draft": draft}
            if problems:
                task_provenance["synthesis_error"] = "abstraction: " + "; ".join(problems)
            prompt = next((text for text in draft["turns"] if text), "")
            written.append(WrittenTask(prompt, spec, task_provenance))
        return written


class LLMSynthesizer(ExplorationSynthesizer):
    """Signal-guided exploration and abstraction with any litellm model (``model``; ``explorer_model`` acts)."""

    name = NAME
    reads_summaries = True  # each pattern's summary guides its exploration

    def __init__(self, *, tasks_per_pattern: int = 2, **exploration: Any) -> None:
        """``exploration``: the models and how they are called (``ExplorationSynthesizer``)."""
        if tasks_per_pattern < 1:
            raise ValueError(f"tasks_per_pattern must be >= 1, got {tasks_per_pattern}")
        super().__init__(**exploration)
        self.tasks_per_pattern = tasks_per_pattern

    def propose(self, store: "Store", patterns: Sequence[FailurePattern], *, max_candidates: int,
                seed: int) -> list[Candidate]:
        candidates: list[Candidate] = []
        for pattern in patterns:
            if len(candidates) >= max_candidates:
                break
            seed_task = next((pattern.tasks[t] for t in pattern.task_ids if pattern.tasks[t].get("env")), None)
            if seed_task is None:
                continue  # no member task is in the store: nothing to explore from
            env = load_environment(seed_task["env"])
            check_kinds(self.kinds, env.draft_kinds())
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
                wanted=wanted, seed=seed)
        except ExplorationFailed as exc:
            return [self._failed(env, pattern, exc.stage, exc.error, provenance)]
        return [Candidate.create(round=pattern.round, pattern_id=pattern.pattern_id, signal=pattern.dominant_signal,
                                 env=env.name, synthesizer=NAME, prompt=task.prompt, spec=task.spec,
                                 provenance=task.provenance)
                for task in written]
