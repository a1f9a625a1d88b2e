"""Writing a command's output file without ever destroying a store or an unrelated file.

Every file a command writes (``query -o``, ``report``, ``export``, figures, ...) goes through ``write_output``:

- a path that is the store, its write-ahead log, or any DuckDB database file is refused, ``--force`` or not;
- an existing file that is not this output's own kind (a CSV written over a Parquet file, HTML over a
  notebook, ...) is refused unless ``force`` is given; an empty file, or one of the same kind, is replaced;
- a missing folder is named, not met with a traceback;
- the bytes go to a temporary file beside the target, which is then renamed over it, so an interrupted write
  leaves the old file whole.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from coevolve_engine.errors import CoevolveError

#: what each kind of output is called in messages
KINDS = {"html": "an HTML page", "parquet": "a Parquet file", "png": "a PNG image", "csv": "a CSV file",
         "json": "a JSON file", "jsonl": "a JSON-lines file", "table": "a text table", "log": "a text log"}
_TEXT_KINDS = ("csv", "json", "jsonl", "table", "log")
_SNIFF_BYTES = 65536


class OutputPathError(CoevolveError):
    """An output path that would overwrite a store or a file of another kind, or that cannot be written."""


def is_duckdb_file(path: Path) -> bool:
    """Whether ``path`` holds a DuckDB database (its header carries the magic bytes 'DUCK' at offset 8)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[8:12] == b"DUCK"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def _is_kind(head: bytes, kind: str) -> bool:
    if not head:
        return True  # an empty file holds nothing to lose
    if kind == "parquet":
        return head.startswith(b"PAR1")
    if kind == "png":
        return head.startswith(b"\x89PNG")
    if b"\0" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte character cut at the sniffed length is still text
        if exc.start < len(head) - 4:
            return False
        text = head[:exc.start].decode("utf-8")
    if kind == "html":
        return text.lstrip().lower().startswith(("<!doctype html", "<html"))
    return kind in _TEXT_KINDS


def check_output(path: Path, kind: str, *, db: Path | None = None, force: bool = False) -> None:
    """Refuse ``path`` as the destination of ``kind`` output when writing it would lose data (see the module)."""
    path = Path(path)
    if db is not None:
        db = Path(db)
        for store_file in (db, db.with_name(db.name + ".wal")):
            if _same_file(path, store_file):
                raise OutputPathError(f"{path} is the store ({db}); write the output to another file")
    if path.is_dir():
        raise OutputPathError(f"{path} is a folder; name a file to write {KINDS[kind]} to")
    if not path.parent.is_dir():
        raise OutputPathError(f"cannot write {path}: the folder {path.parent} does not exist")
    if not path.exists():
        return
    if is_duckdb_file(path):
        raise OutputPathError(f"{path} is a DuckDB database; an output never replaces one, --force or not")
    if force:
        return
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError as exc:
        raise OutputPathError(f"cannot read {path} to check what it is: {exc}") from exc
    if not _is_kind(head, kind):
        raise OutputPathError(f"{path} exists and is not {KINDS[kind]}; pass --force to replace it, or write to "
                              "another file")


def write_output(path: Path, data: str | bytes, kind: str, *, db: Path | None = None, force: bool = False) -> None:
    """Write ``data`` to ``path`` after ``check_output``, atomically (temporary file, then rename)."""
    path = Path(path)
    check_output(path, kind, db=db, force=force)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        os.chmod(temporary, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
