"""Find failure patterns: cluster the trajectories flagged at one step and store the clusters as a round.

``find_patterns`` runs five phases and times each one:

1. select  the trajectories flagged at ``step`` (default: the latest scored step), one per trajectory with
           every signal it carries; a seeded sample when more than ``max_trajectories`` are flagged;
2. render  each as a short text (``render.py``);
3. embed   the texts (``Embedder``, cached in the ``embeddings`` table, so a text is embedded once);
4. cluster the vectors, choosing the number of patterns by silhouette (``cluster.py``);
5. write   one ``failure_patterns`` row per cluster and one ``pattern_members`` row per member, in one
           transaction (``write.py``).

Nothing is written when nothing is flagged, or when the round already has patterns and ``replace`` is false.

Embedding is the slow phase (seconds to minutes for new texts), and ``find_patterns`` runs on a store opened for
writing, which no other process can open meanwhile. ``embed_ahead`` therefore embeds the same texts first,
reading the store read-only and computing the vectors with no store open, then saves them to the cache in one
short transaction: ``find_patterns`` afterwards finds every vector cached, and holds the store for the
selection, the clustering and the write only. ``prepare_patterns`` goes one step further: it also clusters with
no store held (KMeans and silhouettes take seconds), and ``find_patterns(prepared=...)`` then only checks that
the selection under the lock is the one that was clustered (the same trajectories, texts, ``max_k`` and seed,
so the same patterns: clustering is a pure function of the vectors and the seed) and writes.
"""

from __future__ import annotations

import time
from builtins import round as _round_to
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np

from coevolve_engine.core import DEFAULT_WAIT_SECONDS
from coevolve_engine.models.embeddings import Embedder, text_hash
from coevolve_engine.core.errors import CoevolveError
from coevolve_engine.patterns.cluster import DEFAULT_MAX_K, DEFAULT_SAMPLE_SIZE, Clustering, cluster_vectors
from coevolve_engine.patterns.render import MAX_CHARS, render_row, task_text
from coevolve_engine.patterns.select import explain_none_flagged, latest_step, ordered_signals, select_flagged
from coevolve_engine.patterns.write import MemberRow, PatternRow, build_rows, check_round, next_round, write_rows
from coevolve_engine.core.signal_params import SignalParams
from coevolve_engine.core.store import Store

DEFAULT_MAX_TRAJECTORIES = 2000
PHASES = ("select", "render", "embed", "cluster", "write")


@dataclass(frozen=True)
class Pattern:
    """One stored failure pattern, with its representative's task for display."""

    pattern_id: str
    cluster: int
    size: int
    dominant_signal: str
    signal_counts: dict[str, int]
    representative_trajectory: str
    representative_task: str
    representative_prompt: str | None
    members: tuple[str, ...]  # trajectory ids


@dataclass(frozen=True)
class PatternSelection:
    """Which flagged trajectories a round's patterns come from, and how they are clustered: what
    ``find_patterns``, ``prepare_patterns`` and ``embed_ahead`` share, so the three see one selection.

    round: default 1 + the latest round in failure_patterns (0 for the first). A round that already has
        patterns is refused unless ``replace``, which deletes and rewrites them in one transaction.
    step: default the latest step with scored trajectories.
    first_step: cluster what was flagged at steps ``first_step`` .. ``step`` (default: at ``step`` only).
    params: the signal constants that decide what is flagged (default ``SignalParams()``).
    max_trajectories: cluster at most this many (a seeded sample when more are flagged).
    max_k: try at most this many patterns. seed: the sample and KMeans seed.
    signals: cluster only trajectories flagged by these signals (default: every signal), each member carrying
        only these; recorded in the patterns' params when given.
    """

    round: int | None = None
    step: int | None = None
    first_step: int | None = None
    params: SignalParams | None = None
    max_trajectories: int = DEFAULT_MAX_TRAJECTORIES
    max_k: int = DEFAULT_MAX_K
    seed: int = 0
    signals: Sequence[str] | None = None
    replace: bool = False

    @property
    def signal_params(self) -> SignalParams:
        return self.params or SignalParams()


@dataclass(frozen=True)
class PreparedPatterns:
    """A selection's clustering, computed by ``prepare_patterns`` with no store held; ``find_patterns`` uses it
    only when its own selection under the write lock is the same."""

    step: int
    trajectory_ids: tuple[str, ...]
    text_hashes: tuple[str, ...]
    max_k: int
    seed: int
    clustering: Clustering
    seconds: float  # the clustering's time
    embedded: int = 0  # texts embedded ahead (not in the cache before)

    def fits(self, step: int, trajectory_ids: Sequence[str], text_hashes: Sequence[str], max_k: int,
             seed: int) -> bool:
        return (self.step, self.trajectory_ids, self.text_hashes, self.max_k, self.seed) == (
            step, tuple(trajectory_ids), tuple(text_hashes), max_k, seed)


