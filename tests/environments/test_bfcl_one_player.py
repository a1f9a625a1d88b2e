"""One episode player on BFCL multi-turn: the run's eval phase, ``coevolve-engine eval`` on a local checkpoint and
``coevolve-engine eval`` through litellm play the same scripted answers, in all four categories, and their verdicts
are bfcl_eval's own for the same model: for the local checkpoint (the token path), its prompting loop with its Qwen
handler; for the served model, its FC loop. The two differ by design where an answer mixes a call that decodes
with one that does not (the Qwen handler runs the first, the FC loop ends the turn).

The answers are scripted per task (``bfcl_reference_loop.script_for``): each task's ground truth, some answers
corrupted (a wrong argument in turn 1, a tool call whose arguments are not JSON, a miss_func tool called before
its release, a turn that hits the 21-answer cap) and some carrying ``<think>`` blocks, so that verdicts are mixed.
The same script answers

- on a local checkpoint (a tiny Qwen3 with a tokenizer and chat template, whose ``generate`` writes the script's
  answer for the episode it reads in the prompt ids, as Qwen3 writes tool calls: ``<tool_call>`` blocks after
  the text), played by the run's eval phase (``loop.evaluation.evaluate``) and by ``eval --model DIR``;
- behind the scripted OpenAI-compatible server on 127.0.0.1, played by ``eval --model openai/scripted`` (tool
  calls in the response's ``tool_calls``);
- in bfcl_eval's own ``inference_multi_turn_FC`` loop (``bfcl_reference_loop.bfcl_run``): the served reference;
- in bfcl_eval's ``inference_multi_turn_prompting`` with ``QwenFCHandler`` (``bfcl_prompting_loop.bfcl_qwen_run``),
  each answer the text the local checkpoint writes: the local reference.

The two local evaluations must hold the same verdict, reward, reason and executed calls for every task, the
rollouts the same failed turn, and each path's verdict, calls per turn and failed turn must be its reference's. The miss_func tools a
token-level policy reads (in the releasing turn's user message) differ from what a served model is sent (each
request's tools) by design; the verdicts still agree.
"""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("litellm") is None:
    pytest.skip("litellm is not installed", allow_module_level=True)
pytest.importorskip("torch")
pytest.importorskip("trl")  # ships the Qwen3 chat template of the tiny tokenizer
pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")

from click.testing import CliRunner  # noqa: E402

from bfcl_prompting_loop import bfcl_qwen_run  # noqa: E402
from bfcl_reference_loop import _wrong, answer_at, bfcl_entries, bfcl_run, script_for  # noqa: E402
from scripted_server import text, tool_calls  # noqa: E402

from coevolve_engine.adapters.calls import parameter_order  # noqa: E402
from coevolve_engine.adapters.environments.bfcl import BFCLEnvironment  # noqa: E402
from coevolve_engine.adapters.environments.bfcl.specs import multi_turn_docs  # noqa: E402
from coevolve_engine.cli import cli  # noqa: E402
from coevolve_engine.core.store import Store  # noqa: E402

#: per category, the script kind of each task; tasks of different categories are taken at different indices
#: (the categories share their questions index by index, and a script is found by the task's first question)
KINDS = {
    "multi_turn_base": ("one_call_per_answer", "malformed_first", "cap_hit"),
    "multi_turn_miss_func": ("parallel_with_think", "held_out_called_early", "wrong_argument_last_turn"),
    "multi_turn_miss_param": ("think_then_stop", "malformed_mid_turn", "wrong_argument_turn_1"),
    "multi_turn_long_context": ("wrong_argument_last_turn", "cap_hit_last_turn", "parallel_with_think"),
}


def first_question(spec: dict) -> str:
    return "\n".join(m["content"] for m in spec["turns"][0] if m.get("role") == "user")


