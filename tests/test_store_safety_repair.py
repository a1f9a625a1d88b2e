"""The fault matrix, continued for repairs: what a --write can drop from a store's schema, `init` rebuilds without
touching the data (views, macros, bookkeeping tables, schema_migrations itself), or names what it cannot rebuild
and changes nothing.
"""

from __future__ import annotations

import shutil

import pytest

from test_store_safety import invoke, table_hashes
from test_store_safety_numbers import sample_once  # noqa: F401 (a fixture)

DATA = ("tasks", "trajectories", "rounds", "failure_patterns", "pattern_members", "candidates", "weight_sets",
        "task_weights", "evaluations", "eval_results")


@pytest.fixture
def sample_store(sample_once, tmp_path):
    copy = tmp_path / "store.duckdb"
    shutil.copyfile(sample_once, copy)
    return copy


def data_hashes(db) -> dict[str, str]:
    return {table: digest for table, digest in table_hashes(db).items() if table in DATA}


DROPS = [
    "drop macro forgetting_with",
    "drop view task_signals",
    "drop table schema_migrations",
    "delete from schema_migrations",
    "drop table store_lease",
    "drop table ingests",
    "drop table lock_holds; drop sequence hold_id_seq",
    "drop table schema_migrations; drop table store_lease; drop table run_phases; drop macro flagged_trajectories_with",
]


@pytest.mark.parametrize("drop", DROPS)
def test_init_rebuilds_what_a_write_dropped_and_keeps_the_data(sample_store, drop):
    data = data_hashes(sample_store)
    assert invoke("query", "--write", drop, "--db", sample_store).exit_code == 0
    result = invoke("init", "--db", sample_store)
    assert result.exit_code == 0, result.output
    assert data_hashes(sample_store) == data
    for sql in ("select count(*) from forgetting_with(w := 5)", "select count(*) from task_signals",
                "select count(*) from flagged_trajectories_with(threshold := 0.5)", "select count(*) from ingests",
                "select count(*) from store_lease", "select count(*) from run_phases",
                "select count(*) from lock_holds"):
        assert invoke("query", sql, "--db", sample_store).exit_code == 0, (drop, sql)
    migrations = invoke("query", "select count(*) as n from schema_migrations", "--format", "csv",
                        "--db", sample_store).output
    assert migrations == "n\n9\n", migrations
    again = invoke("init", "--db", sample_store)  # a repaired store needs nothing more
    assert again.exit_code == 0 and "rebuilt" not in again.output
    assert invoke("ingest", "trajectories", sample_store.parent / "none.jsonl", "--db", sample_store).exit_code != 0


def test_init_names_a_lost_table_of_data_and_changes_nothing(sample_store):
    assert invoke("query", "--write", "drop table pattern_members; drop table store_lease", "--db",
                  sample_store).exit_code == 0
    before = table_hashes(sample_store)
    result = invoke("init", "--db", sample_store)
    assert result.exit_code == 1, result.output
    assert "has lost the table(s) pattern_members, which held data that init cannot rebuild" in result.output
    assert "nothing was changed" in result.output and table_hashes(sample_store) == before
