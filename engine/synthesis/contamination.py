"""The contamination gate: a candidate that is a near copy of a held-out task never becomes a training task.

A synthesizer exploring the environment the held-out (split 'eval') tasks come from can write one of them again
with other numbers, other names or its sentences in another order. Embeddings do not tell such a copy from a
different task of the same kind (all-MiniLM-L6-v2 puts "x is 3. Add 4." and "x is 8. Add 5." close together), so
the gate compares the tasks' words instead: ``task_words`` (``sql/views/task_words.sql``) is the set of the words
of every user turn with their literals masked, plus each literal keyed by the word before it ("add 4" gives "add"
and "add=4"). Two tasks' similarity is the Jaccard index of their sets: reordering sentences changes nothing, a
changed number or name changes one feature, a task about other things shares few words.

A candidate whose similarity to a held-out task of its environment is at least the threshold is refused with the
reason ``contaminated``, naming that task and the similarity. The ``contamination`` view applies the same measure
to every training task of a store, so a store made elsewhere can be audited with SQL.

The default threshold, 0.8, was set against the highest similarity between two distinct held-out tasks (the
``contamination_baseline`` view): 0.40 on BFCL multi_turn_base (200 tasks) and 0.89 on calc's test split (300
tasks of a few words and numbers: distinct tasks of one skill cell can share all but one literal). Drafts of the
200 BFCL tasks with every number and quoted name changed and every turn's sentences reversed keep 0.8 or more
in 192 cases (the lowest, a task of many numbers and names, 0.67); a calc copy with its sentences reordered is
1.0, and one changed literal keeps 0.8 in a calc task of 9 features or more. ``tests/test_contamination.py``
plants such copies among normal rounds of both environments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from coevolve_engine.core.ids import spec_json

if TYPE_CHECKING:  # pragma: no cover
    from coevolve_engine.core.store import Store
    from coevolve_engine.synthesis.candidates import Candidate

DEFAULT_THRESHOLD = 0.8
#: the check's name, and the reason a refused candidate carries
CHECK = "contaminated"

_WORDS_SQL = "SELECT task_words($prompt, CAST($spec AS JSON))"
_HELD_OUT_SQL = ("SELECT env, task_id, task_words(prompt, spec) FROM tasks "
                 "WHERE split = 'eval' AND list_contains($envs, env) ORDER BY task_id")


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """The Jaccard index of two task_words sets (0 when both are empty), as contamination_with computes it."""
    shared = len(a & b)
    return shared / max(len(a) + len(b) - shared, 1)


def task_words(store: "Store", prompt: str | None, spec: object) -> frozenset[str]:
    """The task_words set of one task (prompt and spec), computed by the store's own macro."""
    rows = store.execute(_WORDS_SQL, {"prompt": prompt, "spec": None if spec is None else spec_json(spec)}).fetchall()
    return frozenset(rows[0][0] or ())


class HeldOutIndex:
    """The task_words of the held-out tasks of some environments, and of the candidates to compare with them;
    built while the store is open, used after it is closed."""

    def __init__(self, store: "Store", candidates: Iterable["Candidate"]) -> None:
        candidates = list(candidates)
        envs = sorted({c.env for c in candidates})
        self._held_out: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for env, task_id, words in store.execute(_HELD_OUT_SQL, {"envs": envs}).fetchall():
            self._held_out.setdefault(env, []).append((task_id, frozenset(words or ())))
        self._words: dict[str, frozenset[str] | None] = {c.candidate_id: _words_or_none(store, c) for c in candidates if c.env in self._held_out}

    def has_held_out(self, env: str) -> bool:
        return bool(self._held_out.get(env))

    def nearest(self, candidate: "Candidate") -> tuple[str, float] | None:
        """(held-out task id, similarity) of the candidate's nearest held-out task of its environment (ties: the
        smallest id); None when the environment has none."""
        best: tuple[str, float] | None = None
        words = self._words.get(candidate.candidate_id) or frozenset()
        for task_id, held in self._held_out.get(candidate.env, ()):
            value = similarity(words, held)
            if best is None or value > best[1]:
                best = (task_id, value)
        return best


def _words_or_none(store: "Store", candidate: "Candidate") -> frozenset[str] | None:
    """The candidate's task_words; None for a spec no JSON can hold (the schema check refuses it first)."""
    try:
        return task_words(store, candidate.prompt, candidate.spec)
    except (TypeError, ValueError):
        return None
