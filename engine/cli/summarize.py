"""summarize: one LLM summary per failure pattern, written to failure_patterns.summary."""

from __future__ import annotations

from pathlib import Path

import click

from coevolve_engine.cli.options import Count, Number, ROUND, connect, db_option, endpoint_options, long_job, wait_option
from coevolve_engine.core.endpoint import CallSettings
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.models.llm import LLMClient
from coevolve_engine.synthesis.summaries import PatternOutcome, summarise_patterns

QUERY_HINT = "select pattern_id, summary->>'failure_cause' from failure_patterns"


def _clip(text: str, limit: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@click.command(epilog=f"""\b
Examples:
  coevolve-engine summarize --model openai/gpt-4o-mini
  coevolve-engine summarize --model hosted_vllm/Qwen/Qwen3-8B --api-base http://127.0.0.1:8000/v1 --round 2
\b
Then read them:
  coevolve-engine query "{QUERY_HINT}"
  coevolve-engine query "select purpose, count(*), sum(prompt_tokens + completion_tokens), sum(cost)
      from llm_calls group by purpose\"""")
@click.option("--model", required=True,
              help="A litellm model string: openai/..., hosted_vllm/... (with --api-base), any provider.")
@click.option("--round", "round_", type=ROUND, default=None,
              help="Summarise this round's patterns (default: the latest round that has patterns).")
@click.option("--cache/--no-cache", default=True, show_default=True,
              help="Answer a request identical to an earlier answered one from llm_calls, for free.")
@click.option("--max-members", type=Count(min=0), default=5, show_default=True,
              help="Other rollouts of the pattern shown in the prompt besides its representative.")
@click.option("--max-attempts", type=Count(min=1), default=3, show_default=True,
              help="Answers asked for per pattern while they are not the summary's JSON schema.")
@click.option("--temperature", type=Number(min=0), default=0.0, show_default=True,
              help="Sampling temperature.")
@click.option("--max-tokens", type=Count(min=1), default=2048, show_default=True,
              help="Tokens per answer.")
@endpoint_options
@long_job("summarize")
@db_option
@wait_option
def summarize(model: str, api_base: str | None, api_key: str | None, round_: int | None, cache: bool,
              max_members: int, max_attempts: int, temperature: float, max_tokens: int, timeout: float,
              retries: int, db: Path, wait: float) -> None:
    """Ask an LLM for one summary of each failure pattern that has none yet.

    Each pattern of the round gets ONE request carrying its dominant signal, its signal counts, its
    representative rollout as text and a few other members. The answer must be a JSON object with summary,
    failure_cause, instability_pattern, focus_pattern, exploration_objectives and do_not_repeat; an answer
    that is not is shown back to the model with the problem (--max-attempts). The accepted object goes to
    failure_patterns.summary; otherwise the reason goes to summary_error and the next pattern runs (a rerun
    tries it again). Every call is logged in llm_calls with its tokens, cost and prompt version.
    """
    try:
        client = LLMClient(db, connect(model, api_base, api_key), calls=CallSettings(timeout, retries),
                           temperature=temperature, max_tokens=max_tokens, cache=cache, wait=wait)
    except ValueError as exc:
        raise CoevolveError(f"cannot use model {model!r}: {exc}") from exc

    def show(outcome: PatternOutcome) -> None:
        cached = f", {outcome.usage.cached} cached" if outcome.usage.cached else ""
        head = f"{outcome.pattern_id}  {outcome.dominant_signal:<10} {outcome.size:>4} rollouts  " \
               f"({outcome.usage.requests} calls{cached})"
        if outcome.ok:
            click.echo(f"{head}  summarised: {_clip(outcome.summary['failure_cause'])}")
        else:
            click.echo(f"{head}  FAILED: {_clip(outcome.error or '', 300)}")

    report = summarise_patterns(db, round=round_, client=client, max_members=max_members,
                                max_attempts=max_attempts, wait=wait, on_outcome=show)
    usage = report.usage
    done = f", {report.already_summarised} already summarised" if report.already_summarised else ""
    unpriced = f" ({usage.unpriced} calls unpriced)" if usage.unpriced else ""
    click.echo(f"round {report.round}: {report.summarised} patterns summarised, {report.failed} failed{done}; "
               f"{report.calls} calls to {model} and {report.cached_calls} answered from the cache, "
               f"{usage.prompt_tokens} + {usage.completion_tokens} tokens, cost ${usage.cost:.4f}{unpriced}, "
               f"{report.seconds:.1f} s")
    click.echo(f'read them: coevolve-engine query "{QUERY_HINT}" --db {db}')


def register(group: click.Group) -> None:
    group.add_command(summarize)