def as_qwen3_text(content: str | None, calls: list[tuple[str, str]]) -> str:
    """An answer as Qwen3 writes it: the text, then one ``<tool_call>`` block per call, arguments as written."""
    blocks = [f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {arguments}}}\n</tool_call>'
              for name, arguments in calls]
    return "\n".join(part for part in [content or "", *blocks] if part)


def scripted_answers(kind: str, spec: dict):
    """``script_for``'s answers of ``kind``; "wrong_argument_last_turn": the ground truth, one call per answer,
    with one argument of the first call of the last turn that calls a tool changed (a failure after turn 1)."""
    order = parameter_order(multi_turn_docs(spec))
    if kind != "wrong_argument_last_turn":
        return script_for(kind, spec["ground_truth"], order, spec.get("missed_function"))
    script = script_for("one_call_per_answer", spec["ground_truth"], order)
    last = max(index for index, answers in enumerate(script) if answers[0][1])
    script[last][0] = (None, [_wrong(script[last][0][1][0])])
    return script


class Scripts:
    """The scripted answers of every task, found by the episode's first question; the turn is the count of user
    messages so far and the step the count of answers since the last one."""

    def __init__(self, tasks: list[dict]) -> None:
        self.by_question = {}
        for task in tasks:
            self.by_question[first_question(task["spec"])] = scripted_answers(task["kind"], task["spec"])
        assert len(self.by_question) == len(tasks), "two tasks open with the same question"

    def answer(self, first: str, turn: int, step: int):
        return answer_at(self.by_question[first], turn, step)

    def served(self, request: dict):
        """The scripted server's answer to a chat completion request."""
        messages = request["messages"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        content, calls = self.answer(messages[users[0]]["content"], len(users) - 1,
                                     sum(m["role"] == "assistant" for m in messages[users[-1]:]))
        return tool_calls(*calls, content=content) if calls else text(content)

    def written(self, prompt: str) -> str:
        """The local checkpoint's answer to a prompt rendered by the Qwen3 chat template (tool results come back
        in user messages that open with ``<tool_response>``; the last message is the open generation prompt)."""
        segments = [segment.partition("\n") for segment in prompt.split("<|im_start|>")[1:]]
        users = [i for i, (role, _, body) in enumerate(segments)
                 if role == "user" and not body.startswith("<tool_response>")]
        first = segments[users[0]][2].removesuffix("\n").removesuffix("<|im_end|>")
        step = sum(role == "assistant" for role, _, _ in segments[users[-1]:]) - 1
        return as_qwen3_text(*self.answer(first, len(users) - 1, step))


def scripted_generate(scripts: Scripts, tokenizer, truncated: list, prompts: list):
    """A ``generate`` for the checkpoint's model class: each row's answer is the script's, cut at
    ``max_new_tokens`` as a model's would be (``truncated`` collects the answers that were, ``prompts`` every
    prompt's text)."""

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        import torch

        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            prompt = tokenizer.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=False)
            prompts.append(prompt)
            answer = scripts.written(prompt)
            new = tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
            if len(new) > max_new_tokens:
                truncated.append(answer)
            rows.append(ids + new[:max_new_tokens])
        width = max(len(row) for row in rows)
        pad = kwargs.get("pad_token_id", tokenizer.pad_token_id)
        return SimpleNamespace(sequences=torch.tensor([row + [pad] * (width - len(row)) for row in rows]))

    return generate


@pytest.fixture(scope="module")
def tasks() -> list[dict]:
    environment = BFCLEnvironment()
    chosen = []
    for index, (category, kinds) in enumerate(KINDS.items()):
        shipped = list(environment.load_tasks(category=category, limit=len(KINDS) * len(kinds)))
        for position, kind in enumerate(kinds):
            chosen.append({**shipped[index * len(kinds) + position], "kind": kind})
    return chosen


