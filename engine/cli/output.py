"""One set of output formats for every command that prints rows: table, json, csv, parquet."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import click
import polars as pl

OUTPUT_FORMATS = ("table", "json", "csv", "parquet")

format_option = click.option(
    "--format", "format_", type=click.Choice(OUTPUT_FORMATS), default="table", show_default=True,
    help="Output format. parquet needs --output or a redirected standard output.",
)
output_option = click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Write to this file instead of standard output.",
)


def render_table(frame: pl.DataFrame) -> str:
    if frame.width == 0:
        return "(no columns)"
    with pl.Config(
        tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=60, tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True, tbl_width_chars=200, tbl_formatting="ASCII_MARKDOWN",
        float_precision=4,
    ):
        return str(frame)


def _json_cell(value: object) -> object:
    return value.isoformat() if hasattr(value, "isoformat") else value


def write_frame(frame: pl.DataFrame, format_: str, output: Path | None) -> None:
    """Write ``frame`` in ``format_`` to ``output`` (a file) or standard output."""
    if format_ == "parquet":
        if output is None and sys.stdout.isatty():
            raise click.UsageError("--format parquet writes binary data: pass --output FILE or redirect stdout")
        if output is not None:
            frame.write_parquet(output)
        else:
            buffer = io.BytesIO()
            frame.write_parquet(buffer)
            sys.stdout.buffer.write(buffer.getvalue())
            sys.stdout.flush()
        return
    if format_ == "csv":
        text = frame.write_csv()
    elif format_ == "json":
        rows = [{k: _json_cell(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]
        text = json.dumps(rows, indent=2, default=str, ensure_ascii=False) + "\n"
    else:
        text = render_table(frame) + "\n"
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)
