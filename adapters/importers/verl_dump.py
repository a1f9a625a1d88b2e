"""verl's rollout dumps as trajectory records.

With ``trainer.rollout_data_dir=DIR`` verl's PPO trainer (``RayPPOTrainer._dump_generations``) writes
``DIR/<global_step>.jsonl`` after each step, one JSON line per rollout::

    {"input": <prompt, decoded>, "output": <response, decoded>, "gts": <reward_model.ground_truth>,
     "score": <sum of token-level scores>, "step": <global step>, ...<reward extra infos>}

Each line becomes one trajectory record:

- task_id: the line's ``task_id`` (a reward function can return it as extra info), else ``gts`` when it
  names a task (``coevolve-engine export`` sets ground_truth to the task id) or is JSON text with a
  ``task_id``, else the line's ``index`` looked up in the export's manifest;
- step: ``step + step_offset`` (verl's global step: the policy that played it); group_id: the line's ``uid``
  (verl's id of one draw of a row, shared by its ``rollout.n`` rollouts: a GRPO group, and two draws of one
  task in one step stay two groups), else ``task_id@step``;
- reward: ``score`` scaled from ``reward_range`` (lo, hi) to [0, 1] and clipped (default lo 0, hi 1:
  plain clipping); the raw score stays in ``meta.score``;
- messages: the line's ``messages`` (JSON text of the whole chat, turn by turn, which the reward function of
  ``coevolve_engine.trainers.verl_bfcl`` returns as a reward extra), else ``[{"role": "user", "content": input},
  {"role": "assistant", "content": output}]``;
- actions: the line's ``actions`` (JSON text, the same function's), else the ``<tool_call>`` blocks in the
  output, in order (``[]`` when it called no tool);
- success: the line's ``success`` when it is true or false;
- meta: ``{"importer": "verl", "score": ..., **every other field of the line}`` (``turns``, ``stop``, ...).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

from coevolve_engine.adapters.calls import parse_tool_call_text
from coevolve_engine.adapters.importers import ImportOptions, normalise_reward
from coevolve_engine.core.ids import normalize_id
from coevolve_engine.core.json_input import DuplicateKeyError, read_json
from coevolve_engine.core.errors import IngestError

_CONSUMED = ("input", "output", "gts", "score", "step", "task_id", "index", "uid", "messages", "actions",
             "success")


class VerlDumpImporter:
    """Reads one verl rollout dump file (see the module doc)."""

    name = "verl"

    def __init__(self, options: ImportOptions) -> None:
        self.options = options

    def read(self, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise IngestError(str(path), f"cannot be read ({exc.strerror})") from None
        with handle:
            for number, raw in enumerate(handle, start=1):
                text = raw.strip()
                if not text:
                    continue
                try:
                    line = read_json(text, unique_keys=True)
                except DuplicateKeyError as exc:
                    raise IngestError(str(path), str(exc), location=f"line {number}") from None
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    raise IngestError(str(path), f"not valid JSON ({exc})", location=f"line {number}") from None
                if not isinstance(line, dict):
                    raise IngestError(str(path), "expected a JSON object", location=f"line {number}")
                yield number, self.record(line, lambda message, field=None: IngestError(
                    str(path), message, location=f"line {number}", field=field))

    def record(self, line: dict[str, Any], error) -> dict[str, Any]:
        """The trajectory record for one parsed dump line; ``error(message, field)`` builds the exception."""
        for name in ("input", "output"):
            if not isinstance(line.get(name), str):
                raise error("required text field is missing or not a string (verl dumps have input, output, "
                            "score, step)", name)
        score = line.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise error(f"score {score!r} is not a finite number", "score")
        step = line.get("step")
        if isinstance(step, float) and step.is_integer():
            step = int(step)
        if isinstance(step, bool) or not isinstance(step, int):
            raise error(f"step {step!r} is not an integer", "step")
        task_id = self._task_id(line, error)
        step += self.options.step_offset
        output = line["output"]
        meta = {"importer": "verl", "score": score}
        meta.update({k: v for k, v in line.items() if k not in _CONSUMED})
        uid = line.get("uid")
        messages = _json_list(line, "messages", error)
        actions = _json_list(line, "actions", error)
        record = {
            "task_id": task_id,
            "step": step,
            "group_id": uid if isinstance(uid, str) and uid else f"{task_id}@{step}",
            "reward": normalise_reward(float(score), self.options.reward_range),
            "actions": None if not self.options.parse_actions else actions if actions is not None else _actions(output),
            "messages": messages if messages is not None else [{"role": "user", "content": line["input"]},
                                                               {"role": "assistant", "content": output}],
            "policy": self.options.policy,
            "meta": meta,
        }
        if isinstance(line.get("success"), bool):
            record["success"] = line["success"]
        return record

    def _task_id(self, line: dict[str, Any], error) -> str:
        known = self.options.known_tasks
        candidates: list[tuple[str, Any]] = [("task_id", line.get("task_id")), ("gts", line.get("gts"))]
        gts = line.get("gts")
        if isinstance(gts, str) and gts.lstrip().startswith("{"):
            try:
                candidates.append(("gts", read_json(gts).get("task_id")))
            except (ValueError, AttributeError):
                pass
        index = line.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            candidates.append(("index", self.options.index_to_task.get(index)))
        # ids are stored in NFC (coevolve_engine.core.ids): a dump may spell one another way
        named = [(field, normalize_id(value)) for field, value in candidates if isinstance(value, str) and value]
        for field, value in named:
            if known is None or value in known:
                return value
        if named:
            field, value = named[0]
            raise error(f"task {value!r} is not in the store (import its tasks first, or check the dump)", field)
        raise error("cannot tell which task this rollout attempted: no task_id, no gts naming a task, and no "
                    "index in the export manifest (export with coevolve-engine export, or pass --manifest)",
                    "task_id")


def _json_list(line: dict[str, Any], name: str, error) -> list[Any] | None:
    """A field holding a JSON list (verl writes reward extras as text), or None when the line has none."""
    value = line.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = read_json(value)
        except (ValueError, UnicodeDecodeError) as exc:
            raise error(f"{name} is not JSON text of a list ({exc})", name) from None
    if not isinstance(value, list):
        raise error(f"{name} must be a list (JSON text of one), got {type(value).__name__}", name)
    return value


def _actions(output: str) -> list[dict[str, Any]]:
    _, calls = parse_tool_call_text(output)
    return [{"name": call.name, "arguments": call.arguments} for call in calls]
