"""The fault matrix, continued for numbers: one rule for every float option and --set value (finite, in its
range), every integer option (never beyond what a BIGINT column holds), integers in JSON input, and weights
(finite, with a finite total). Each case is refused with the option's or the field's name, no traceback, and the
store as it was.
"""

from __future__ import annotations

import json
import shutil

import pytest

from test_store_safety import invoke, table_hashes


@pytest.fixture(scope="module")
def sample_once(tmp_path_factory):
    path = tmp_path_factory.mktemp("numbers") / "store.duckdb"
    assert invoke("init", "--sample", "--db", path).exit_code == 0
    return path


@pytest.fixture
def sample_store(sample_once, tmp_path):
    copy = tmp_path / "store.duckdb"
    shutil.copyfile(sample_once, copy)
    return copy


REFUSED = [
    (["signals", "--threshold", "nan"], "--threshold", "not a finite number"),
    (["signals", "--theta", "nan"], "--theta", "not a finite number"),
    (["weights", "--threshold", "nan"], "--threshold", "not a finite number"),
    (["weights", "--theta", "inf"], "--theta", "not a finite number"),
    (["drift", "--threshold", "nan"], "--threshold", "not a finite number"),
    (["report", "--theta", "nan"], "--theta", "not a finite number"),
    (["query", "select 1", "--wait", "nan"], "--wait", "not a finite number"),
    (["query", "select 1", "--wait", "inf"], "--wait", "not a finite number"),
    (["run", "--wait", "nan"], "--wait", "not a finite number"),
    (["import-rollouts", "x.jsonl", "--reward-range", "-inf", "inf"], "--reward-range", "not a finite number"),
    (["import-rollouts", "x.jsonl", "--reward-range", "0", "nan"], "--reward-range", "not a finite number"),
    (["signals", "-w", "9223372036854775808"], "-w", "beyond the integers a store holds"),
    (["signals", "--min-n", "9223372036854775808"], "--min-n", "beyond the integers a store holds"),
    (["signals", "--min-n", "1e20"], "--min-n", "is not a valid integer"),
    (["signals", "--top", "1e20"], "--top", "is not a valid integer"),
    (["signals", "--top", "99999999999999999999999"], "--top", "beyond the integers a store holds"),
    (["weights", "--top", "9223372036854775808"], "--top", "beyond the integers a store holds"),
]


@pytest.mark.parametrize("args, option, words", REFUSED, ids=[" ".join(a) for a, _, _ in REFUSED])
def test_an_impossible_number_is_refused_naming_the_option(sample_store, args, option, words):
    before = table_hashes(sample_store)
    result = invoke(*args, "--db", sample_store)
    assert result.exit_code == 2, result.output
    assert option in result.output and words in result.output, result.output
    assert table_hashes(sample_store) == before


@pytest.mark.parametrize("settings", [["forgetting=nan"], ["boundary=inf"], ["forgetting=1e400"],
                                      ["rare=-inf"]])
def test_a_set_value_that_is_not_finite_is_refused(sample_store, settings):
    before = table_hashes(sample_store)
    args = [arg for setting in settings for arg in ("--set", setting)]
    result = invoke("weights", *args, "--db", sample_store)
    assert result.exit_code == 1 and "takes a float, got" in result.output, result.output
    assert table_hashes(sample_store) == before


def test_weights_whose_total_overflows_are_refused_without_a_warning(sample_store, capfd):
    before = table_hashes(sample_store)
    result = invoke("weights", "--set", "forgetting=1e308", "--set", "boundary=1e308", "--db", sample_store)
    assert result.exit_code == 1, result.output
    assert "the weights add up to more than a number can hold" in result.output, result.output
    assert "overflow" not in capfd.readouterr().err
    assert table_hashes(sample_store) == before


def test_a_check_of_weights_refuses_a_total_that_overflows():
    from coevolve_engine.core.errors import CurriculumError
    from coevolve_engine.core.weights import check_weights

    with pytest.raises(CurriculumError, match="add up to more than a number can hold"):
        check_weights({"a": 1e308, "b": 1e308})
    assert check_weights({"a": 1e307, "b": 1e307}).sum() == 2e307