@pytest.fixture(scope="module")
def checkpoint(tasks, tmp_path_factory):
    from coevolve_engine.trainers.tiny_policy import build_tiny_qwen3, qwen3_chat_template

    scripts = Scripts(tasks)
    corpus = [as_qwen3_text(content, calls) for script in scripts.by_question.values()
              for turn in script for content, calls in turn]
    corpus += [json.dumps(doc) for task in tasks for doc in multi_turn_docs(task["spec"])]
    corpus += [first_question(task["spec"]) for task in tasks] + [qwen3_chat_template()]
    return build_tiny_qwen3(tmp_path_factory.mktemp("bfcl-one-player") / "policy", corpus, hidden_size=32,
                            vocab_size=2048)


def executed_calls_per_turn(completion: list[dict]) -> list[list[tuple[str, dict]]]:
    """The calls a stored chat executed (those answered by a tool message), per user turn."""
    answered = {m["tool_call_id"] for m in completion if m["role"] == "tool"}
    turns: list[list[tuple[str, dict]]] = []
    for message in completion:
        if message["role"] == "user":
            turns.append([])
        for call in message.get("tool_calls") or []:
            if call["id"] in answered:
                turns[-1].append((call["function"]["name"], json.loads(call["function"]["arguments"])))
    return turns


#: Qwen3's two modes: thinking (the template's default) and off, as the paper recipe suggests for a Qwen3 policy
MODES = {"thinking": {}, "no-thinking": {"enable_thinking": False}}


