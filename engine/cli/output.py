"""One set of output formats for every command that prints rows: table, json, jsonl, csv, parquet."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import click
import polars as pl

from coevolve_engine.core.outputs import check_output, write_output

OUTPUT_FORMATS = ("table", "json", "jsonl", "csv", "parquet")

format_option = click.option(
    "--format", "format_", type=click.Choice(OUTPUT_FORMATS), default="table", show_default=True,
    help="Output format. parquet needs --output or a redirected standard output.",
)
output_option = click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Write to this file instead of standard output (never the store or another DuckDB file).",
)
force_option = click.option(
    "--force", is_flag=True,
    help="Replace an existing output file even when it is not of the kind being written (a store never is).",
)


#: the widest a table the CLI prints may be; a wider one is printed as blocks of columns, each repeating the first
TABLE_WIDTH = 120


def _number(value: float | None, digits: int | None) -> str | None:
    if value is None:
        return None
    if digits is not None:
        return f"{value:.{digits}f}"
    text = f"{value:.4f}".rstrip("0").rstrip(".")  # the precision the data has, at most 4 decimals
    return "0" if text in ("", "-0") else text


def _digits(name: str) -> int | None:
    """One decimal for seconds and percentages, by the column's name; None: the data's own precision."""
    lowered = name.lower()
    if "seconds" in lowered or lowered.endswith(("_s", "_sec")):
        return 1
    if lowered.endswith(("%", "_pct", "percent")):
        return 1
    return None


def readable(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its float columns as people read them: seconds and percentages with one decimal, other
    numbers (rates, shares, rewards) with the precision they have, up to four decimals, no trailing zeros."""
    return frame.with_columns(
        pl.Series(name, [_number(v, _digits(name)) for v in frame[name].to_list()], dtype=pl.String)
        for name, dtype in frame.schema.items() if dtype.is_float())


def _render(frame: pl.DataFrame) -> str:
    with pl.Config(
        tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=60, tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True, tbl_width_chars=10_000, tbl_formatting="ASCII_MARKDOWN",
    ):
        return str(frame)


def _width(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def render_table(frame: pl.DataFrame, width: int = TABLE_WIDTH) -> str:
    """A markdown-style table of ``frame`` (numbers by ``readable``) at most ``width`` columns wide where it can
    be: a wider one is cut into blocks of columns, each block repeating the first column."""
    if frame.width == 0:
        return "(no columns)"
    frame = readable(frame)
    whole = _render(frame)
    if _width(whole) <= width or frame.width <= 2:
        return whole
    first, rest = frame.columns[0], frame.columns[1:]
    blocks, current = [], []
    for column in rest:
        if current and _width(_render(frame.select(first, *current, column))) > width:
            blocks.append(current)
            current = []
        current.append(column)
    blocks.append(current)
    return "\n\n".join(_render(frame.select(first, *block)) for block in blocks)


def _json_cell(value: object) -> object:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _json_default(value: object) -> object:
    """A value json cannot write: dates and times in ISO form, bytes as hexadecimal, anything else as text."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value.hex() if isinstance(value, (bytes, bytearray)) else str(value)


def csv_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with what CSV cannot hold as text: a nested value (list, array, struct, map) as JSON, bytes as
    hexadecimal. Other columns, and missing values, are left as they are."""
    def text(value: object) -> str | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray)):
            return value.hex()
        return json.dumps(value, default=_json_default, ensure_ascii=False)

    def writable(dtype: pl.DataType) -> bool:
        return not dtype.is_nested() and dtype != pl.Binary and type(dtype).__name__ not in ("Object", "Extension")

    return frame.with_columns(pl.Series(name, [text(value) for value in frame[name].to_list()], dtype=pl.String)
                              for name, dtype in frame.schema.items() if not writable(dtype))


def write_text_output(text: str, format_: str, output: Path | None, *, db: Path | None, force: bool) -> None:
    """``text`` to ``output`` (checked: never the store, see ``coevolve_engine.core.outputs``) or standard output."""
    if output is not None:
        write_output(output, text, format_, db=db, force=force)
    else:
        click.echo(text, nl=False)


def write_frame(frame: pl.DataFrame, format_: str, output: Path | None, *, db: Path | None = None,
                force: bool = False) -> None:
    """Write ``frame`` in ``format_`` to ``output`` (a file; never the store ``db``) or standard output."""
    if format_ == "parquet":
        if output is None and sys.stdout.isatty():
            raise click.UsageError("--format parquet writes binary data: pass --output FILE or redirect stdout")
        if output is not None:
            check_output(output, "parquet", db=db, force=force)  # before the work of encoding it
        buffer = io.BytesIO()
        frame.write_parquet(buffer)
        if output is not None:
            write_output(output, buffer.getvalue(), "parquet", db=db, force=force)
        else:
            sys.stdout.buffer.write(buffer.getvalue())
            sys.stdout.flush()
        return
    if format_ == "csv":
        text = csv_ready(frame).write_csv()
    elif format_ in ("json", "jsonl"):
        rows = [{k: _json_cell(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]
        text = (json.dumps(rows, indent=2, default=str, ensure_ascii=False) + "\n" if format_ == "json" else
                "".join(json.dumps(row, default=str, ensure_ascii=False) + "\n" for row in rows))
    else:
        text = render_table(frame) + "\n"
    write_text_output(text, format_, output, db=db, force=force)
