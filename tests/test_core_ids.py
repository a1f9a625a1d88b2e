"""One canonical JSON text per value, shared by the LLM request hashes and the candidates table."""

from __future__ import annotations

import math

import pytest

from coevolve_engine.core.ids import canonical_json


def test_equal_values_give_equal_text():
    assert canonical_json({"b": [1, 2.5], "a": "é"}) == canonical_json({"a": "é", "b": [1, 2.5]}) == \
        '{"a":"é","b":[1,2.5]}'


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"score": math.nan}, [1.0, math.inf]])
def test_nan_and_infinities_are_refused(value):
    # they are not JSON: the store's JSON columns and the request hashes must read back what was written
    with pytest.raises(ValueError):
        canonical_json(value)


def test_the_llm_log_and_the_candidates_table_use_the_same_function():
    from coevolve_engine.models import llm
    from coevolve_engine.synthesis import candidates

    assert llm.canonical_json is canonical_json
    assert candidates.canonical_json is canonical_json


def test_a_candidate_whose_provenance_is_not_json_is_refused_before_anything_is_written(tmp_path):
    from coevolve_engine.core.candidates import Candidate
    from coevolve_engine.core.store import Store
    from coevolve_engine.synthesis.candidates import write_candidates

    candidate = Candidate.create(round=0, pattern_id=None, signal=None, env="calc", synthesizer="test",
                                 prompt="p", spec={"x": 1}, provenance={"score": math.nan})
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(ValueError):
            write_candidates(store, [candidate])
        assert store.scalar("SELECT count(*) FROM candidates") == 0
