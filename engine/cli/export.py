"""export, import-rollouts: the data contract with trainers that run outside the engine (verl, OpenRLHF)."""

from __future__ import annotations

from pathlib import Path

import click

from coevolve_engine.adapters.agents.base import MAX_NEW_TOKENS
from coevolve_engine.adapters.importers import ImportOptions, import_rollouts as run_import, read_manifest
from coevolve_engine.cli.options import Count, Number, ROUND, db_option, renamed, require_store, wait_option
from coevolve_engine.core.store import Store
from coevolve_engine.core.weights import latest_round
from coevolve_engine.trainers.export import export_round

LAYOUTS = ("verl", "openrlhf")


@click.command(epilog="""\b
Examples:
  coevolve-engine export --round 3 --layout verl -o export/r3
  coevolve-engine export --round 0 --layout openrlhf -o export/r0 --uniform
\b
verl (train.parquet, read by verl's RLHFDataset; keys checked against verl 0.9.1):
  python -m verl.trainer.main_ppo data.train_files=export/r3/train.parquet \\
    data.val_files=export/r3/train.parquet trainer.val_before_train=False \\
    trainer.rollout_data_dir=rollouts/r3 ...
  uniform sampling (the paper's method) is verl's own, data.shuffle=True; to draw by weight add
    data.custom_cls.path=pkg://coevolve_engine.trainers.verl_sampler \\
    data.custom_cls.name=WeightedRLHFDataset +data.weighted_draws=320
  (docs/trainers.md, "verl and OpenRLHF", has the whole command.)
  Each row: data_source, prompt (chat messages), ability, reward_model {style: rule, ground_truth: task id},
  extra_info {index, task_id, env, weight, split, spec (JSON text), interaction_kwargs}.
  Tasks of an installed environment (BFCL) play whole episodes in verl: the prompt is the episode's opening
  (extra_info.tools: its tools, tools_kwargs: every function), agent_name names the agent loop, and
  tool_config.json, interaction_config.json and agent_loop.json are written with the command that uses
  them (coevolve_engine.trainers.verl_bfcl: agent loop, interaction, tools, reward function). Its lengths
  are measured on the episodes (the longest opening with its tools; the longest reference episode, each
  answer allowed --max-new-tokens; the longest tool result) with --tokenizer, so verl cuts nothing.
\b
OpenRLHF (train.jsonl): --prompt_data export/r3/train.jsonl --input_key input --label_key label
  --apply_chat_template (newer releases: --data.prompt_dataset, --data.input_key, --data.label_key);
  label is JSON text {task_id, env, spec} for your reward function; weight is on every line.
\b
manifest.json maps each row index to its task and weight; import-rollouts --manifest reads it.""")
@click.option("--round", "round_", type=ROUND, default=None,
              help="The round to export. [default: the latest round with weights; 0 with --uniform when there are "
                   "none]")
@click.option("--layout", type=click.Choice(LAYOUTS), default=None,
              help="The trainer's data layout: verl (train.parquet, verl's RL dataset) or openrlhf (train.jsonl "
                   "prompt data). Required.")
