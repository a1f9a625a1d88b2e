"""Run inside a verl venv: ``EpisodeAgentLoop.run`` (verl's agent loop of the project) plays scripted episodes, and
the ids it sent its server at every call come out as JSON.

    python verl_loop_ids.py TOKENIZER_DIR EPISODES.json KWARGS_JSON OUT.json

EPISODES.json: a list of {"task_id", "spec", "answers"}. The server answers each call with the next answer of its
episode (the answer's ids and the end-of-turn token). The loop is built without verl's worker (no config, no
Ray): the attributes its ``run`` reads are set on it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from types import SimpleNamespace


def main(tokenizer_dir: str, episodes_file: str, kwargs_json: str, out_file: str) -> int:
    from transformers import AutoTokenizer

    from coevolve_engine.trainers.verl_bfcl import EpisodeAgentLoop, ThinkingOnRefused, load_interactions

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    found = {}
    for episode in json.loads(open(episodes_file).read()):
        answers, prompts = list(episode["answers"]), []

        class Server:
            async def generate(self, *, request_id, prompt_ids, sampling_params, **kwargs):
                prompts.append(list(prompt_ids))
                text = answers.pop(0) if answers else "The script ran out."
                ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
                return SimpleNamespace(token_ids=ids, log_probs=[-0.5] * len(ids))

        loop = EpisodeAgentLoop.__new__(EpisodeAgentLoop)
        loop.tokenizer, loop.server_manager, loop.tools = tokenizer, Server(), {}
        loop.apply_chat_template_kwargs, loop.response_length = json.loads(kwargs_json), 1_000_000
        loop.prompt_length, loop.max_new_tokens = 1_000_000, None  # no opening cut, no per-answer cap
        loop.interactions = load_interactions(None)
        extra_info = {"task_id": episode["task_id"], "spec": json.dumps(episode["spec"]), "env": "bfcl"}
        try:
            output = asyncio.run(loop.run({}, extra_info=extra_info))
        except ThinkingOnRefused as refused:
            found[episode["task_id"]] = {"refused": str(refused)}
            continue
        found[episode["task_id"]] = {"prompts": prompts, "prompt_ids": output.prompt_ids,
                                     "response_ids": output.response_ids, "response_mask": output.response_mask,
                                     "turns": output.extra_fields["coevolve_turns"]}
    open(out_file, "w").write(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
