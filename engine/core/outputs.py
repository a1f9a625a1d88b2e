"""Writing a command's output file without ever destroying a store or an unrelated file.

Every file a command writes (``query -o``, ``report``, ``export``, figures, ...) goes through ``write_output``:

- a path that is the store, its write-ahead log, or any DuckDB database file is refused, ``--force`` or not;
- an existing file that is not this output's own kind (a CSV written over a Parquet file, JSON lines or a TOML
  config, HTML over a notebook, ...) is refused unless ``force`` is given; an empty file, or one of the same
  kind, is replaced. The kind is judged by the name's ending and by the content: a file named ``.jsonl``,
  ``.toml``, ``.py``, ... is only ever replaced by its own kind, and one named ``.txt``, ``.log`` or nothing is
  judged by what it holds (JSON, JSON lines, TOML, HTML, Parquet, PNG, CSV, a text table, binary data, or other
  plain text, such as notes, which only a log may replace without ``force``);
- only a regular file is ever written: a FIFO, a device (``/dev/null``, ``/dev/stdout``), a socket or a folder is
  refused, and a symbolic link is followed, so the file it points to is written and the link kept;
- a missing folder is named, not met with a traceback, and so is a "folder" that is a file (``a.csv/x.csv``);
- the bytes go to a temporary file beside the target, which is then renamed over it, so an interrupted write
  leaves the old file whole.
"""

from __future__ import annotations

import csv
import json
import os
import stat
import tempfile
import tomllib
from pathlib import Path

from coevolve_engine.core.errors import CoevolveError

#: what each kind of output is called in messages (the last three are kinds an existing file may hold)
KINDS = {"html": "an HTML page", "parquet": "a Parquet file", "png": "a PNG image", "csv": "a CSV file",
         "json": "a JSON file", "jsonl": "a JSON-lines file", "table": "a text table", "log": "a text log",
         "toml": "a TOML file", "text": "plain text", "binary": "binary data"}
#: the file name endings of each kind; a file ending otherwise (but for _NEUTRAL_SUFFIXES) is of another kind
_SUFFIXES = {"html": (".html", ".htm"), "parquet": (".parquet", ".pq"), "png": (".png",), "csv": (".csv", ".tsv"),
             "json": (".json",), "jsonl": (".jsonl", ".ndjson"), "table": (), "log": (), "toml": (".toml",)}
#: endings that say nothing about a text file's kind: its content decides
_NEUTRAL_SUFFIXES = ("", ".txt", ".text", ".out", ".log")
_SNIFF_BYTES = 1 << 20


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


def _text(head: bytes, whole: bool) -> str | None:
    """``head`` as text, or None when it is binary (a multi-byte character cut at the sniffed length is text)."""
    if b"\0" in head:
        return None
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if whole or exc.start < len(head) - 4:
            return None
        return head[:exc.start].decode("utf-8")


def _complete(text: str, whole: bool) -> str:
    """The part of ``text`` that ends with a whole line (all of it when the file was read whole)."""
    return text if whole else text[:text.rfind("\n") + 1]


def _holds(kind: str, text: str, whole: bool) -> bool:
    """Whether ``text`` (the start of a file, or all of it when ``whole``) is of the structured text ``kind``."""
    if kind == "html":
        return text.lstrip().lower().startswith(("<!doctype html", "<html"))
    if kind == "json":
        if not whole:
            return text.lstrip().startswith(("{", "["))
        try:
            json.loads(text)
        except ValueError:
            return False
        return True
    if kind == "jsonl":
        lines = [line for line in _complete(text, whole).splitlines() if line.strip()]
        try:
            for line in lines:
                json.loads(line)
        except ValueError:
            return False
        return bool(lines)
    if kind == "toml":
        try:
            return bool(tomllib.loads(_complete(text, whole)))
        except tomllib.TOMLDecodeError:
            return False
    if kind == "csv":
        return _holds_csv(_complete(text, whole))
    if kind == "table":
        lines = [line for line in text.splitlines() if line.strip()]
        return bool(lines) and all(line.startswith("|") or line == "(no columns)" for line in lines)
    return True  # a log: any text


def _holds_csv(text: str) -> bool:
    """Whether ``text`` reads as a CSV table, every row as wide as the header: two columns or more, or one column
    of values without spaces (``count\n12``; a line of notes is prose, not a column)."""
    try:
        rows = [row for row in csv.reader(text.splitlines()) if row]
    except csv.Error:
        return False
    if not rows or any(len(row) != len(rows[0]) for row in rows):
        return False
    return len(rows[0]) >= 2 or not any(char.isspace() for row in rows for char in row[0])