@pytest.mark.parametrize("mode", MODES)
def test_the_eval_phase_local_eval_and_served_eval_give_bfcls_verdicts(mode, tasks, checkpoint, tmp_path,
                                                                         monkeypatch, scripted_server):
    from transformers import AutoTokenizer
    from transformers.models.qwen3.modeling_qwen3 import Qwen3ForCausalLM

    from coevolve_engine.adapters.agents.player import Play
    from coevolve_engine.loop.config_files import load_config
    from coevolve_engine.loop.context import RunContext
    from coevolve_engine.loop.evaluation import evaluate

    scripts = Scripts(tasks)
    truncated: list[str] = []
    prompts: list[str] = []
    monkeypatch.setattr(Qwen3ForCausalLM, "generate",
                        scripted_generate(scripts, AutoTokenizer.from_pretrained(checkpoint), truncated, prompts))
    kwargs = MODES[mode]
    template = ["--chat-template-kwargs", json.dumps(kwargs)] if kwargs else []
    rollouts: dict[str, dict] = {}  # per path, each task's finished rollout
    path = "phase"
    finish = Play.finish

    def keep(play):
        rollout = finish(play)
        rollouts.setdefault(path, {})[rollout.task_id] = rollout
        return rollout

    monkeypatch.setattr(Play, "finish", keep)

    db = tmp_path / "store.duckdb"
    with Store(db) as store:
        store.add_records("tasks", [{**{k: v for k, v in t.items() if k != "kind"}, "split": "eval"} for t in tasks])
        store.execute("INSERT INTO rounds (round, status, policy, checkpoint, first_step) VALUES (1, 'running', $p, "
                      "$p, 0)", {"p": str(checkpoint)})
    # the run's eval phase, with the run's [episode] settings (tokens per answer: as many as `eval` allows by
    # default, so that the longest scripted answers, long_context's file lists, are written whole)
    config = load_config(None, ["trainer.model=" + str(checkpoint), "env=bfcl", "episode.max_new_tokens=1024"] +
                         ["episode.chat_template_kwargs={enable_thinking = false}"] * bool(kwargs))
    assert config.episode.chat_template_kwargs == kwargs
    phase = evaluate(RunContext(db, config, 5.0, echo=lambda line: None), 1, "eval")
    assert phase.get("tasks") == len(tasks), phase
    # `eval` on the local checkpoint, with the same tokens per answer
    path = "local"
    runner = CliRunner()
    result = runner.invoke(cli, ["eval", "--env", "bfcl", "--model", str(checkpoint), "--max-tokens",
                                 str(config.episode.max_new_tokens), *template, "--format", "json",
                                 "--no-progress", "--db", str(db)])
    assert result.exit_code == 0, result.output
    local = json.loads(result.stdout)["eval_id"]
    # `eval` through litellm against the scripted server
    path = "served"
    scripted_server.respond_with(scripts.served)
    result = runner.invoke(cli, ["eval", "--env", "bfcl", "--model", "openai/scripted", "--api-base",
                                 scripted_server.api_base, "--api-key", "dummy", "--retries", "0", "--timeout", "30",
                                 *template, "--format", "json", "--no-progress", "--db", str(db)])
    assert result.exit_code == 0, result.output
    served = json.loads(result.stdout)["eval_id"]
    assert truncated == []  # every scripted answer fit the tokens allowed: the local model wrote all of it
    # both local paths rendered every prompt in the mode asked (Qwen3 without thinking opens each answer with an
    # empty think block)
    assert {prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") for prompt in prompts} == {bool(kwargs)}
    if kwargs:  # and the served model was asked for it
        assert all(request["chat_template_kwargs"] == kwargs for request in scripted_server.requests)

    stored: dict[str, dict] = {}
    with Store(db, read_only=True) as store:
        for name, eval_id in (("phase", phase["eval_id"]), ("local", local), ("served", served)):
            rows = store.execute("SELECT task_id, success, reward, reason, actions, completion FROM eval_results "
                                 "WHERE eval_id = $id", {"id": eval_id}).fetchall()
            stored[name] = {task_id: {"success": success, "reward": reward, "reason": reason,
                                      "actions": json.loads(actions), "calls": executed_calls_per_turn(
                                          json.loads(completion))}
                            for task_id, success, reward, reason, actions, completion in rows}
    assert len({phase["eval_id"], local, served}) == 3
    assert all(sorted(stored[name]) == sorted(rollouts[name]) == sorted(t["task_id"] for t in tasks)
               for name in ("phase", "local", "served"))

    entries = {category: bfcl_entries(category) for category in KINDS}
    differences = []
    for task in tasks:
        spec, task_id = task["spec"], task["task_id"]
        entry, script = entries[spec["category"]][spec["bfcl_id"]], scripts.by_question[first_question(spec)]
        served = bfcl_run(entry, spec["ground_truth"], script)  # the FC loop: a served model's reference
        token = bfcl_qwen_run(entry, spec["ground_truth"],  # the prompting loop with QwenFCHandler: a local model's
                              [[as_qwen3_text(*answer) for answer in turn] for turn in script])
        for name, reference in (("phase", token), ("local", token), ("served", served)):
            expected = {"success": reference.valid, "failed_turn": reference.failed_turn,
                        "calls": reference.calls_per_turn}
            got = {**stored[name][task_id], "failed_turn": rollouts[name][task_id].failed_turn}
            for field, value in expected.items():
                if got[field] != value:
                    differences.append((task_id, task["kind"], name, field, got[field], value))
            for field in ("reward", "reason", "actions"):
                if name != "served" and got[field] != stored["phase"][task_id][field]:
                    differences.append((task_id, task["kind"], name, field, got[field],
                                        stored["phase"][task_id][field]))
    print("\n" + "\n".join(f"{t['task_id']} {t['kind']}: {stored['phase'][t['task_id']]['success']}, failed turn "
                           f"{rollouts['phase'][t['task_id']].failed_turn}" for t in tasks))
    assert differences == [], differences[:3]
    for category in KINDS:  # every category's comparison holds both outcomes
        verdicts = {stored["phase"][t["task_id"]]["success"] for t in tasks if t["spec"]["category"] == category}
        assert verdicts == {True, False}, (category, verdicts)
    # the local paths played the same token-level episodes: the same chats, answer for answer
    assert [r.messages for r in rollouts["phase"].values()] == \
        [rollouts["local"][task_id].messages for task_id in rollouts["phase"]]
