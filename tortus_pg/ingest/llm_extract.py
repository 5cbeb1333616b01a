"""Optional concept and edge extraction by a chat model, grounded in the chunk text.

One strict JSON-schema request per chunk asks for entities and typed relations. Nothing
the model says is kept unless the text backs it: an entity needs its name in the chunk
(every occurrence becomes a mention), a relation needs a verbatim quote from the chunk
and two such entities. Keys come from `concept_key`, so the result merges with the
deterministic extractor's (see `merged`).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

from pydantic import Field

from tortus_pg import progress
from tortus_pg.errors import ConfigError
from tortus_pg.ingest.extract import concept_key, extract_concepts
from tortus_pg.ingest.types import Chunk, Concept, Document, ExtractedEdge, Extraction, Mention
from tortus_pg.llm import Answer, ChatClient, EndpointError, TokenLedger

NodeKind = Literal["concept", "entity", "claim", "api", "decision", "event"]
EdgeType = Literal[
    "supports", "contradicts", "depends_on", "caused_by", "implements", "related_to", "part_of",
    "defines", "same_as", "cites", "owned_by", "led_by", "affects", "supersedes",
]  # fmt: skip
NODE_KINDS: tuple[str, ...] = get_args(NodeKind)
EDGE_TYPES: tuple[str, ...] = get_args(EdgeType)
_SYMMETRIC = frozenset({"related_to", "same_as"})
SCHEMA_NAME = "tortus_extraction"


class Entity(Answer):
    name: str = Field(description="exactly as written in the chunk")
    kind: NodeKind


class Relation(Answer):
    source: str = Field(description="an entity name")
    type: EdgeType
    target: str = Field(description="an entity name")
    evidence: str = Field(description="a verbatim quote from the chunk")
    # No bounds: an answer with 1.2 is clamped rather than asked for again.
    confidence: float = Field(description="0 to 1")


class ExtractionAnswer(Answer):
    """What the model is asked for, per chunk."""

    entities: list[Entity]
    relations: list[Relation]


SYSTEM_PROMPT = """\
You build a knowledge graph from one chunk of a document. Use only what the chunk says.
Entities: at most {max_entities} people, organizations, products, services, APIs, identifiers, \
decisions, events and key concepts the chunk mentions, each with its name copied exactly as \
written in the chunk. Kinds: entity (a named thing), concept (an idea or technique), api (code, \
endpoint, service or config name), decision, event (incident, release, meeting), claim.
Relations: read each as "source TYPE target", e.g. "A depends_on B" when A needs B, "A \
caused_by B" when B caused A, "A part_of B", "A owned_by B", "A led_by B" when B leads A, \
"A supersedes B". Source and target must be listed entities. Evidence is a short quote copied \
verbatim from the chunk that states the relation (no paraphrase, no ellipsis). Confidence is \
from 0 to 1.
If the chunk states nothing useful, return empty lists."""


@dataclass(frozen=True)
class LLMExtraction:
    """An extraction, and how many chunks got no usable answer from the model."""

    extraction: Extraction
    failed_chunks: int = 0


@dataclass
class _Graph:
    """Concepts merged by key (first label and kind win) and edges by (src, dst, type)."""

    labels: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    mentions: dict[str, dict[Mention, None]] = field(default_factory=dict)  # ordered sets
    edges: dict[tuple[str, str, str], ExtractedEdge] = field(default_factory=dict)
    warnings: dict[str, None] = field(default_factory=dict)
    defines: dict[tuple[int, str], None] = field(default_factory=dict)

    def add_concept(self, concept: Concept) -> None:
        self.labels.setdefault(concept.key, concept.label)
        self.kinds.setdefault(concept.key, concept.kind)
        self.mentions.setdefault(concept.key, {}).update(dict.fromkeys(concept.mentions))

    def add_edge(self, edge: ExtractedEdge) -> None:
        old = self.edges.get((edge.src, edge.dst, edge.type))
        if old is None or edge.confidence > old.confidence:
            self.edges[(edge.src, edge.dst, edge.type)] = edge

    def add(self, extraction: Extraction) -> None:
        for concept in extraction.concepts:
            self.add_concept(concept)
        for edge in extraction.edges:
            self.add_edge(edge)
        self.warnings.update(dict.fromkeys(extraction.warnings))
        self.defines.update(dict.fromkeys(extraction.defines))

    def build(self) -> Extraction:
        concepts = tuple(
            Concept(key, self.labels[key], self.kinds[key], tuple(sorted(found, key=_position)))
            for key, found in self.mentions.items()
        )
        return Extraction(concepts, tuple(self.edges.values()), tuple(self.warnings), tuple(self.defines))


def _position(mention: Mention) -> tuple[int, int, int]:
    return mention.start, mention.end, mention.chunk


def merged(a: Extraction, b: Extraction) -> Extraction:
    """Union two extractions of the same document (say deterministic and LLM).

    Concepts are merged by key with their mentions unioned; label and kind come from the
    first extraction that has the key. Edges are de-duplicated by (src, dst, type), keeping
    the one with the highest confidence (the earlier one on a tie). Warnings and definitions are
    concatenated.
    """
    graph = _Graph()
    graph.add(a)
    graph.add(b)
    return graph.build()


class LLMExtractor:
    """Extracts concepts and typed edges with a chat model, one request per chunk.

    Produces the same `Extraction` as `extract_concepts`, with rule "llm:<model>" on every
    edge. A chunk whose request fails (after the client's retries) is skipped with a
    warning; `extract_detailed` also says how many failed, so a caller can fall back.
    """

    def __init__(self, client: ChatClient, *, max_chunk_chars: int = 6000, max_entities: int = 30) -> None:
        if max_chunk_chars < 1:
            raise ConfigError(f"max_chunk_chars must be >= 1, got {max_chunk_chars}")
        if max_entities < 1:
            raise ConfigError(f"max_entities must be >= 1, got {max_entities}")
        self.client = client
        self.max_chunk_chars = max_chunk_chars
        self.max_entities = max_entities
        self.rule = f"llm:{client.model}"
        self._system = SYSTEM_PROMPT.format(max_entities=max_entities)

    def __repr__(self) -> str:
        return f"LLMExtractor({self.client!r})"

    @property
    def ledger(self) -> TokenLedger:
        """Requests, retries and tokens spent by the client."""
        return self.client.ledger

    def extract(self, doc: Document, chunks: list[Chunk], *, title: str | None = None) -> Extraction:
        """Extract grounded concepts and edges from a chunked document.

        `title` (default `doc.title`) becomes an entity concept with a mention in the first
        chunk, exactly as `extract_concepts` makes it.
        """
        return self.extract_detailed(doc, chunks, title=title).extraction

    def extract_detailed(self, doc: Document, chunks: list[Chunk], *, title: str | None = None) -> LLMExtraction:
        """Like `extract`, also counting the chunks whose request failed."""
        if not chunks:
            return LLMExtraction(Extraction())
        graph = _Graph()
        title = title if title is not None else doc.title
        title_concept = _title_concept(doc, chunks, title)
        title_key = title_concept.key if title_concept is not None else ""
        if title_concept is not None:
            graph.add_concept(title_concept)
        dropped: Counter[str] = Counter()
        failed = 0
        for done, chunk in enumerate(chunks):
            progress.report("extracting with the LLM", done, len(chunks))
            text = chunk.text[: self.max_chunk_chars]
            try:
                answer = self.client.complete_json(
                    self._system, _user_message(text, chunk, title), ExtractionAnswer, schema_name=SCHEMA_NAME
                )
            except EndpointError as exc:
                failed += 1
                graph.warnings[f"chunk {chunk.index}: llm extraction failed: {exc}"] = None
                continue
            self._ground(graph, chunk, text, answer, title_key, dropped)
        progress.report("extracting with the LLM", len(chunks), len(chunks))
        for reason, count in dropped.items():
            if count:
                graph.warnings[_DROPPED[reason](count)] = None
        return LLMExtraction(graph.build(), failed)

    def _ground(
        self,
        graph: _Graph,
        chunk: Chunk,
        text: str,
        answer: ExtractionAnswer,
        title_key: str,
        dropped: Counter[str],
    ) -> None:
        """Add what the chunk text backs of one answer to `graph`; count the rest in `dropped`."""
        entities = answer.entities
        dropped["over_limit"] += max(0, len(entities) - self.max_entities)
        keys: dict[str, str] = {}  # unfolded and folded key of each grounded name -> concept key
        for entity in entities[: self.max_entities]:
            name, kind = entity.name, entity.kind
            key = concept_key(name, fold_plural=_is_phrase(name, kind))
            spans = _find_name(name, text) if key else []
            if not spans and key and key == title_key:
                keys[concept_key(name)] = keys[key] = key  # the title is about the whole document
                continue
            if not spans:
                dropped["entity"] += 1
                continue
            keys[concept_key(name)] = keys[key] = key
            first = text[spans[0][0] : spans[0][1]]
            mentions = tuple(Mention(chunk.index, chunk.start + s, chunk.start + e) for s, e in spans)
            graph.add_concept(Concept(key, " ".join(first.split()), kind, mentions))
        for relation in answer.relations:
            src, dst = _lookup(keys, relation.source), _lookup(keys, relation.target)
            if src is None or dst is None or src == dst:
                dropped["unlinked"] += 1
                continue
            quote = _find_quote(relation.evidence, text)
            if quote is None:
                dropped["evidence"] += 1
                continue
            type_ = relation.type
            if type_ in _SYMMETRIC and dst < src:
                src, dst = dst, src
            start, end = quote
            evidence = Mention(chunk.index, chunk.start + start, chunk.start + end)
            graph.add_edge(ExtractedEdge(src, dst, type_, _clamp(relation.confidence), self.rule, evidence))


def _dropped(one: str, many: str) -> Callable[[int], str]:
    return lambda n: f"{n} {one} was dropped" if n == 1 else f"{n} {many} were dropped"


_DROPPED = {
    "over_limit": _dropped("entity over the per-chunk limit", "entities over the per-chunk limit"),
    "entity": _dropped("entity not found in its chunk", "entities not found in their chunk"),
    "unlinked": _dropped(
        "relation not between two entities found in its chunk",
        "relations not between two entities found in their chunk",
    ),
    "evidence": _dropped(
        "relation whose evidence is not a quote from its chunk",
        "relations whose evidence is not a quote from their chunk",
    ),
}


def _user_message(text: str, chunk: Chunk, title: str | None) -> str:
    lines = [f"Document title: {title}"] if title else []
    if chunk.headings:
        lines.append("Section: " + " > ".join(chunk.headings))
    lines += ["Chunk:", text]
    return "\n".join(lines)


def _title_concept(doc: Document, chunks: list[Chunk], title: str | None) -> Concept | None:
    """The title concept exactly as `extract_concepts` builds it, mentions in the right chunks."""
    if not title or not title.strip():
        return None
    # Only the first chunk is analysed: the title's occurrences are searched in the whole
    # text anyway, and the title concept always sorts first.
    found = extract_concepts(doc, chunks[:1], title=title).concepts
    if not found or not title.strip().startswith(found[0].label):
        return None
    concept = found[0]
    ordered = sorted(chunks, key=lambda c: c.start)
    starts = [c.start for c in ordered]
    mentions: list[Mention] = []
    for m in concept.mentions:
        i = bisect.bisect_right(starts, m.start) - 1
        if i >= 0 and m.end <= ordered[i].end:
            mentions.append(Mention(ordered[i].index, m.start, m.end))
    return Concept(concept.key, concept.label, concept.kind, tuple(mentions))


def _is_phrase(name: str, kind: str) -> bool:
    # The deterministic extractor folds plurals only for lowercase key phrases, never names.
    words = name.split()
    return kind == "concept" and bool(words) and words[-1].islower()


def _lookup(keys: dict[str, str], name: str) -> str | None:
    return keys.get(concept_key(name)) or keys.get(concept_key(name, fold_plural=True))


def _loose(words: list[str]) -> str:
    return r"\s+".join(map(re.escape, words))  # any whitespace run matches any other


def _find_name(name: str, text: str) -> list[tuple[int, int]]:
    """Every occurrence of `name` in `text` as a whole word, ignoring case and spacing."""
    words = name.split()
    if not words:
        return []
    head = r"(?<!\w)" if re.match(r"\w", words[0]) else ""
    tail = r"(?!\w)" if re.search(r"\w$", words[-1]) else ""
    return [m.span() for m in re.finditer(head + _loose(words) + tail, text, re.IGNORECASE)]


def _find_quote(quote: str, text: str) -> tuple[int, int] | None:
    """The first occurrence of `quote` in `text`, ignoring only differences in whitespace."""
    words = quote.split()
    found = re.search(_loose(words), text) if words else None
    return found.span() if found else None


def _clamp(value: float) -> float:
    return 0.0 if math.isnan(value) else min(max(float(value), 0.0), 1.0)
