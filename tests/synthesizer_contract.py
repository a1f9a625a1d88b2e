"""The abstract test suite every synthesizer must pass.

Subclass ``SynthesizerContract`` in a ``test_*.py`` module (its name starts with ``Test``) and provide the
fixtures ``synthesizer`` (an instance) and ``pattern_db`` (the path of a store holding failure patterns whose
member tasks the synthesizer can work from). The store is copied for each test.
"""

from __future__ import annotations

import shutil

import pytest

from coevolve_engine.adapters.environments import load_environment
from coevolve_engine.core.store import Store
from coevolve_engine.synthesis.candidates import Candidate, load_patterns

TABLES = ("tasks", "trajectories", "failure_patterns", "pattern_members", "candidates", "ingests")


class SynthesizerContract:
    """Behaviour every ``Synthesizer`` implementation must show."""

    @pytest.fixture
    def store(self, pattern_db, tmp_path):
        copied = tmp_path / "contract.duckdb"
        shutil.copy(pattern_db, copied)
        with Store(copied) as opened:
            yield opened

    def propose(self, synthesizer, store, max_candidates=6, seed=0) -> list[Candidate]:
        return synthesizer.propose(store, load_patterns(store), max_candidates=max_candidates, seed=seed)

    def test_proposes_some_candidates_and_never_more_than_asked(self, synthesizer, store):
        made = self.propose(synthesizer, store, max_candidates=5)
        assert 1 <= len(made) <= 5
        assert len(self.propose(synthesizer, store, max_candidates=1)) == 1

    def test_is_deterministic_in_its_seed(self, synthesizer, store):
        assert self.propose(synthesizer, store, seed=11) == self.propose(synthesizer, store, seed=11)

    def test_reads_the_store_and_never_writes_it(self, synthesizer, store):
        def counts():
            return {t: store.scalar(f"SELECT count(*) FROM {t}") for t in TABLES}

        before = counts()
        self.propose(synthesizer, store)
        assert counts() == before

    def test_candidates_are_well_formed_for_their_environment_and_pattern(self, synthesizer, store):
        patterns = {p.pattern_id: p for p in load_patterns(store)}
        made = self.propose(synthesizer, store)
        assert len({c.candidate_id for c in made}) == len(made)
        for candidate in made:
            pattern = patterns[candidate.pattern_id]
            assert (candidate.round, candidate.signal) == (pattern.round, pattern.dominant_signal)
            assert isinstance(candidate.prompt, str) and candidate.prompt
            assert isinstance(candidate.provenance, dict) and candidate.task_id
            assert load_environment(candidate.env).check_spec(candidate.spec) == []

    def test_no_patterns_no_candidates(self, synthesizer, store):
        assert synthesizer.propose(store, [], max_candidates=5, seed=0) == []