@pytest.mark.parametrize("digits", [101, 5000, 100_000])
def test_a_json_lines_step_of_thousands_of_digits_is_refused_as_json(sample_store, tmp_path, digits):
    path = tmp_path / "big.jsonl"
    path.write_text('{"task_id": "files-001", "step": 0, "reward": 1}\n'
                    '{"task_id": "files-001", "step": ' + "9" * digits + ', "reward": 1}\n')
    before = table_hashes(sample_store)
    result = invoke("ingest", "trajectories", path, "--db", sample_store)
    assert result.exit_code == 1, result.output
    assert f"big.jsonl, line 2: not valid JSON (a number of {digits:,} digits" in result.output, result.output
    assert table_hashes(sample_store) == before


def test_a_step_beyond_its_range_but_within_the_digits_is_named_by_its_field(sample_store, tmp_path):
    path = tmp_path / "wide.jsonl"
    path.write_text(json.dumps({"task_id": "files-001", "step": 10**50, "reward": 1}) + "\n")
    result = invoke("ingest", "trajectories", path, "--db", sample_store)
    assert result.exit_code == 1 and "line 1, field 'step'" in result.output, result.output


def test_settings_refuse_what_no_setting_can_use():
    from coevolve_engine.core.settings import coerce

    for value in ("nan", "inf", "-inf", "1e400"):
        with pytest.raises(ValueError, match="a finite number"):
            coerce(value, float, from_text=True)
    with pytest.raises(ValueError, match="a finite number"):
        coerce(10**400, float)
    with pytest.raises(ValueError, match=r"an integer in \[-2\^63, 2\^63 - 1\]"):
        coerce(2**63, int)
    assert coerce("0.5", float, from_text=True) == 0.5 and coerce(2**63 - 1, int) == 2**63 - 1


@pytest.mark.parametrize("column, text", [("spec", '{"a": 1, "a": 2}'), ("meta", '{"x": NaN}'),
                                          ("spec", '{"a": {"b": 1, "b": 1}}'), ("meta", '{"x": [Infinity]}')])
def test_a_parquet_text_column_with_a_duplicate_key_or_nan_is_refused_like_json_lines(sample_store, tmp_path,
                                                                                      column, text):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "tasks.parquet"
    pq.write_table(pa.table({"task_id": ["fine", "ambiguous"], column: ['{"a": 1}', text]}), path)
    before = table_hashes(sample_store)
    result = invoke("ingest", "tasks", path, "--db", sample_store)
    assert result.exit_code == 1, result.output
    assert f"tasks.parquet, row 2, field '{column}': names a key twice in one object, or holds NaN" in result.output
    assert table_hashes(sample_store) == before
    lines = tmp_path / "tasks.jsonl"
    lines.write_text('{"task_id": "ambiguous", "' + column + '": ' + text + "}\n")
    assert invoke("ingest", "tasks", lines, "--db", sample_store).exit_code == 1  # as JSON lines refuses it


def test_the_check_before_a_round_refuses_a_batch_training_would_refuse():
    from coevolve_engine.core.errors import CoevolveError
    from coevolve_engine.core.sampler import MAX_BATCH_ROWS, WeightedGroupSampler
    from coevolve_engine.trainers import TRAINERS

    group_size, groups_per_step = 5000, MAX_BATCH_ROWS // 5000 + 1
    with pytest.raises(CoevolveError, match="more than 10,000,000"):
        WeightedGroupSampler([1.0], group_size=group_size, groups_per_step=groups_per_step)
    trainer = TRAINERS.load("trl-grpo")
    with pytest.raises(CoevolveError, match=r"trainer trl-grpo.*more than 10,000,000"):
        trainer.check_options({"group_size": group_size, "groups_per_step": groups_per_step}, "trainer trl-grpo")
    trainer.check_options({"group_size": group_size, "groups_per_step": groups_per_step - 1}, "trainer trl-grpo")
