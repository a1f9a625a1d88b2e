"""Which statements of a user's SQL `coevolve-engine query` runs: an allow-list, checked before anything runs.

Read-only (the default), a statement runs only when it cannot write anything:

- SELECT in every spelling DuckDB parses as one (WITH, FROM-first, VALUES, set operations, DESCRIBE, SHOW,
  SUMMARIZE, UNPIVOT) and PIVOT;
- EXPLAIN without ANALYZE, of a statement that is itself allowed;
- the PRAGMAs and CALLs of the functions that only read (``_READING_PRAGMAS``).

With --write, the statements that change the store are allowed too: INSERT, UPDATE, DELETE, MERGE, CREATE,
ALTER, DROP, VACUUM/ANALYZE, and EXPLAIN ANALYZE of an allowed statement. Nothing else runs in either mode:
PREPARE and EXECUTE (bind values with -p), SET, RESET and USE (the settings are locked), ATTACH, DETACH, COPY,
EXPORT/IMPORT DATABASE, INSTALL, LOAD, UPDATE EXTENSIONS, transactions, CHECKPOINT, secrets, and any statement
DuckDB cannot name.

Inside any statement, a call of one of DuckDB's built-in table functions that is not a known reader
(``_READING_FUNCTIONS``: ``checkpoint()``, ``import_database()``, ``query()``, ``json_execute_serialized_sql()``,
...) is refused as well, however it is spelled (quoted, qualified, commented). A table macro of the store is not
a built-in and may be called.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
import duckdb

ONE_STORE = "query opens one store, the one at --db"
TO_FILES = ("query writes no file: a result goes to a file with -o FILE, which never replaces a store or a file of "
            "another kind")
ONE_TRANSACTION = "query runs its statements as one unit (with --write, one transaction: kept whole or not at all)"
NO_EXTENSIONS = "query installs, loads and updates no extension"
LOCKED = "query's settings cannot be changed (the store, its schema and the files it may read are fixed)"
NO_PREPARED = "query runs no prepared statement; bind values with -p NAME VALUE and $NAME"
READ_ONLY = "query is read-only without --write: it runs only statements that read (SELECT, WITH, DESCRIBE, SHOW, " \
            "SUMMARIZE, EXPLAIN without ANALYZE, PRAGMAs that read); pass --write to change the store"
UNKNOWN = "query runs only statements it knows to be safe, and DuckDB cannot name this one"
FILE_SQL = "query runs no SQL from files; read a file with read_csv, read_json or read_parquet and --read"

#: DuckDB's built-in table functions (and pragmas) that only read: the store's catalog, files under --read,
#: generated rows. Any other built-in table function is refused (a DuckDB release that adds one adds it refused).
_READING_FUNCTIONS = frozenset({
    "collations", "database_list", "database_size", "duckdb_approx_database_count", "duckdb_available_metrics",
    "duckdb_columns", "duckdb_connection_count", "duckdb_constraints", "duckdb_coordinate_systems",
    "duckdb_databases", "duckdb_dependencies", "duckdb_dialects", "duckdb_extensions", "duckdb_functions",
    "duckdb_indexes", "duckdb_keywords", "duckdb_memory", "duckdb_optimizers", "duckdb_schemas",
    "duckdb_secret_types", "duckdb_sequences", "duckdb_settings", "duckdb_table_sample", "duckdb_tables",
    "duckdb_temporary_files", "duckdb_types", "duckdb_variables", "duckdb_views", "functions", "generate_series",
    "glob", "histogram", "histogram_values", "icu_calendar_names", "json_each", "json_tree", "metadata_info",
    "parquet_bloom_probe", "parquet_file_metadata", "parquet_full_metadata", "parquet_kv_metadata",
    "parquet_metadata", "parquet_page_index", "parquet_scan", "parquet_schema", "pg_timezone_names", "platform",
    "pragma_collations", "pragma_database_size", "pragma_metadata_info", "pragma_platform", "pragma_show",
    "pragma_storage_info", "pragma_table_info", "pragma_user_agent", "pragma_version", "query_table", "range",
    "read_blob", "read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_json_objects",
    "read_json_objects_auto", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects", "read_parquet",
    "read_text", "repeat", "repeat_row", "show", "show_databases", "show_tables", "show_tables_expanded",
    "sniff_csv", "storage_info", "summary", "table_info", "test_all_types", "test_vector_types", "unnest",
    "user_agent", "version",
})
#: the PRAGMAs that only read (``PRAGMA table_info('tasks')``, ``PRAGMA show_tables``)
_READING_PRAGMAS = frozenset({
    "collations", "database_size", "functions", "metadata_info", "platform", "show", "show_databases",
    "show_tables", "show_tables_expanded", "storage_info", "table_info", "user_agent", "version",
})
_WRITE_TYPES = frozenset(getattr(duckdb.StatementType, name) for name in (
    "INSERT", "UPDATE", "DELETE", "CREATE", "ALTER", "DROP", "CREATE_FUNC", "MERGE_INTO", "VACUUM", "ANALYZE",
) if hasattr(duckdb.StatementType, name))
#: statement types refused in both modes, with the reason shown
_REFUSED_TYPES = {getattr(duckdb.StatementType, name): reason for name, reason in (
    ("ATTACH", ONE_STORE), ("DETACH", ONE_STORE), ("COPY_DATABASE", ONE_STORE), ("COPY", TO_FILES),
    ("EXPORT", TO_FILES), ("LOAD", NO_EXTENSIONS), ("EXTENSION", NO_EXTENSIONS), ("TRANSACTION", ONE_TRANSACTION),
    ("PREPARE", NO_PREPARED), ("EXECUTE", NO_PREPARED), ("SET", LOCKED), ("VARIABLE_SET", LOCKED),
    ("LOGICAL_PLAN", UNKNOWN), ("RELATION", UNKNOWN), ("INVALID", UNKNOWN),
) if hasattr(duckdb.StatementType, name)}
#: refusals of functions by name, with a reason more precise than "not a reader"
_FUNCTION_REASONS = {"checkpoint": ONE_TRANSACTION, "force_checkpoint": ONE_TRANSACTION,
                     "import_database": FILE_SQL, "copy_database": ONE_STORE}


@dataclass(frozen=True)
class _Token:
    word: str  # lower case, quotes removed
    kind: duckdb.token_type
    start: int


def _tokens(text: str) -> list[_Token]:
    """``text``'s tokens by DuckDB's tokenizer, comments left out."""
    raw = duckdb.tokenize(text)
    tokens = []
    for index, (start, kind) in enumerate(raw):
        if kind == duckdb.token_type.comment:
            continue
        end = raw[index + 1][0] if index + 1 < len(raw) else len(text)
        word = text[start:end].strip()
        if kind == duckdb.token_type.identifier:
            word = word.strip('"')
        tokens.append(_Token(word.lower(), kind, start))
    return tokens


@functools.lru_cache(maxsize=1)
def _builtin_table_functions() -> frozenset[str]:
    """Every table and pragma function this DuckDB has built in (read from a fresh in-memory database)."""
    con = duckdb.connect()
    try:
        return frozenset(name.lower() for (name,) in con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type IN ('table', 'pragma')"
        ).fetchall())
    finally:
        con.close()


def _refused_function(tokens: list[_Token]) -> str | None:
    """The reason to refuse the first call of a built-in table function that is not a reader, if any."""
    builtins = _builtin_table_functions()
    for token, after in zip(tokens, tokens[1:]):
        if token.kind not in (duckdb.token_type.identifier, duckdb.token_type.keyword):
            continue
        if not after.word.startswith("(") or token.word not in builtins or token.word in _READING_FUNCTIONS:
            continue
        return _FUNCTION_REASONS.get(token.word, f"{token.word}() is not a function that only reads")
    return None


def _explained(tokens: list[_Token], text: str) -> tuple[bool, str]:
    """(whether an EXPLAIN analyzes, that is runs, its statement; the statement it explains)."""
    rest = tokens[1:]
    analyze = bool(rest) and rest[0].word in ("analyze", "analyse")
    rest = rest[1:] if analyze else rest
    if rest and rest[0].word == "(":  # options, as in EXPLAIN (ANALYZE, FORMAT json) ..., or the statement itself
        depth, close = 0, None
        for index, token in enumerate(rest):
            depth += token.word.count("(") - token.word.count(")")
            if depth <= 0:
                close = index
                break
        after = rest[close + 1:] if close is not None else []
        if after and _parses(text[after[0].start:]):
            analyze = analyze or any(token.word in ("analyze", "analyse") for token in rest[1:close])
            rest = after
    return analyze, text[rest[0].start:] if rest else ""


def _parses(text: str) -> bool:
    try:
        return len(duckdb.extract_statements(text)) == 1
    except (duckdb.Error, ValueError, RuntimeError):
        return False


def statement_refusal(statement: duckdb.Statement, *, write: bool) -> str | None:
    """Why ``statement`` may not run (None when it may), read-only or with ``write``."""
    text = statement.query
    tokens = _tokens(text)
    words = [token.word for token in tokens[:4]]
    try:
        kind = statement.type
    except ValueError:  # a type this Python package has no name for (UPDATE EXTENSIONS in DuckDB 2.0)
        return NO_EXTENSIONS if words[:2] == ["update", "extensions"] else UNKNOWN
    if kind in _REFUSED_TYPES:
        return _REFUSED_TYPES[kind]
    if kind == duckdb.StatementType.EXPLAIN:
        analyze, inner = _explained(tokens, text)
        if analyze and not write:
            return "EXPLAIN ANALYZE runs the statement it explains; " + READ_ONLY
        try:
            explained = duckdb.extract_statements(inner)
        except (duckdb.Error, ValueError, RuntimeError):
            return UNKNOWN
        if len(explained) != 1:
            return UNKNOWN
        reason = statement_refusal(explained[0], write=write)
        return f"it explains a statement that is refused: {reason}" if reason else None
    if kind == duckdb.StatementType.CALL:
        if not words or words[0] != "call":  # CHECKPOINT and FORCE CHECKPOINT are calls of checkpoint()
            return _FUNCTION_REASONS.get(words[-1] if words else "", UNKNOWN) if words else UNKNOWN
        name = words[1] if len(words) > 1 else ""
        if name not in _READING_FUNCTIONS and name in _builtin_table_functions():
            return _FUNCTION_REASONS.get(name, f"{name}() is not a function that only reads")
    elif kind == duckdb.StatementType.PRAGMA:
        if words[:1] != ["pragma"]:  # IMPORT DATABASE and COPY FROM DATABASE are pragmas
            return {"import": FILE_SQL, "copy": ONE_STORE}.get(words[0] if words else "", UNKNOWN)
        name = words[1] if len(words) > 1 else ""
        if name not in _READING_PRAGMAS or (len(tokens) > 2 and tokens[2].word == "="):
            return _FUNCTION_REASONS.get(name, FILE_SQL if name.startswith("import") else
                                         f"PRAGMA {name} is not one that only reads")
    elif kind == duckdb.StatementType.MULTI:
        if words[:1] != ["pivot"]:
            return UNKNOWN
    elif kind in _WRITE_TYPES:
        if not write:
            return READ_ONLY
        if kind in (duckdb.StatementType.CREATE, duckdb.StatementType.DROP) and "secret" in words:
            return TO_FILES  # a persistent secret is a file outside the store
    elif kind != duckdb.StatementType.SELECT:
        return UNKNOWN
    return _refused_function(tokens)