@click.option("--output", "-o", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory to write the data file and manifest.json into (created if missing). Required.")
@click.option("--weights-from-round", type=ROUND, default=None,
              help="Read weights from this round of task_weights instead of --round's.")
@click.option("--uniform", is_flag=True, help="Ignore task_weights: every task in the store with weight 1.")
@click.option("--interaction", default="coevolve", show_default=True,
              help="verl: interaction name put in extra_info.interaction_kwargs (empty string: none, and rows "
                   "of single prompts instead of whole episodes).")
@click.option("--tool", "tools", multiple=True,
              help="verl: a tool name that receives the task in extra_info.tools_kwargs (repeatable).")
@click.option("--tokenizer", default=None, metavar="PATH",
              help="verl: the policy's tokenizer (a model or tokenizer directory) to measure the episodes' lengths "
                   "with; without it they are bounded by UTF-8 bytes (any byte-level BPE vocabulary uses fewer "
                   "tokens), which over-reserves.")
@click.option("--max-new-tokens", type=Count(min=1), default=MAX_NEW_TOKENS, show_default=True,
              help="verl: tokens the policy may write per answer (the run's [episode] max_new_tokens); each answer "
                   "of the expected episodes is allowed this many in data.max_response_length.")
@click.option("--force", is_flag=True,
              help="Replace files in --output that are not of the kind written (a store is never replaced).")
@renamed("--format", "layout", type=click.Choice(LAYOUTS))
@renamed("--out", "output", type=click.Path(file_okay=False, path_type=Path))
@db_option
@wait_option
def export(round_: int | None, layout: str | None, output: Path | None, weights_from_round: int | None, uniform: bool,
           interaction: str, tools: tuple[str, ...], tokenizer: str | None, max_new_tokens: int, force: bool,
           db: Path, wait: float) -> None:
    """Write a round's weighted task set for verl or OpenRLHF: one row per task with a weight above 0.

    Weights come from the store's task_weights table (the curriculum writes one set per round), from
    another round's set with --weights-from-round, or are all 1 with --uniform. Every row carries the task's
    weight and its full spec, so a reward function or tool can score it with the task's environment.
    """
    if layout is None:
        raise click.UsageError("Missing option '--layout' (verl or openrlhf).")
    if output is None:
        raise click.UsageError("Missing option '-o' / '--output' (the directory to write into).")
    with Store(db, read_only=True, wait=wait) as store:
        if round_ is None:
            round_ = latest_round(store)
            if round_ is None and not uniform:
                raise click.ClickException("the store has no weights yet: compute a round's with `coevolve-engine "
                                           "weights`, or export every task with weight 1 with --uniform")
            round_ = 0 if round_ is None else round_
        report = export_round(store, round_, layout, output, weights_from_round=weights_from_round, uniform=uniform,
                              interaction=interaction or None, tools=tools, force=force, tokenizer=tokenizer,
                              max_new_tokens=max_new_tokens)
    click.echo(f"{report.data_file}: {report.rows} tasks (weights from {report.weights_source}"
               + (f"; {report.left_out} with weight 0 left out" if report.left_out else "") + ")")
    click.echo(f"{report.manifest}: row index -> task id and weight")
    if report.verl_files:
        click.echo(f"{report.verl_files['tools']}, {report.verl_files['interaction']}, "
                   f"{report.verl_files['agent_loop']}: verl's tools, interaction and agent loop for whole episodes")
        click.echo(report.verl_lengths.describe())
        click.echo("train with (MODEL, ROLLOUTS and the GPUs are yours; the hyperparameters: docs/trainers.md, "
                   "\"verl and OpenRLHF\"):")
        click.echo(report.verl_command)


@click.command(name="import-rollouts", epilog="""\b
Examples:
  coevolve-engine import-rollouts --layout verl rollouts/r3 --step-offset 120
  coevolve-engine import-rollouts --layout verl rollouts/r3/17.jsonl --reward-range -1 1 --manifest export/r3
\b
Each dump line becomes one trajectory: task from the line's task_id, else its gts (export sets
ground_truth to the task id), else its index in --manifest; step = step + --step-offset;
group = the line's uid (one verl draw), else task@step; reward = (score - LO) / (HI - LO) clipped to
[0, 1], raw score kept in meta; messages and actions = the line's (JSON text the reward function of
coevolve_engine.trainers.verl_bfcl writes: the whole chat, the tool calls), else the input as the user
turn, the output as the assistant turn and its <tool_call> blocks.""")
@click.argument("paths", metavar="FILE_OR_DIR...", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--layout", default="verl", show_default=True,
              help="The dump's layout: a registered rollout importer (built in: verl).")
@renamed("--format", "layout", type=str)
@click.option("--step-offset", type=Count(), default=0, show_default=True,
              help="Added to every dumped step, to place the run after the store's history.")
@click.option("--reward-range", type=(Number(), Number()), default=(0.0, 1.0), show_default=True, metavar="LO HI",
              help="The trainer's score range, mapped to rewards in [0, 1]; scores outside it are clipped.")
@click.option("--manifest", type=click.Path(exists=True, path_type=Path), default=None,
              help="manifest.json (or its export directory) to map a line's index to its task.")
@click.option("--policy", default=None, help="Checkpoint id to record on every imported rollout.")
@click.option("--no-actions", is_flag=True, help="Do not read <tool_call> blocks as the rollout's actions.")
@db_option
@wait_option
def import_rollouts(paths: tuple[Path, ...], layout: str, step_offset: int, reward_range: tuple[float, float],
                    manifest: Path | None, policy: str | None, no_actions: bool, db: Path, wait: float) -> None:
    """Import rollouts a trainer dumped (verl's trainer.rollout_data_dir) as trajectories.

    A directory means its *.jsonl files in step order. Each file is one unit: checked whole and ingested
    whole or not at all; the error names the file, the line and the field. Importing a file twice adds
    nothing. Rollouts must name tasks that are in the store.
    """
    if not reward_range[1] > reward_range[0]:
        raise click.BadParameter("HI must be greater than LO", param_hint="--reward-range")
    require_store(db)
    options = ImportOptions(step_offset=step_offset, reward_range=reward_range, policy=policy,
                            parse_actions=not no_actions,
                            index_to_task=read_manifest(manifest) if manifest else {})
    with Store(db, wait=wait) as store:
        for report in run_import(store, paths, format=layout, options=options):
            click.echo(f"{report.path}: {report.records} rollouts, {report.added} added, "
                       f"{report.skipped} already present")


def register(group: click.Group) -> None:
    for command in (export, import_rollouts):
        group.add_command(command)
