"""synthesize, validate, candidates: from a round's failure patterns to validated new tasks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from coevolve_engine.adapters.agents.base import MAX_EXPLORE_STEPS, MAX_STEPS
from coevolve_engine.cli.options import Count, Number, ROUND, SEED, connect, db_option, endpoint_options, long_job, renamed, wait_option
from coevolve_engine.cli.output import force_option, format_option, output_option, write_frame, write_text_output
from coevolve_engine.cli.rollout import make_agent
from coevolve_engine.core.endpoint import CallSettings
from coevolve_engine.core.registry import PluginContext
from coevolve_engine.models.llm import LLMClient
from coevolve_engine.rollouts.jobs import MAX_GROUP_SIZE
from coevolve_engine.core.store import Store
from coevolve_engine.synthesis.candidates import MAX_CANDIDATES, pending_candidates, synthesize as propose
from coevolve_engine.synthesis.contamination import DEFAULT_THRESHOLD as CONTAMINATION_THRESHOLD
from coevolve_engine.synthesis.judge import LLMJudge
from coevolve_engine.synthesis.validation import ATTEMPTS, NOVELTY_THRESHOLD, ValidationOptions, validate_candidates


def round_option(help: str):
    return click.option("--round", "round_", type=ROUND, default=None, help=help)


class Kinds(click.ParamType):
    """KIND=SHARE,...: the share of each kind of task an LLM synthesizer asks its model for."""

    name = "KIND=SHARE,..."

    def convert(self, value, param, ctx):
        if isinstance(value, dict):
            return value
        shares = {}
        for item in filter(None, (part.strip() for part in str(value).split(","))):
            kind, _, share = item.partition("=")
            try:
                shares[kind.strip()] = float(share)
            except ValueError:
                self.fail(f"{item!r} is not KIND=SHARE (e.g. base=1,miss_func=1)", param, ctx)
        return shares


def kinds_option(what: str = ""):
    return click.option("--kinds", type=Kinds(), default=None,
                        help=f"{what + ': t' if what else 'T'}he share of each kind of task asked for, e.g. base=1,"
                             "miss_func=1,miss_param=1,long_context=1 (BFCL's multi-turn kinds, drawn per task from "
                             "--seed); default: base only.")


@click.command(epilog="""\b
Examples:
  coevolve-engine synthesize --max-candidates 50
  coevolve-engine synthesize --round 2 --synthesizer offline:bfcl --seed 7
  coevolve-engine synthesize --synthesizer llm --model openai/gpt-4o-mini --explorer-model hosted_vllm/Qwen/Qwen3-8B \
      --explorer-api-base http://127.0.0.1:8000/v1
