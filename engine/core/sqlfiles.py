"""The SQL shipped in ``sql/``: named migrations and one-object-per-file views, loaded by name.

Migrations (``migrations/NNN_name.sql``) create tables; each runs once, inside a transaction, and is
recorded in ``schema_migrations``. Views and macros (``views/<name>.sql``) are never migrated: they are
rebuilt from their files whenever a store's definitions differ from the files of the code that opens it
(``views_stamp`` names one set of files). A view file declares what it is built on with a
``-- requires: a, b`` comment line, and files are created in that dependency order.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

_REQUIRES = re.compile(r"^--\s*requires:\s*(.*)$", re.MULTILINE)
_MIGRATION_NAME = re.compile(r"^\d{3}_[a-z0-9_]+\.sql$")
_CREATE = re.compile(r"\bCREATE OR REPLACE (VIEW|MACRO)\b")


@dataclass(frozen=True)
class SqlFile:
    name: str
    sql: str
    requires: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """'view' or 'macro' (what the file's CREATE OR REPLACE statement creates); '' for a migration."""
        match = _CREATE.search(self.sql)
        return match.group(1).lower() if match else ""


def _read_dir(folder: str) -> list[tuple[str, str]]:
    root = files("coevolve_engine.sql") / folder
    return sorted((entry.name, entry.read_text(encoding="utf-8")) for entry in root.iterdir()
                  if entry.name.endswith(".sql"))


@cache
def migrations() -> tuple[SqlFile, ...]:
    """Every migration, in the order it must run (by its NNN prefix)."""
    found = []
    for filename, sql in _read_dir("migrations"):
        if not _MIGRATION_NAME.match(filename):
            raise ValueError(f"migration file {filename!r} must be named NNN_name.sql")
        found.append(SqlFile(filename.removesuffix(".sql"), sql))
    return tuple(found)


def _requires(sql: str) -> tuple[str, ...]:
    names: list[str] = []
    for match in _REQUIRES.finditer(sql):
        names += [n.strip() for n in match.group(1).split(",") if n.strip() and n.strip() != "(none)"]
    return tuple(names)


@cache
def views() -> tuple[SqlFile, ...]:
    """Every view and macro, ordered so that each comes after what it requires."""
    by_name = {filename.removesuffix(".sql"): sql for filename, sql in _read_dir("views")}
    ordered: list[SqlFile] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise ValueError("view files require each other in a cycle: " + " -> ".join(chain + (name,)))
        if name not in by_name:
            raise ValueError(f"view {chain[-1]!r} requires {name!r}, but there is no views/{name}.sql")
        state[name] = "visiting"
        requires = _requires(by_name[name])
        for dependency in requires:
            visit(dependency, chain + (name,))
        state[name] = "done"
        ordered.append(SqlFile(name, by_name[name], requires))

    for name in sorted(by_name):
        visit(name, ())
    return tuple(ordered)


def as_temporary(sql: str) -> str:
    """The same CREATE statement, creating a temporary object (for read-only connections)."""
    rewritten, count = re.subn(r"\bCREATE OR REPLACE (VIEW|MACRO)\b", r"CREATE OR REPLACE TEMP \1", sql, count=1)
    if count != 1:
        raise ValueError("a view file must contain one 'CREATE OR REPLACE VIEW|MACRO' statement")
    return rewritten


@cache
def views_stamp() -> str:
    """A name for this code's view and macro definitions, together with the migrations they are built on:
    ``views sha256:<digest>``. A store whose views carry this stamp (as their DuckDB comment) was built from
    exactly these files, so an open need not rebuild them."""
    digest = hashlib.sha256()
    for migration in migrations():
        digest.update(f"migration {migration.name}\n".encode())
    for view in views():
        digest.update(f"view {view.name} {len(view.sql)}\n".encode())
        digest.update(view.sql.encode())
    return f"coevolve-engine views sha256:{digest.hexdigest()}"


_CREATE_TABLE = re.compile(r"\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)", re.IGNORECASE)
_CREATE_OBJECT = re.compile(r"\bCREATE\s+OR\s+REPLACE\s+(VIEW|MACRO)\b", re.IGNORECASE)


@dataclass(frozen=True)
class CatalogEntry:
    """One object a user can query: its name, its kind (table, view, table macro, scalar macro) and the first
    sentence of its header comment (views and macros) ."""

    name: str
    kind: str
    about: str = ""


def catalog() -> tuple[CatalogEntry, ...]:
    """Every table the migrations create (and ``schema_migrations``), then every view and macro, from the SQL
    files themselves: what ``coevolve-engine query --help`` lists."""
    tables = ["schema_migrations"]
    for migration in migrations():
        tables += [name for name in _CREATE_TABLE.findall(migration.sql) if name not in tables]
    entries = [CatalogEntry(name, "table") for name in tables]
    for view in sorted(views(), key=lambda v: v.name):
        found = _CREATE_OBJECT.search(view.sql)
        kind = "view"
        if found and found.group(1).upper() == "MACRO":
            kind = "table macro" if re.search(r"\bAS\s+TABLE\b", view.sql, re.IGNORECASE) else "scalar macro"
        entries.append(CatalogEntry(view.name, kind, _about(view.sql)))
    return tuple(entries)


def _about(sql: str) -> str:
    """The header comment's first sentence, without the object's name in front."""
    lines = []
    for line in sql.lstrip().splitlines():
        if not line.startswith("--") or line.startswith("--  ") or _REQUIRES.match(line):
            break  # the end of the header, its column list, or its requires line
        lines.append(line.removeprefix("--").strip())
    text = " ".join(lines)
    text = text.split(": ", 1)[1] if ": " in text else text
    sentence = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0]
    return sentence.rstrip(".;")
