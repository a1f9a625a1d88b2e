"""The multi-turn part of bench/verl_check.py: BFCL episodes played by verl's agent loop with the project's
interaction and tools, scored by the project's reward function, dumped by verl's own writer and imported back.

The parent side (the project's Python) builds the store, the export, the scripted answers and the episode
player's verdicts on them; the child side (the verl venv) plays the export in verl; the parent then imports the
dump verl wrote and compares its signals with the same rollouts ingested as JSON lines.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

# BFCL tasks by category: base tasks have 2-5 user turns in bfcl-eval 2026.3.23; miss_func ones one more (the turn
# that releases the held-out functions)
TASKS = {"multi_turn_base": 20, "multi_turn_miss_func": 4}
VARIANTS = ("ground truth, one answer per turn", "ground truth, one call per answer",
            "the last turn answered without calls")
REPEATED = 0  # the row drawn twice in the dumped step (two draws: two verl uids)
ROLLOUT_N = 2  # samples per draw (actor_rollout_ref.rollout.n)


# -- parent: the scripted answers and the episode player's verdicts ---------------------------------------------

def call_block(name: str, arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def scripted_answers(environment: Any, spec: dict, variant: int) -> list[str]:
    """Answers for every user turn from the task's ground truth; ``variant`` indexes VARIANTS."""
    from coevolve_engine.adapters.environments.bfcl.tool_schemas import tool_name

    turns = environment.reference_solution(spec)
    answers: list[str] = []
    for index, calls in enumerate(turns):
        blocks = [call_block(tool_name(call.name), call.arguments) for call in calls]
        if variant == 2 and index == len(turns) - 1:
            blocks = []
        if variant == 1:
            answers += blocks
        elif blocks:
            answers.append("".join(blocks))
        answers.append(f"Turn {index + 1} is done.")
    return answers


def player_verdicts(environment: Any, tasks: list[tuple[str, dict]]) -> dict[str, dict]:
    """Each task's scripted answers and the episode player's rollout of them (the engine's own way to play)."""
    from coevolve_engine.adapters.agents.base import Agent, AgentFault
    from coevolve_engine.adapters.agents.player import run_task
    from coevolve_engine.adapters.agents.answer_format import decode_qwen

    class Scripted(Agent):
        policy = "verl"

        def __init__(self, answers: list[str]) -> None:
            self.answers = list(answers)

        def complete(self, messages, tools):
            if not self.answers:
                raise AgentFault("the script ran out of answers")
            return decode_qwen(self.answers.pop(0))  # as the token path (verl's loop) decodes it

    found = {}
    for index, (task_id, spec) in enumerate(tasks):
        variants = []
        for variant in range(len(VARIANTS)):
            answers = scripted_answers(environment, spec, variant)
            variants.append({"answers": answers, "record": run_task(environment, task_id, spec,
                                                                    Scripted(answers)).to_record()})
        found[task_id] = {"index": index, "user_turns": len(spec["turns"]), "variants": variants}
    return found


def played_file(episodes: dict) -> Path:
    """Which script each request played (request_id -> [task, variant]), written by the child beside the dump."""
    return Path(episodes["dump"]).with_name("played.json")


def build(folder: Path, tokenizer: str) -> dict:
    """A store of TASKS BFCL multi-turn tasks, its verl export (lengths measured with ``tokenizer``, the policy's)
    and the scripted answers with their verdicts."""
    from click.testing import CliRunner

    from coevolve_engine.adapters.environments import load_environment
    from coevolve_engine.cli import cli
    from coevolve_engine.core.store import Store
    from coevolve_engine.trainers.export import export_round

    db = folder / "episodes.duckdb"
    for category, limit in TASKS.items():
        result = CliRunner().invoke(cli, ["tasks", "import", "bfcl", "--category", category, "--split", "train",
                                          "--limit", str(limit), "--db", str(db), "--create"])
        if result.exit_code != 0:
            raise SystemExit(f"could not import BFCL tasks: {result.output}")
    with Store(db) as store:
        rows = store.execute("SELECT task_id, CAST(spec AS VARCHAR) FROM tasks ORDER BY task_id").fetchall()
        report = export_round(store, 0, "verl", folder / "episodes", uniform=True, tokenizer=tokenizer)
    tasks = [(task_id, json.loads(spec)) for task_id, spec in rows]
    return {"db": str(db), "data_file": str(report.data_file), "command": report.verl_command,
            "lengths": report.verl_lengths.describe(),
            "files": {k: str(v) for k, v in report.verl_files.items()},
            "script": player_verdicts(load_environment("bfcl"), tasks), "dump": str(folder / "dump")}


