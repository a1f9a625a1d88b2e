"""Export a round's weighted task set for trainers that run outside the engine (verl, OpenRLHF on Ray).

    from coevolve_engine.trainers.export import export_round
    report = export_round(store, round=3, format="verl", out="export/r3")              # task_weights round 3
    report = export_round(store, round=3, format="openrlhf", out="x", weights={"t1": 2.0, "t2": 1.0})

Writes ``train.parquet`` (verl) or ``train.jsonl`` (OpenRLHF), one row per task with a weight above 0 in
task_id order, and ``manifest.json``: the round, where the weights came from, and ``index -> task_id ->
weight`` for every row, which ``coevolve-engine import-rollouts --manifest`` uses to map rollouts back.
The layouts are described in ``coevolve_engine.trainers.export.layouts``; point verl's sampler at
``coevolve_engine.trainers.verl_sampler.WeightedSampler`` to draw rows by weight.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from coevolve_engine.adapters.agents.base import MAX_NEW_TOKENS
from coevolve_engine.core.outputs import check_output, write_output
from coevolve_engine.trainers.export.layouts import ExportTask, openrlhf_record, verl_row
from coevolve_engine.trainers.export.verl_files import (
    AGENT_LOOP,
    FILES as VERL_FILES,
    episode_openings,
    verl_command,
    write_verl_files,
)
from coevolve_engine.trainers.export.verl_lengths import VerlLengths, measure as measure_lengths
from coevolve_engine.trainers.export.weights import (
    ExportError,
    RoundWeights,
    resolve_weights,
    weights_from_table,
    weights_mapping,
)

if TYPE_CHECKING:
    from coevolve_engine.core.store import Store

FORMATS = ("verl", "openrlhf")
DATA_FILES = {"verl": "train.parquet", "openrlhf": "train.jsonl"}
MANIFEST = "manifest.json"

__all__ = [
    "DATA_FILES",
    "ExportError",
    "ExportReport",
    "FORMATS",
    "MANIFEST",
    "export_round",
    "load_tasks",
    "resolve_weights",
    "weights_from_table",
    "weights_mapping",
]


@dataclass(frozen=True)
class ExportReport:
    """What one export wrote."""

    format: str
    round: int
    data_file: Path
    manifest: Path
    rows: int
    left_out: int  # tasks with weight 0
    weights_source: str
    verl_files: dict[str, Path] | None = None  # verl: tool, interaction and agent-loop configs (episodes played)
    verl_command: str | None = None  # verl: a main_ppo command that trains on the export with them
    verl_lengths: "VerlLengths | None" = None  # verl: the lengths measured on the episodes, set by the command


def load_tasks(store: "Store", weights: dict[str, float]) -> list[ExportTask]:
    """The tasks named in ``weights`` with a weight above 0, in task_id order; unknown ids are an error, and so
    are held-out ones (split 'eval'): no trainer may see them."""
    wanted = [task_id for task_id, weight in weights.items() if weight > 0]
    held_out = [task_id for (task_id,) in store.execute(
        "SELECT task_id FROM tasks WHERE split = 'eval' AND list_contains($ids, task_id) ORDER BY task_id",
        {"ids": wanted}).fetchall()]
    if held_out:
        more = f" and {len(held_out) - 5} more" if len(held_out) > 5 else ""
        raise ExportError(f"weights name held-out eval tasks (split 'eval'), which no trainer may see: "
                          f"{', '.join(map(repr, held_out[:5]))}{more}")
    rows = store.execute(
        "SELECT task_id, env, prompt, CAST(spec AS VARCHAR) FROM tasks "
        "WHERE list_contains($ids, task_id) ORDER BY task_id",
        {"ids": wanted},
    ).fetchall()
    found = {row[0] for row in rows}
    missing = [task_id for task_id in wanted if task_id not in found]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ExportError(
            f"weights name tasks that are not in the store: {', '.join(map(repr, missing[:5]))}{more}"
        )
    return [ExportTask(task_id, env, prompt, spec, weights[task_id]) for task_id, env, prompt, spec in rows]


def _no_null_types(data_type):
    """``data_type`` with every all-null column typed as string, so exports of different rounds concatenate."""
    if pa.types.is_null(data_type):
        return pa.string()
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(_no_null_types(field.type)) for field in data_type])
    if pa.types.is_list(data_type):
        return pa.list_(data_type.value_field.with_type(_no_null_types(data_type.value_type)))
    return data_type


def _parquet_bytes(rows: list[dict[str, Any]]) -> bytes:
    table = pa.Table.from_pylist(rows)
    schema = pa.schema([field.with_type(_no_null_types(field.type)) for field in table.schema])
    buffer = io.BytesIO()
    pq.write_table(table.cast(schema), buffer)
    return buffer.getvalue()


def _jsonl_text(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def export_round(
    store: "Store",
    round: int,
    format: str,
    out: str | os.PathLike[str],
    *,
    weights: Any = None,
    weights_from_round: int | None = None,
    uniform: bool = False,
    interaction: str | None = "coevolve",
    tools: tuple[str, ...] = (),
    force: bool = False,
    tokenizer: str | None = None,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> ExportReport:
    """Write round ``round``'s weighted task set to directory ``out`` in ``format`` ('verl' or 'openrlhf').

    ``weights`` (a mapping task_id -> weight, or a polars/pyarrow table with task_id and weight) overrides
    the store; otherwise the weights are read from ``task_weights`` for ``weights_from_round`` (default
    ``round``), or every task gets weight 1 with ``uniform=True``. ``interaction`` and ``tools`` name the
    verl interaction and tools that receive the task (see ``layouts``). For whole episodes, verl's lengths are
    measured on them (``verl_lengths``) with ``tokenizer`` (the policy's; None: a stated byte bound), each answer
    allowed ``max_new_tokens``, and set by the printed command. Files are written as every output is
    (``coevolve_engine.core.outputs``): never over the store, nor, without ``force``, over a file of another kind.

    It takes twelve parameters because they are `export`'s own options, each a single setting passed through as
    the command reads it.
    """
    if format not in FORMATS:
        raise ExportError(f"unknown export format {format!r}; known: {', '.join(FORMATS)}")
    resolved: RoundWeights = resolve_weights(
        store, round, weights=weights, weights_from_round=weights_from_round, uniform=uniform
    )
    tasks = load_tasks(store, resolved.weights)
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"--out {out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    data_file = out_dir / DATA_FILES[format]
    manifest = out_dir / MANIFEST
    check_output(data_file, "parquet" if format == "verl" else "jsonl", db=store.path, force=force)
    check_output(manifest, "json", db=store.path, force=force)
    files: dict[str, Path] | None = None
    command: str | None = None
    lengths: VerlLengths | None = None
    if format == "verl":
        environments: dict[str, Any] = {}
        openings = episode_openings(tasks, environments) if interaction and not tools else {}
        for name in VERL_FILES.values() if openings else ():
            check_output(out_dir / name, "json", db=store.path, force=force)
        if openings:  # measured before anything is written: a length that cannot be met is refused first
            lengths = measure_lengths(environments, tasks, openings, tokenizer=tokenizer,
                                      max_new_tokens=max_new_tokens)
        rows = [verl_row(task, i, interaction=interaction, tools=tuple(tools), opening=openings.get(task.task_id),
                         agent_loop=AGENT_LOOP) for i, task in enumerate(tasks)]
        write_output(data_file, _parquet_bytes(rows), "parquet", db=store.path, force=force)
        if openings:
            files = write_verl_files(out_dir, list(openings.values()), interaction, db=store.path, force=force,
                                     max_new_tokens=max_new_tokens)
            command = verl_command(data_file, files, lengths)
    else:
        rows = [openrlhf_record(task, i) for i, task in enumerate(tasks)]
        write_output(data_file, _jsonl_text(rows), "jsonl", db=store.path, force=force)
    write_output(manifest, json.dumps({
        "format": format,
        "round": round,
        "weights_source": resolved.source,
        "data_file": data_file.name,
        "rows": [{"index": i, "task_id": t.task_id, "weight": t.weight} for i, t in enumerate(tasks)],
    }, indent=1) + "\n", "json", db=store.path, force=force)
    return ExportReport(
        format, round, data_file, manifest, len(tasks), len(resolved.weights) - len(tasks), resolved.source,
        files, command, lengths,
    )