\b
Then: coevolve-engine validate, and coevolve-engine candidates --verdict accepted.""")
@round_option("The round whose failure patterns to use (default: the latest round that has any).")
@click.option("--synthesizer", default=None,
              help="A registered synthesizer (default: offline:ENV, ENV the environment of the round's pattern "
                   "tasks, built in or from a plugin package). offline:bfcl recombines and perturbs the BFCL tasks "
                   "of each pattern (no model needed); llm explores the environment around each pattern with an explorer "
                   "model and abstracts tasks from it (needs --model); llm-unguided explores generated worlds of "
                   "--env with no pattern or signal (the 'random exploration' ablation; needs --model).")
@click.option("--env", default="bfcl", show_default=True, help="llm-unguided: the environment to explore.")
@click.option("--model", default=None, help="llm: the model that writes tasks (any litellm model string).")
@click.option("--explorer-model", default=None, help="llm: the model that acts in the environment (default: --model).")
@endpoint_options
@click.option("--explorer-api-base", default=None, help="llm: base URL for --explorer-model (default: --api-base).")
@click.option("--tasks-per-pattern", type=Count(min=1), default=2, show_default=True,
              help="llm: tasks to abstract from each pattern's exploration (llm-unguided: from each world's).")
@click.option("--max-explore-steps", type=Count(min=1), default=MAX_EXPLORE_STEPS, show_default=True,
              help="llm: tool calls the explorer may make in one exploration.")
@click.option("--no-cache", is_flag=True, help="llm: ask the models again even for requests answered before.")
@click.option("--max-candidates", type=Count(1, MAX_CANDIDATES), default=20, show_default=True,
              help="Candidates to propose in all, shared among the patterns in proportion to their size.")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of every random choice: the same store and seed give the same candidates.")
@kinds_option("llm, llm-unguided")
@long_job("synthesize")
@db_option
@wait_option
def synthesize(round_: int | None, synthesizer: str, env: str, model: str | None, explorer_model: str | None,
               api_base: str | None, api_key: str | None, timeout: float, retries: int,
               explorer_api_base: str | None, tasks_per_pattern: int,
               max_explore_steps: int, no_cache: bool, max_candidates: int, seed: int,
               kinds: dict[str, float] | None, db: Path, wait: float) -> None:
    """Propose candidate tasks for a round's failure patterns and store them as pending.

    The tasks that each pattern's member trajectories attempted are the seeds; the pattern's dominant signal
    (forgetting, boundary, rare) decides how they are varied. Candidates already stored are not added again.
    """
    options: dict = {}
    if synthesizer in ("llm", "llm-unguided"):
        if not model:
            raise click.UsageError(f"--synthesizer {synthesizer} needs --model")
        explorer = connect(explorer_model or model, explorer_api_base or api_base, api_key, "--explorer-model")
        options = dict(model=connect(model, api_base, api_key), explorer=explorer,
                       max_explore_steps=max_explore_steps, cache=not no_cache,
                       calls=CallSettings(timeout, retries), kinds=kinds)
        if synthesizer == "llm":
            options["tasks_per_pattern"] = tasks_per_pattern
        else:
            options["tasks_per_world"] = tasks_per_pattern
    with Store(db, create=False, wait=wait) as store:
        report = propose(store, round=round_, synthesizer=synthesizer, max_candidates=max_candidates, seed=seed,
                         options=options, context=PluginContext(store_path=db, env=env, seed=seed, wait=wait))
    signals = ", ".join(f"{signal} {count}" for signal, count in sorted(report.by_signal.items())) or "none"
    click.echo(f"round {report.round}: {report.synthesizer} proposed {report.proposed} candidates for "
               f"{report.patterns} failure patterns ({signals}); {report.added} new, stored as pending")
    click.echo(f"next: coevolve-engine validate --round {report.round} --db {db}")


@click.command(epilog="""\b
Checks, in order; the first that fails is the candidate's reason:
  synthesis      the synthesizer wrote a task (an LLM answer that never fit the schema is kept, rejected)
  kind           (a task written as a kind) it keeps the kind's rules (BFCL: miss_func, miss_param, long_context)
  schema         the environment accepts the spec
  contaminated   (when its environment has eval tasks) its task words' similarity to every eval task < threshold
                 (masked words and keyed literals of every user turn: other numbers, names or sentence order
                 do not hide a copy; the detail names the nearest eval task)
  ground_truth   the reference solution replays with no error and scores 1
  novelty        prompt similarity to the training tasks and earlier accepted candidates < threshold
                 (eval tasks take no part; the similarity to them is kept in eval_similarity)
  agent_attempt  with --agent-model: K rollouts, success rate recorded (rejects only above --max-success-rate)
  judge          with --judge-model: an LLM rules on the task with a strict rubric (prompt judge.md)
