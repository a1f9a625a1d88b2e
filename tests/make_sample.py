"""Writes the bundled sample (engine/data/sample_*.jsonl): 12 tasks of a small file-system world and the
rollouts of a policy on them over 8 training steps, in groups of 4.

    python tests/make_sample.py        # rewrite the files; tests/test_sample.py checks they match

The rollouts are drawn so that every signal shows up: tasks whose success rate rises then falls
(forgetting), groups with mixed outcomes (boundary) and a few uncommon action patterns (rare).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "engine" / "data"

TASKS = [
    ("files-001", "List the files in the documents folder.", ["cd", "ls"]),
    ("files-002", "Show the contents of notes.txt in the home folder.", ["cat"]),
    ("files-003", "Move report.pdf from downloads into archive.", ["cd", "mv"]),
    ("files-004", "Count the lines of todo.txt.", ["wc"]),
    ("files-005", "Find every file named budget.xlsx.", ["find"]),
    ("files-006", "Copy draft.md to draft_backup.md, then list the folder.", ["cp", "ls"]),
    ("files-007", "Sort the names in people.txt and save them to sorted.txt.", ["sort", "echo"]),
    ("files-008", "Create an empty file called ideas.md in projects.", ["cd", "touch"]),
    ("files-009", "Search log.txt for lines containing ERROR.", ["grep"]),
    ("files-010", "Compare v1.txt and v2.txt.", ["diff"]),
    ("files-011", "Go to projects, list it, then show readme.md.", ["cd", "ls", "cat"]),
    ("files-012", "Rename old.txt to new.txt and count its words.", ["mv", "wc"]),
]
STEPS, GROUP = 8, 4
DISTRACTORS = ["ls", "pwd", "cat", "echo"]


def success_rate(index: int, step: int) -> float:
    """Each task's chance of success at a step: a slow rise, with a dip for some (forgetting)."""
    base = 0.15 + 0.08 * (index % 5) + 0.07 * step
    if index % 3 == 0:  # learns, then forgets around steps 4-6
        base += 0.45 * math.sin(math.pi * step / 6) - (0.4 if step >= 5 else 0.0)
    return min(max(base, 0.0), 1.0)


def rollout(rng: random.Random, task: tuple[str, str, list[str]], index: int, step: int, k: int) -> dict:
    task_id, prompt, tools = task
    succeeded = rng.random() < success_rate(index, step)
    calls = list(tools)
    if not succeeded:
        roll = rng.random()
        if roll < 0.4:
            calls = calls[:-1] or [rng.choice(DISTRACTORS)]
        elif roll < 0.75:
            calls = calls + [rng.choice(DISTRACTORS)]
        elif roll < 0.82:
            calls = [rng.choice(DISTRACTORS), rng.choice(["rm", "chmod", "tail"])]  # something rare
    actions = [{"name": name, "arguments": {"arg": f"{name}-{i}"}} for i, name in enumerate(calls)]
    reward = 1.0 if succeeded else (0.25 if calls[: len(tools) - 1] == tools[:-1] and len(tools) > 1 else 0.0)
    record = {
        "task_id": task_id,
        "step": step,
        "group_id": f"{task_id}@{step}",
        "reward": reward,
        "actions": actions,
        "policy": f"sample-policy-step-{step}",
    }
    if k == 0:
        record["messages"] = [
            {"role": "user", "content": prompt},
            *({"role": "assistant", "content": None,
               "tool_calls": [{"type": "function", "function": {"name": a["name"],
                                                                 "arguments": json.dumps(a["arguments"])}}]}
              for a in actions),
            {"role": "assistant", "content": "Done." if succeeded else "I could not finish."},
        ]
    return record


def render() -> dict[str, str]:
    """The sample files' names and contents."""
    rng = random.Random(7)
    tasks = []
    for task_id, prompt, tools in TASKS:
        spec = {"tools": tools, "solution": [{"name": t, "arguments": {}} for t in tools]}
        tasks.append(json.dumps({"task_id": task_id, "env": "sample", "prompt": prompt, "spec": spec,
                                 "source": "sample"}) + "\n")
    rollouts = [json.dumps(rollout(rng, task, index, step, k)) + "\n"
                for step in range(STEPS) for index, task in enumerate(TASKS) for k in range(GROUP)]
    return {"sample_tasks.jsonl": "".join(tasks), "sample_trajectories.jsonl": "".join(rollouts)}


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (DATA / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