def _content_kind(head: bytes, whole: bool) -> str:
    """What the start of a file holds: a Parquet file, a PNG image, binary data, or a kind of text."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"\x89PNG"):
        return "png"
    text = _text(head, whole)
    if text is None:
        return "binary"
    # one line of JSON is a JSON file; the start of a long file is JSON lines when all its whole lines are JSON
    order = ("html", "json", "jsonl", "toml", "table", "csv") if whole else ("html", "jsonl", "json", "toml",
                                                                              "table", "csv")
    return next((kind for kind in order if _holds(kind, text, whole)), "text")


def _describe(path: Path, head: bytes, whole: bool) -> str:
    """What an existing file looks like, for a message: its content's kind, or text named by an ending of no kind
    of ours (``a .py file``)."""
    content = _content_kind(head, whole)
    suffix = path.suffix.lower()
    ours = suffix in _NEUTRAL_SUFFIXES or any(suffix in suffixes for suffixes in _SUFFIXES.values())
    return f"a {suffix} file" if content in ("text", "csv", "table") and not ours else KINDS[content]


def _is_kind(path: Path, head: bytes, whole: bool, kind: str) -> bool:
    """Whether the existing file ``path`` (``head``: its first bytes, all of them when ``whole``) may be replaced by
    ``kind`` output: it is empty, or both its name's ending and its content are of that kind (a CSV file, a text
    table and a log may replace text of no other known kind)."""
    if not head:
        return True  # an empty file holds nothing to lose
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES[kind] and suffix not in _NEUTRAL_SUFFIXES:
        return False
    content = _content_kind(head, whole)
    if content == kind:
        return True
    text = _text(head, whole)
    if text is None or kind in ("parquet", "png"):
        return False
    if kind == "log":
        return content in ("text", "csv", "table")
    if kind == "csv" and suffix in _SUFFIXES[kind]:
        return content in ("text", "csv")  # a .csv file holding one column
    return _holds(kind, text, whole)


_SYSTEM_FOLDERS = ("/dev/", "/proc/")
_NOT_REGULAR = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _missing_folder(path: Path) -> str:
    """Why ``path``'s folder cannot hold it: the first part of it that is a file, or the folder that is missing."""
    for ancestor in reversed(path.parents):
        if ancestor.exists() and not ancestor.is_dir():
            return f"cannot write {path}: {ancestor} is a file, not a folder"
    return f"cannot write {path}: the folder {path.parent} does not exist"


def check_output(path: Path, kind: str, *, db: Path | None = None, force: bool = False) -> Path:
    """Refuse ``path`` as the destination of ``kind`` output when writing it would lose data (see the module);
    the file to write: ``path``, or the file it links to."""
    path = Path(path)
    if db is not None:
        db = Path(db)
        for store_file in (db, db.with_name(db.name + ".wal")):
            if _same_file(path, store_file):
                raise OutputPathError(f"{path} is the store ({db}); write the output to another file")
    try:
        mode = path.stat().st_mode  # through links: /dev/stdout is whatever standard output is
    except OSError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputPathError(f"{path} is a folder; name a file to write {KINDS[kind]} to")
    for test, what in _NOT_REGULAR:
        if mode is not None and test(mode):
            raise OutputPathError(f"{path} is {what}, not a regular file; an output is written to a regular file "
                                  "only (leave the output option out to print to standard output)")
    if any(str(place).startswith(_SYSTEM_FOLDERS) for place in (Path(os.path.abspath(path)), path.resolve())):
        raise OutputPathError(f"{path} is a device or a process's file (under /dev or /proc), not a regular file; "
                              "leave the output option out to print to standard output")
    if path.is_symlink():
        path = path.resolve()  # the file it points to is written; the link stays
    if not path.parent.is_dir():
        raise OutputPathError(_missing_folder(path))
    if not path.exists():
        return path
    if is_duckdb_file(path):
        raise OutputPathError(f"{path} is a DuckDB database; an output never replaces one, --force or not")
    if force:
        return path
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF_BYTES + 1)
    except OSError as exc:
        raise OutputPathError(f"cannot read {path} to check what it is: {exc}") from exc
    whole = len(head) <= _SNIFF_BYTES
    head = head[:_SNIFF_BYTES]
    if not _is_kind(path, head, whole, kind):
        raise OutputPathError(f"{path} exists and is not {KINDS[kind]}; pass --force to replace it, or write to "
                              f"another file (it looks like {_describe(path, head, whole)})")
    return path


def write_output(path: Path, data: str | bytes, kind: str, *, db: Path | None = None, force: bool = False) -> None:
    """Write ``data`` to ``path`` after ``check_output``, atomically (temporary file, then rename)."""
    path = check_output(Path(path), kind, db=db, force=force)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputPathError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        os.chmod(temporary, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException as exc:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # a full disk, a file size limit: named, and the old file is left whole
            raise OutputPathError(f"cannot write {path}: {exc.strerror or exc}; it was left as it was") from exc
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