\b
Examples:
  coevolve-engine validate --round 1
  coevolve-engine validate --judge-model openai/gpt-4o-mini
  coevolve-engine validate --agent-model hosted_vllm/Qwen/Qwen3-4B --api-base http://127.0.0.1:8000/v1 \\
      --attempts 4""")
@round_option("Only the candidates of this round (default: every pending candidate).")
@click.option("--novelty-threshold", type=Number(0, 1, min_open=True), default=NOVELTY_THRESHOLD,
              show_default=True,
              help="Reject a candidate whose prompt has a cosine similarity at least this high to a stored training "
                   "task's.")
@click.option("--contamination-threshold", type=Number(0, 1, min_open=True),
              default=CONTAMINATION_THRESHOLD, show_default=True,
              help="Refuse (reason 'contaminated') a candidate whose task words have a Jaccard similarity at least "
                   "this high to an eval task's.")
@click.option("--agent-model", default=None,
              help="Also roll this agent out K times on each candidate (a litellm model string, a local model "
                   "directory, or 'reference' to play each candidate's reference solution: a check that the task "
                   "plays through the episode player) and record its success rate.")
@endpoint_options
@click.option("--attempts", type=Count(1, MAX_GROUP_SIZE), default=ATTEMPTS, show_default=True,
              help="Agent rollouts per candidate.")
@renamed("-k", "attempts", type=Count(1, MAX_GROUP_SIZE))
@click.option("--max-success-rate", type=Number(0, 1), default=None,
              help="Reject a candidate the agent solves more often than this (e.g. 0.99: a group that always "
                   "succeeds has no GRPO advantage). Default: record the rate, reject nothing on it.")
@click.option("--judge-model", default=None,
              help="Finally ask this model (litellm string) to rule on each task with a strict rubric; "
                   "its calls are logged in llm_calls.")
@click.option("--judge-api-base", default=None, help="Base URL of an OpenAI-compatible server for --judge-model.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@long_job("validate")
@db_option
@wait_option
def validate(round_: int | None, novelty_threshold: float, contamination_threshold: float, agent_model: str | None, api_base: str | None,
             api_key: str | None, timeout: float, retries: int, attempts: int, max_success_rate: float | None, judge_model: str | None,
             judge_api_base: str | None, progress: bool, db: Path, wait: float) -> None:
    """Run the validation checks on every pending candidate and record each verdict.

    An accepted candidate becomes a task (source 'synthesized'); every candidate stays in the candidates table
    with its verdict, its reason and the outcome of each check.
    """
    if max_success_rate is not None and agent_model is None:
        raise click.UsageError("--max-success-rate needs --agent-model")
    agent = None
    if agent_model is not None:
        agent = make_agent(connect(agent_model, api_base, api_key, "--agent-model"), temperature=0.9, max_tokens=1024,
                           timeout=timeout, retries=retries, max_steps=MAX_STEPS, policy=None)
    judge = None
    if judge_model is not None:
        judge = LLMJudge(LLMClient(db, connect(judge_model, judge_api_base, api_key, "--judge-model"),
                                   calls=CallSettings(timeout, retries), wait=wait), db)
    with Store(db, read_only=True, wait=wait) as store:
        pending = len(pending_candidates(store, round_))
    if not pending:
        click.echo("no pending candidates" + (f" in round {round_}" if round_ is not None else ""))
        return
    with click.progressbar(length=pending, label="validating", file=sys.stderr,
                           hidden=not progress) as bar:
        options = ValidationOptions(novelty_threshold=novelty_threshold,
                                    contamination_threshold=contamination_threshold, agent=agent, attempts=attempts,
                                    max_success_rate=max_success_rate, judge=judge)
        report = validate_candidates(db, round=round_, options=options, wait=wait,
                                     on_verdict=lambda verdict: bar.update(1))
    reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(report.by_reason.items()))
    click.echo(f"validated {len(report.verdicts)} candidates: {report.accepted} accepted, {report.rejected} "
               f"rejected" + (f" ({reasons})" if reasons else ""))
    click.echo(f"see them: coevolve-engine candidates --db {db}" + (f" --round {round_}" if round_ is not None else ""))


_LIST_COLUMNS = ("candidate_id, round, pattern_id, signal, synthesizer, verdict, reason, round(novelty, 4) AS novelty, "
                 "success_rate, task_id, prompt")
_FULL_COLUMNS = ("spec", "checks", "provenance")


@click.command(epilog="""\b
Examples:
  coevolve-engine candidates --verdict rejected
  coevolve-engine candidates --round 1 --verdict accepted --full --format json
  coevolve-engine query "select reason, count(*) from candidates group by reason" """)
@round_option("Only the candidates of this round (default: all).")
@click.option("--verdict", type=click.Choice(["accepted", "rejected", "pending"]), default=None,
              help="Only candidates with this verdict.")
@click.option("--full", is_flag=True, help="Add the spec, the outcome of each check and the provenance.")
@format_option
@output_option
@force_option
@db_option
@wait_option
def candidates(round_: int | None, verdict: str | None, full: bool, format_: str, output: Path | None, force: bool,
               db: Path, wait: float) -> None:
    """List candidate tasks with their verdicts, in the order they were proposed."""
    columns = _LIST_COLUMNS + "".join(f", {name}" for name in _FULL_COLUMNS if full)
    with Store(db, read_only=True, wait=wait) as store:
        frame = store.sql(
            f"SELECT {columns} FROM candidates WHERE ($round IS NULL OR round = $round) "
            "AND ($verdict IS NULL OR verdict = $verdict) ORDER BY created_at, candidate_id",
            {"round": round_, "verdict": verdict})
    if full and format_ == "json":  # nested JSON, not JSON in strings
        rows = [{k: json.loads(v) if k in _FULL_COLUMNS and isinstance(v, str) else v for k, v in row.items()}
                for row in frame.iter_rows(named=True)]
        text = json.dumps(rows, indent=2, ensure_ascii=False, default=str) + "\n"
        write_text_output(text, format_, output, db=db, force=force)
        return
    write_frame(frame, format_, output, db=db, force=force)


def register(group: click.Group) -> None:
    for command in (synthesize, validate, candidates):
        group.add_command(command)
