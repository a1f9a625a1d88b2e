"""Cluster unit vectors into patterns, choosing how many patterns there are.

``cluster_vectors`` is a pure function of the set of vectors and the seed, to the last bit: the order the vectors
come in, the number of threads and the BLAS library's choices of parallel work change nothing. The vectors are
put in one canonical order first (by their components, lexicographically) and clustered in that order with one
thread, and each vector's cluster is handed back in the order given. (KMeans' starting centres are drawn by
position, so without the canonical order a symmetric set of vectors, or one with equal distances, could split
differently when the same flagged trajectories come in another order.)

- fewer than 3 vectors, or fewer than 2 distinct ones: one cluster;
- otherwise KMeans (scikit-learn, ``random_state=seed``) for every k in 2..min(max_k, n - 1, distinct
  vectors), keeping the k with the best silhouette under cosine distance (a tie keeps the smaller k);
- more than ``sample_size`` vectors: k is chosen and KMeans fitted on a seeded sample of that size, and every
  vector is then assigned to its nearest KMeans centre (silhouette costs n^2 distances).

Each cluster's centre is the normalised mean of its members (a direction, so that the cosine distance of a
member to it is ``1 - <v, centre>``). Clusters are numbered by size, largest first; equal sizes by their first
member in the canonical order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEFAULT_MAX_K = 8
DEFAULT_SAMPLE_SIZE = 2000
N_INIT = 4  # KMeans restarts per k


@dataclass(frozen=True)
class Clustering:
    """The clusters of n vectors."""

    labels: np.ndarray  # (n,) cluster of each vector, 0..k-1, 0 the largest
    centroids: np.ndarray  # (k, dim) unit vectors: each cluster's normalised mean
    distances: np.ndarray  # (n,) cosine distance of each vector to its cluster's centre
    k: int
    silhouette: float | None  # mean cosine silhouette of the chosen k (None when one cluster was forced)
    scores: dict[int, float] = field(default_factory=dict)  # silhouette of every k tried
    fitted_on: int = 0  # vectors KMeans was fitted on (n, or the sample size)

    def sizes(self) -> list[int]:
        return np.bincount(self.labels, minlength=self.k).tolist()


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _distinct(vectors: np.ndarray) -> int:
    return int(np.unique(np.round(vectors, 6), axis=0).shape[0])


def canonical_order(vectors: np.ndarray) -> np.ndarray:
    """The permutation that sorts the rows of ``vectors`` by their components, lexicographically (equal rows keep
    their order, so they get the same cluster anyway)."""
    return np.lexsort(vectors.T[::-1], axis=0) if vectors.shape[0] else np.zeros(0, dtype=np.int64)


def _best_kmeans(fit: np.ndarray, max_k: int, seed: int):
    """(model, silhouette, scores) of the k in 2..max_k with the best cosine silhouette, or None if none split."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    best, best_score, scores = None, -np.inf, {}
    for k in range(2, max_k + 1):
        model = KMeans(n_clusters=k, random_state=seed, n_init=N_INIT).fit(fit)
        if len(np.unique(model.labels_)) < 2:
            continue
        score = float(silhouette_score(fit, model.labels_, metric="cosine"))
        scores[k] = score
        if score > best_score:
            best, best_score = model, score
    return (best, best_score, scores) if best is not None else None


def _finish(vectors: np.ndarray, raw_labels: np.ndarray, silhouette: float | None, scores: dict[int, float],
            fitted_on: int) -> Clustering:
    """Renumber clusters by size and compute their centres and each member's distance."""
    present = np.unique(raw_labels)
    first = {label: int(np.flatnonzero(raw_labels == label)[0]) for label in present}
    size = {label: int(np.sum(raw_labels == label)) for label in present}
    order = sorted(present, key=lambda label: (-size[label], first[label]))
    renumber = {old: new for new, old in enumerate(order)}
    labels = np.array([renumber[label] for label in raw_labels], dtype=np.int64)
    centroids = _unit(np.stack([vectors[labels == c].mean(axis=0) for c in range(len(order))]))
    distances = 1.0 - np.einsum("ij,ij->i", vectors, centroids[labels])
    return Clustering(labels=labels, centroids=centroids, distances=np.clip(distances, 0.0, 2.0), k=len(order),
                      silhouette=silhouette, scores=scores, fitted_on=fitted_on)


def cluster_vectors(vectors: np.ndarray, *, max_k: int = DEFAULT_MAX_K, seed: int = 0,
                    sample_size: int = DEFAULT_SAMPLE_SIZE) -> Clustering:
    """Cluster ``vectors`` (n, dim), choosing k by cosine silhouette; see the module docstring."""
    from threadpoolctl import threadpool_limits

    if max_k < 1:
        raise ValueError(f"max_k must be at least 1, got {max_k}")
    if sample_size < 3:
        raise ValueError(f"sample_size must be at least 3, got {sample_size}")
    vectors = _unit(np.asarray(vectors, dtype=np.float64))
    if vectors.shape[0] == 0:
        raise ValueError("no vectors to cluster")
    order = canonical_order(vectors)
    with threadpool_limits(limits=1):  # one thread: the same sums in the same order on any machine
        canonical = _cluster(vectors[order], max_k, seed, sample_size)
    labels, distances = np.empty_like(canonical.labels), np.empty_like(canonical.distances)
    labels[order], distances[order] = canonical.labels, canonical.distances
    return Clustering(labels=labels, centroids=canonical.centroids, distances=distances, k=canonical.k,
                      silhouette=canonical.silhouette, scores=canonical.scores, fitted_on=canonical.fitted_on)


def _cluster(vectors: np.ndarray, max_k: int, seed: int, sample_size: int) -> Clustering:
    """``cluster_vectors`` on unit vectors already in canonical order."""
    n = vectors.shape[0]
    fit = vectors
    if n > sample_size:
        rng = np.random.default_rng(seed)
        fit = vectors[np.sort(rng.choice(n, size=sample_size, replace=False))]
    upper = min(max_k, fit.shape[0] - 1, _distinct(fit)) if n >= 3 else 1
    chosen = _best_kmeans(fit, upper, seed) if upper >= 2 else None
    if chosen is None:
        return _finish(vectors, np.zeros(n, dtype=np.int64), None, {}, fit.shape[0])
    model, silhouette, scores = chosen
    labels = model.labels_ if fit is vectors else model.predict(vectors)
    return _finish(vectors, np.asarray(labels), silhouette, scores, fit.shape[0])