@dataclass
class PatternReport:
    """What ``find_patterns`` found and wrote, and how long each phase took (seconds)."""

    round: int
    step: int
    params: SignalParams
    flagged: int  # trajectories flagged at the step
    clustered: int  # of those, clustered (all, or a seeded sample of max_trajectories)
    patterns: list[Pattern]
    k: int
    silhouette: float | None  # cosine silhouette of the chosen k (None when there were fewer than 3 members)
    model: str  # the embedding model
    embedded: int  # texts the model embedded (the rest came from the embeddings cache)
    replaced: int  # patterns of the round that were deleted and written again
    timings: dict[str, float] = field(default_factory=dict)
    prepared: bool = False  # the clustering came from ``prepare_patterns`` (computed before the store was held)

    @property
    def sizes(self) -> list[int]:
        return [p.size for p in self.patterns]


class _Clock:
    """Seconds spent in each phase."""

    def __init__(self, progress: Callable[[str], None] | None) -> None:
        self.timings: dict[str, float] = {}
        self.progress = progress

    @contextmanager
    def phase(self, name: str, message: str | None = None) -> Iterator[None]:
        if self.progress and message:
            self.progress(message)
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(time.perf_counter() - started, 4)


def _check_arguments(store: Store, round_: int | None, max_trajectories: int, max_k: int) -> None:
    if store.read_only:
        raise CoevolveError("finding failure patterns writes to the store: open it for writing")
    if max_trajectories < 1:
        raise CoevolveError(f"max_trajectories must be at least 1, got {max_trajectories}")
    if max_k < 1:
        raise CoevolveError(f"max_k must be at least 1, got {max_k}")
    if round_ is not None and round_ < 0:
        raise CoevolveError(f"round must be >= 0, got {round_}")


def find_patterns(
    store: Store,
    selection: PatternSelection | None = None,
    *,
    embedder: "Embedder | None" = None,
    progress: Callable[[str], None] | None = None,
    prepared: PreparedPatterns | None = None,
) -> PatternReport:
    """Cluster the trajectories ``selection`` names (default ``PatternSelection()``: the latest step, the next
    round) into failure patterns and store them as its round.

    embedder: default ``Embedder(store=store)`` (all-MiniLM-L6-v2, cached in the store).
    progress: called with a line before each long phase.
    prepared: a clustering from ``prepare_patterns`` (same selection), used when the selection under the write
        lock is the one it clustered; otherwise the vectors are clustered here.
    """
    selection = selection or PatternSelection()
    round, step, first_step = selection.round, selection.step, selection.first_step
    max_trajectories, max_k, seed = selection.max_trajectories, selection.max_k, selection.seed
    signals, replace = selection.signals, selection.replace
    params = selection.signal_params
    _check_arguments(store, round, max_trajectories, max_k)
    clock = _Clock(progress)

    with clock.phase("select"):
        round_ = next_round(store) if round is None else round
        check_round(store, round_, replace=replace)  # fail before the slow phases
        step_ = latest_step(store) if step is None else step
        selection = select_flagged(store, step_, params, limit=max_trajectories, seed=seed, first_step=first_step,
                                   signals=signals)
        if not selection.rows:
            raise CoevolveError(explain_none_flagged(store, step_, params, signals))
    rows = selection.rows

    with clock.phase("render"):
        texts = [render_row(row) for row in rows]

    if embedder is None:
        embedder = Embedder(store=store)
    elif embedder.store is not store:
        embedder.store = store  # an embedder from embed_ahead, or one kept across rounds: this store's cache
    computed_before = embedder.computed
    with clock.phase("embed", f"embedding {len(texts)} trajectories ({len(set(texts))} distinct texts)"):
        vectors = embedder.embed(texts)  # writes the cache in a transaction of its own

    hashes = [text_hash(t) for t in texts]
    ids = [row["trajectory_id"] for row in rows]
    use_prepared = prepared is not None and prepared.fits(step_, ids, hashes, max_k, seed)
    if use_prepared:
        clustering = prepared.clustering
        clock.timings["cluster"] = prepared.seconds  # spent before the store was held
    else:
        with clock.phase("cluster", f"clustering {len(texts)} trajectories (up to {max_k} patterns)"):
            clustering = cluster_vectors(vectors, max_k=max_k, seed=seed, sample_size=DEFAULT_SAMPLE_SIZE)

    with clock.phase("write"):
        stored_params = {
            **params.bind(), "model": embedder.model_name, "k": clustering.k, "max_k": max_k, "seed": seed,
            "step": step_, "first_step": step_ if first_step is None else first_step,
            "flagged": selection.flagged, "clustered": len(rows),
            "max_trajectories": max_trajectories, "silhouette": clustering.silhouette,
            "fitted_on": clustering.fitted_on, "render_max_chars": MAX_CHARS,
        }
        if signals is not None:
            stored_params["signals"] = list(ordered_signals(signals))
        pattern_rows, member_rows = build_rows(
            round_, step_, ids, [row["signals"] for row in rows], hashes, clustering.labels.tolist(),
            clustering.distances.tolist(), stored_params)
        replaced = write_rows(store, round_, pattern_rows, member_rows, replace=replace)

    return PatternReport(
        round=round_, step=step_, params=params, flagged=selection.flagged, clustered=len(rows),
        patterns=_patterns(pattern_rows, member_rows, rows), k=clustering.k, silhouette=clustering.silhouette,
        model=embedder.model_name, embedded=embedder.computed - computed_before, replaced=replaced,
        timings=clock.timings, prepared=use_prepared,
    )