def import_back(spec: dict, report) -> None:
    """Import verl's dump with import-rollouts; ingest the episode player's rollouts of the same draws as JSON
    lines into a copy of the store; the signals of both must be equal."""
    import shutil

    from click.testing import CliRunner

    from coevolve_engine.cli import cli
    from coevolve_engine.core.store import Store

    print("\n4. verl's dump back into the store (coevolve-engine import-rollouts) vs the same rollouts as JSON lines:")
    episodes = spec["episodes"]
    dumps = sorted(Path(episodes["dump"]).glob("*.jsonl"))
    lines = [json.loads(line) for path in dumps for line in path.read_text().splitlines() if line.strip()]
    played = json.loads(played_file(episodes).read_text())
    records_of = {line["request_id"]: episodes["script"][line["task_id"]]["variants"][played[line["request_id"]][1]]
                  ["record"] for line in lines}
    direct_db = Path(episodes["db"]).with_name("direct.duckdb")
    shutil.copy(episodes["db"], direct_db)
    imported = CliRunner().invoke(cli, ["import-rollouts", "--layout", "verl", str(dumps[0].parent), "--db",
                                        episodes["db"]])
    report(imported.exit_code == 0, f"import-rollouts read {len(dumps)} dump file(s) verl wrote, {len(lines)} "
                                    f"rollouts: {imported.output.strip().splitlines()[-1] if imported.output else ''}")
    jsonl = Path(episodes["dump"]).with_name("direct.jsonl")
    records = []
    for line in lines:
        record = dict(records_of[line["request_id"]])
        record.update(step=line["step"], group_id=line["uid"])
        records.append(json.dumps(record))
    jsonl.write_text("\n".join(records) + "\n")
    ingested = CliRunner().invoke(cli, ["ingest", "trajectories", str(jsonl), "--db", str(direct_db)])
    report(ingested.exit_code == 0, f"the episode player's rollouts of the same draws ingested as JSON lines "
                                    f"({len(records)} lines)" + ("" if ingested.exit_code == 0 else
                                                                 f": {ingested.output.strip()}"))
    with Store(episodes["db"], read_only=True) as store:
        rows = store.execute("SELECT task_id, step, group_id, CAST(messages AS VARCHAR), CAST(actions AS VARCHAR), "
                             "CAST(meta AS VARCHAR) FROM trajectories ORDER BY task_id, group_id").fetchall()
        repeated = [row for row in rows if row[0] == _repeated_task(lines)]
        groups = {row[2] for row in repeated}
        by_request = {json.loads(row[5])["request_id"]: row for row in rows}
        turns_kept = all(json.loads(row[5])["turns"] == episodes["script"][row[0]]["user_turns"] for row in rows)
        actions_kept = all(json.loads(by_request[r][4]) == record["actions"] for r, record in records_of.items())
        chats_kept = all(json.loads(by_request[r][3]) == record["messages"] for r, record in records_of.items())
        report(len(groups) == 2 and all("@" not in g for g in groups) and len(repeated) == 2 * ROLLOUT_N,
               f"the task drawn twice in step {lines[0]['step']}: {len(repeated)} rollouts in {len(groups)} groups "
               f"named by verl's uid ({', '.join(sorted(g[:8] + '...' for g in groups))}), not task@step")
        report(turns_kept and actions_kept and chats_kept,
               f"every imported rollout keeps its user turns, its tool calls and its chat (the episode player's, "
               f"on the same answers); policy step = verl's global step {lines[0]['step']}")
        with Store(direct_db, read_only=True) as direct:
            for view in ("task_steps", "boundary", "forgetting", "rare_patterns", "flagged_trajectories"):
                same = _signal_rows(store, view) == _signal_rows(direct, view)
                report(same, f"signal view {view}: {len(_signal_rows(store, view))} rows, equal to the JSON-lines "
                             f"ingest's")


