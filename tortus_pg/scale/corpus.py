"""A synthetic corpus for the scale suite, deterministic by seed.

Each document is about one named thing. Its words follow a Zipfian law over a made-up
vocabulary (English prose falls off about as 1/rank^1.07), so BM25 meets the long posting
lists of frequent words as it does on real text. Half of them come from its topic's own words
(also Zipfian), so documents cluster by topic as real ones do, and so do their vectors. Its
first sentences link it to other things by the cue phrases the extractor reads ("X depends on
Y", "It is owned by the Z team"), so ingest builds typed edges; the things linked to are drawn
by the same law, so some become hubs. Documents fall into several subgraphs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tortus_pg.ingest.corpus import Passage

ZIPF_EXPONENT = 1.07
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "kr", "st", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
_CODAS = ("", "n", "r", "l", "s", "m", "th", "x")


def made_up_words(count: int, seed: int = 0) -> list[str]:
    """`count` distinct pronounceable words of one to three syllables (none an English word a
    stemmer or stop list would treat specially)."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < count:
        syllables = rng.integers(1, 4)
        parts = (_ONSETS, _VOWELS, _CODAS)
        word = "".join("".join(p[rng.integers(len(p))] for p in parts) for _ in range(syllables))
        words.setdefault(word + "q", None)  # a final q: no English stem or stop word ends so
    return list(words)


def zipf_cdf(count: int, exponent: float = ZIPF_EXPONENT) -> np.ndarray:
    """The cumulative distribution of P(rank r) proportional to 1 / r^exponent over ranks 1..count."""
    weights = np.cumsum(1.0 / np.arange(1, count + 1, dtype=float) ** exponent)
    cdf: np.ndarray = weights / weights[-1]
    return cdf


def draw(rng: np.random.Generator, cdf: np.ndarray, size: int) -> np.ndarray:
    """`size` ranks (0-based) drawn by the distribution `cdf`."""
    return np.minimum(np.searchsorted(cdf, rng.random(size)), len(cdf) - 1)


@dataclass(frozen=True)
class SyntheticCorpus:
    """The vocabulary and the names of the things documents are about; `subgraphs` groups."""

    vocabulary: tuple[str, ...]
    names: tuple[str, ...]
    subgraphs: int = 4
    teams: int = 50
    seed: int = 0
    topics: int = 64  # each owns an equal share of the vocabulary, past its most common fifteenth

    @cached_property
    def _cdfs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The Zipfian laws over the whole vocabulary, a topic's words and the named things."""
        return (zipf_cdf(len(self.vocabulary)), zipf_cdf(len(self.topic_words(0))), zipf_cdf(len(self.names)))

    @classmethod
    def make(cls, documents: int, *, vocabulary: int = 30_000, subgraphs: int = 4, seed: int = 0) -> SyntheticCorpus:
        words = made_up_words(vocabulary + 2 * int(np.sqrt(documents) + 1), seed)
        extra = words[vocabulary:]  # name parts: every first word with every second word
        first, second = extra[:len(extra) // 2], extra[len(extra) // 2:]
        names = tuple(f"{a.title()} {b.title()}" for a in first for b in second)[:documents]
        return cls(tuple(words[:vocabulary]), names, subgraphs, seed=seed)

    def subgraph_of(self, document: int) -> str:
        return f"part-{document % self.subgraphs}"

    def topic_words(self, document: int) -> tuple[str, ...]:
        """The words of the document's topic (topics are dealt round the documents by a stride)."""
        common = len(self.vocabulary) // 15
        size = (len(self.vocabulary) - common) // self.topics
        start = common + (document * 7 % self.topics) * size
        return self.vocabulary[start:start + size]

    def passages(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[str, Passage]]:
        """Documents start..stop (each with its subgraph), the same for the same seed."""
        for n in range(start, len(self.names) if stop is None else min(stop, len(self.names))):
            rng = np.random.default_rng((self.seed, n))
            yield self.subgraph_of(n), Passage(f"doc-{n}", self.names[n], self._body(n, rng))

    def _words(self, rng: np.random.Generator, document: int, count: int) -> list[str]:
        """`count` words of a document: each from the whole vocabulary or from its topic's, by
        a fair coin, and by the Zipfian law within either."""
        topic = self.topic_words(document)
        every, own, _ = self._cdfs
        return [topic[int(draw(rng, own, 1)[0])] if rng.random() < 0.5 else self.vocabulary[int(draw(rng, every, 1)[0])]
                for _ in range(count)]

    def _body(self, n: int, rng: np.random.Generator) -> str:
        things = self._cdfs[2]
        other = self.names[int(draw(rng, things, 1)[0])]
        team = self.vocabulary[int(rng.integers(self.teams))].title()
        sentences = [f"{self.names[n]} depends on {other}.", f"It is owned by the {team} team."]
        for _ in range(int(rng.integers(4, 9))):
            drawn = self._words(rng, n, int(rng.integers(8, 17)))
            if rng.random() < 0.3:
                drawn.insert(int(rng.integers(len(drawn))), self.names[int(draw(rng, things, 1)[0])])
            sentences.append(" ".join(drawn).capitalize() + ".")
        return " ".join(sentences)

    def queries(self, count: int, documents: int, *, frequent: bool = False, seed: int = 1) -> list[str]:
        """Questions about random documents of the first `documents`: a thing's name and two
        words as its document draws them; `frequent`: one of them among the ten most common
        words, which appear in most documents."""
        rng = np.random.default_rng((self.seed, seed))
        out = []
        for _ in range(count):
            n = int(rng.integers(min(documents, len(self.names))))
            name = self.names[n]
            a, b = self._words(rng, n, 2)
            if frequent:
                a = self.vocabulary[int(rng.integers(10))]
            out.append(f"What does {name} say about {a} and {b}?")
        return out