def embed_ahead(
    db,
    selection: PatternSelection | None = None,
    *,
    embedder: "Embedder | None" = None,
    wait: float = DEFAULT_WAIT_SECONDS,
    progress: Callable[[str], None] | None = None,
) -> tuple["Embedder", int]:
    """Embed the texts ``find_patterns`` (same selection) will cluster, without holding the store while the
    model runs: select and look the cache up read-only, embed what is missing with no store open, save those
    vectors in one short transaction. Returns the embedder (pass it to ``find_patterns``) and how many texts
    it embedded. A round that ``find_patterns`` would refuse is refused here, before any work."""
    ahead = _embed_selection(db, selection or PatternSelection(), embedder=embedder, wait=wait, progress=progress)
    return ahead.embedder, ahead.embedded


def prepare_patterns(
    db,
    selection: PatternSelection | None = None,
    *,
    embedder: "Embedder | None" = None,
    wait: float = DEFAULT_WAIT_SECONDS,
    progress: Callable[[str], None] | None = None,
) -> tuple["Embedder", "PreparedPatterns | None"]:
    """``embed_ahead``, then the clustering too, all with no store held for writing: returns the embedder and
    the clustering for ``find_patterns(prepared=...)`` (None when nothing is flagged; ``find_patterns`` explains)."""
    selection = selection or PatternSelection()
    max_k, seed = selection.max_k, selection.seed
    ahead = _embed_selection(db, selection, embedder=embedder, wait=wait, progress=progress)
    if not ahead.texts:
        return ahead.embedder, None
    if progress:
        progress(f"clustering {len(ahead.texts)} trajectories (up to {max_k} patterns; the store is not held)")
    started = time.perf_counter()
    hashes = [text_hash(t) for t in ahead.texts]
    vectors = np.stack([ahead.vectors[h] for h in hashes])
    clustering = cluster_vectors(vectors, max_k=max_k, seed=seed, sample_size=DEFAULT_SAMPLE_SIZE)
    return ahead.embedder, PreparedPatterns(
        step=ahead.step, trajectory_ids=tuple(ahead.trajectory_ids), text_hashes=tuple(hashes), max_k=max_k,
        seed=seed, clustering=clustering, seconds=_round_to(time.perf_counter() - started, 4),
        embedded=ahead.embedded)


@dataclass
class _Ahead:
    embedder: "Embedder"
    embedded: int
    step: int
    trajectory_ids: list[str]
    texts: list[str]
    vectors: dict  # text hash -> vector, as the cache holds it


def _embed_selection(db, selection: PatternSelection, *, embedder: "Embedder | None", wait: float,
                     progress: Callable[[str], None] | None) -> _Ahead:
    params = selection.signal_params
    embedder = embedder or Embedder()
    with Store(db, read_only=True, wait=wait) as store:
        if selection.round is not None:
            check_round(store, selection.round, replace=selection.replace)
        step_ = latest_step(store) if selection.step is None else selection.step
        rows = select_flagged(store, step_, params, limit=selection.max_trajectories, seed=selection.seed,
                              first_step=selection.first_step, signals=selection.signals).rows
        texts = [render_row(row) for row in rows]
        cached = embedder.cached(store, texts)
    ids = [row["trajectory_id"] for row in rows]
    missing = [t for t in texts if text_hash(t) not in cached]
    if not missing:
        return _Ahead(embedder, 0, step_, ids, texts, cached)
    if progress:
        progress(f"embedding {len(set(missing))} new texts (the store is not held meanwhile)")
    vectors = embedder.compute(missing)
    with Store(db, wait=wait) as store:
        embedder.save(store, vectors)
        cached = embedder.cached(store, texts)  # every vector as the cache holds it, as find_patterns reads them
    return _Ahead(embedder, len(vectors), step_, ids, texts, cached)


def _patterns(pattern_rows: list[PatternRow], member_rows: list[MemberRow], rows: list[dict]) -> list[Pattern]:
    """The stored patterns as the report shows them, each with its representative's task."""
    by_id = {row["trajectory_id"]: row for row in rows}
    members: dict[str, list[str]] = {}
    for member in member_rows:
        members.setdefault(member.pattern_id, []).append(member.trajectory_id)
    patterns = []
    for p in pattern_rows:
        representative = by_id[p.representative_trajectory]
        patterns.append(Pattern(
            pattern_id=p.pattern_id, cluster=p.cluster, size=p.size, dominant_signal=p.dominant_signal,
            signal_counts=p.signal_counts, representative_trajectory=p.representative_trajectory,
            representative_task=representative["task_id"],
            representative_prompt=task_text(representative["prompt"], representative["messages"]) or None,
            members=tuple(members.get(p.pattern_id, ())),
        ))
    return patterns