def _repeated_task(lines: list[dict]) -> str:
    counts: dict[str, int] = {}
    for line in lines:
        counts[line["task_id"]] = counts.get(line["task_id"], 0) + 1
    return max(counts, key=counts.get)


def _signal_rows(store, view: str) -> list[tuple]:
    """A view's rows with trajectory ids replaced by the rollout's task, step, group and chat, sorted."""
    frame = store.sql(f"select * from {view}")
    if "trajectory_id" in frame.columns:
        keys = store.sql("select trajectory_id, task_id || '|' || step || '|' || group_id || '|' || "
                         "CAST(messages AS VARCHAR) as rollout from trajectories")
        frame = frame.join(keys, on="trajectory_id").drop("trajectory_id")
    return sorted(frame.rows(), key=repr)


# -- child: verl plays the export --------------------------------------------------------------------------------

class ScriptedServer:
    """A stand-in for verl's LLM server client (vLLM/SGLang): each request answers with one of its task's scripts
    (the task's k-th request plays variant (task index + k) mod 3, so the rollouts of one draw differ), as token
    ids of the tokenizer, each answer ending in its end-of-turn token. The task is told from the first prompt a
    request sends (``openings``: each task's rendered opening -> the tasks that open so)."""

    def __init__(self, tokenizer, script: dict[str, dict], openings: dict[str, list[str]]) -> None:
        self.tokenizer, self.script, self.openings = tokenizer, script, openings
        self.generated: dict[str, list[list[int]]] = {}
        self.caps: list[int | None] = []  # each request's max_tokens
        self.queues: dict[str, list[str]] = {}
        self.played: dict[str, tuple[str, int]] = {}

    async def generate(self, *, request_id: str, prompt_ids: list[int], sampling_params: dict, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        if request_id not in self.queues:
            tasks = self.openings[self.tokenizer.decode(prompt_ids)]
            task = tasks[len(self.queues) % len(tasks)]  # tasks with the very same opening take turns
            variant = (self.script[task]["index"] + sum(t == task for t, _ in self.played.values())) % len(VARIANTS)
            self.played[request_id] = (task, variant)
            self.queues[request_id] = list(self.script[task]["variants"][variant]["answers"])
            self.generated[request_id] = []
        self.caps.append(sampling_params.get("max_tokens"))
        queue = self.queues[request_id]
        text = queue.pop(0) if queue else "The script ran out."
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        self.generated[request_id].append(ids)
        await asyncio.sleep(0)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def child_check(spec: dict, composed, report) -> str:
    """verl's AgentLoopWorker plays the export; returns the dump folder verl's writer filled."""
    import contextlib
    import io

    import numpy as np
    import torch
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    episodes = spec["episodes"]
    print("\n3. BFCL multi-turn episodes in verl's agent loop (the export's configs), scored by the reward function:")
    overrides = [token for token in episodes["command"].replace("\\\n", " ").split() if "=" in token]
    overrides = [o.replace("MODEL", spec["exports"]["policy"]).replace("ROLLOUTS", episodes["dump"]) for o in overrides]
    overrides = [o for o in overrides if not o.startswith("actor_rollout_ref.rollout.n=")] + [
        f"actor_rollout_ref.rollout.n={ROLLOUT_N}"]  # the lengths are the ones export printed
    config = composed(overrides)
    report(True, f"the command export printed composes strictly ({len(overrides)} overrides, paths filled in; "
                 f"data.max_prompt_length={config.data.max_prompt_length}, data.max_response_length="
                 f"{config.data.max_response_length}, max_tool_response_length="
                 f"{config.actor_rollout_ref.rollout.multi_turn.max_tool_response_length})\n"
                 + "\n".join(f"            {line}" for line in episodes["lengths"].splitlines()))
    tokenizer = AutoTokenizer.from_pretrained(spec["exports"]["tokenizer"])
    with contextlib.redirect_stdout(io.StringIO()):
        dataset = RLHFDataset(data_files=[episodes["data_file"]], tokenizer=tokenizer, config=config.data,
                              processor=None)
    rows = [dataset[i] for i in range(len(dataset))] + [dataset[REPEATED]]  # one task drawn twice in the step
    batch = DataProto.from_single_dict(collate_fn(rows))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch.batch))], dtype=object)
    batch = batch.repeat(repeat_times=ROLLOUT_N, interleave=True)  # as RayPPOTrainer.fit does
    trainer = RayPPOTrainer.__new__(RayPPOTrainer)
    trainer.tokenizer, trainer.global_steps, trainer.config = tokenizer, 1, config
    gen_batch = trainer._get_gen_batch(batch)
    openings: dict[str, list[str]] = {}
    opening_tokens: dict[str, int] = {}  # task -> tokens of its whole opening
    template_kwargs = dict(config.data.get("apply_chat_template_kwargs") or {})  # as the agent loop renders them
    for i in range(len(dataset)):
        row = dataset.dataframe[i]
        text = tokenizer.apply_chat_template(row["prompt"], tools=json.loads(row["extra_info"]["tools"]),
                                             add_generation_prompt=True, tokenize=False, **template_kwargs)
        ids = tokenizer.encode(text, add_special_tokens=False)
        opening_tokens[row["extra_info"]["task_id"]] = len(ids)
        openings.setdefault(tokenizer.decode(ids), []).append(row["extra_info"]["task_id"])
    server = ScriptedServer(tokenizer, episodes["script"], openings)
    with contextlib.redirect_stdout(io.StringIO()):
        worker = AgentLoopWorker(config, llm_client=server)
        output = asyncio.run(worker.generate_sequences(gen_batch))
    batch = batch.union(output)
    names = set(batch.non_tensor_batch["agent_name"])
    report(names == {"coevolve_episode"} and len(batch) == len(rows) * ROLLOUT_N,
           f"verl's AgentLoopWorker played {len(batch)} episodes ({len(dataset)} tasks, one drawn twice, "
           f"rollout.n={ROLLOUT_N}) with agent loop {sorted(names)} and the tools of tool_config.json "
           f"({len(worker.tools)} verl tools)")

    prompt_width = batch.batch["prompts"].shape[1]
    truncated = []
    for i in range(len(batch)):
        kept = int(batch.batch["attention_mask"][i, :prompt_width].sum())
        task = batch.non_tensor_batch["extra_info"][i]["task_id"]
        if kept != opening_tokens[task]:
            truncated.append((task, kept, opening_tokens[task]))
    report(not truncated and prompt_width <= config.data.max_prompt_length,
           f"{len(truncated)} truncated prompts: every episode's prompt is its whole opening "
           f"({min(opening_tokens.values())}-{max(opening_tokens.values())} tokens) within data.max_prompt_length="
           f"{config.data.max_prompt_length} from the export" + (f"; cut: {truncated[:3]}" if truncated else ""))
    cap = json.loads(Path(episodes["files"]["agent_loop"]).read_text())[0]["max_new_tokens"]
    report(bool(server.caps) and all(c is not None and 1 <= c <= cap for c in server.caps),
           f"each of the {len(server.caps)} requests asked for at most {cap} tokens (agent_loop.json max_new_tokens, "
           f"trl-grpo's per-answer cap): max_tokens {min(server.caps or [0])}-{max(server.caps or [0])}")
    from types import SimpleNamespace

    from verl.experimental.agent_loop.agent_loop import AgentLoopBase

    from coevolve_engine.trainers.verl_bfcl import EpisodeAgentLoop, VerlEpisodeError

    hook = "_cap_text_prompt_length"  # verl's own: ct_build_initial_tokens left-truncates the opening through it
    try:
        EpisodeAgentLoop._cap_text_prompt_length(SimpleNamespace(prompt_length=4), list(range(5)))
        report(False, "an opening longer than data.max_prompt_length was let through")
    except VerlEpisodeError as exc:
        report(hasattr(AgentLoopBase, hook), f"an opening longer than data.max_prompt_length is refused, not cut "
                                             f"(EpisodeAgentLoop.{hook} overrides verl's): {exc}")
    compute_score = get_custom_reward_fn(config)
    results, requests, mismatched, unplayed, masks_bad = [], [], [], [], []
    for i in range(len(batch)):
        item = batch[i]
        extra = dict(item.non_tensor_batch["extra_info"])
        extra.update({key: item.non_tensor_batch[key] for key in ("coevolve_answers", "uid")})  # the extra fields
        result = compute_score(data_source=item.non_tensor_batch["data_source"], solution_str="",
                               ground_truth=item.non_tensor_batch["reward_model"]["ground_truth"], extra_info=extra)
        results.append(result)
        requests.append(item.non_tensor_batch["request_id"])
        task, variant = server.played[requests[-1]]
        script = episodes["script"][task]
        record = script["variants"][variant]["record"]
        if result["score"] != record["reward"] or result["stop"] != record["meta"]["stop"]:
            mismatched.append(result["task_id"])
        if result["turns"] != script["user_turns"] or result["stop"] != "done":
            unplayed.append(result["task_id"])
        mask = item.batch["response_mask"].bool()
        responses = item.batch["responses"]
        generated = [t for ids in server.generated[item.non_tensor_batch["request_id"]] for t in ids]
        if responses[mask].tolist() != generated or int(mask.sum()) != len(generated):
            masks_bad.append(result["task_id"])
    verdicts = {"passed": sum(r["score"] == 1.0 for r in results), "failed": sum(r["score"] == 0.0 for r in results)}
    per_variant = {}
    for result, request in zip(results, requests):
        variant = VARIANTS[server.played[request][1]]
        per_variant.setdefault(variant, set()).add(result["score"])
    turns = sorted({episodes["script"][r["task_id"]]["user_turns"] for r in results})
    report(not unplayed, f"every user turn played: {len(results)} episodes of {len(dataset)} tasks with "
                         f"{turns[0]}-{turns[-1]} user turns, each reached its last turn (stop 'done')"
           + (f"; not: {sorted(set(unplayed))[:5]}" if unplayed else ""))
    report(not mismatched, f"reward function's verdict == the episode player's on the same answers in "
                           f"{len(results) - len(mismatched)}/{len(results)} episodes ({verdicts['passed']} passed, "
                           f"{verdicts['failed']} failed; by script: "
                           + "; ".join(f"{v}: {sorted(s)}" for v, s in per_variant.items()) + ")")
    tool_tokens = int((batch.batch["response_mask"] == 0).logical_and(batch.batch["attention_mask"][:, -batch.batch[
        "responses"].shape[1]:] == 1).sum())
    ran = sum(tool.calls for tool in worker.tools)
    actions = sum(len(json.loads(r["actions"])) for r in results)
    report(ran == actions and ran > 0, f"the {actions} tool calls of the episodes ran through the verl tools "
                                       f"(EpisodeTool.create/execute/release on each episode's own BFCL instance)")
    released = [json.loads(batch.non_tensor_batch["coevolve_released"][i]) for i in range(len(batch))]
    missed = [i for i in range(len(batch)) if "miss_func" in batch.non_tensor_batch["extra_info"][i]["task_id"]]
    report(missed and all(released[i] for i in missed) and not any(released[i] for i in range(len(batch))
                                                                    if i not in missed),
           f"functions released mid-episode (miss_func) shown in the release turn's user message in all "
           f"{len(missed)} miss_func episodes: {sorted({name for i in missed for name in released[i]})}")
    report(not masks_bad, f"response mask: 1 on exactly the tokens the server generated, in order, in every episode; "
                          f"0 on the {tool_tokens} tokens of tool results and user turns"
           + (f"; not in: {sorted(set(masks_bad))[:5]}" if masks_bad else ""))

    played_file(episodes).write_text(json.dumps(server.played))
    # verl's own writer: RayPPOTrainer._log_rollout_data -> _dump_generations -> _write_generations
    reward_extra = {key: np.array([r[key] for r in results], dtype=object) for key in results[0] if key != "score"}
    scores = torch.zeros(batch.batch["responses"].shape, dtype=torch.float32)
    scores[:, -1] = torch.tensor([r["score"] for r in results])
    batch.batch["token_level_scores"] = scores
    trainer._init_dump_executor()
    with contextlib.redirect_stdout(io.StringIO()):
        trainer._log_rollout_data(batch, reward_extra, {}, episodes["dump"])
        trainer._shutdown_dump_executor()
    dumped = sorted(Path(episodes["dump"]).glob("*.jsonl"))
    report(len(dumped) == 1, f"verl's RayPPOTrainer._log_rollout_data wrote {[p.name for p in dumped]} "
                             f"(global step {trainer.global_steps}, {len(batch)} rollouts)")
    return episodes["dump"]
