"""LLM extraction against a local OpenAI-compatible server: grounding, failures, merging."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai_server import USAGE, FakeOpenAI, openai_server
from pydantic import ValidationError

from tortus_pg import progress
from tortus_pg.ingest.extract import concept_key, extract_concepts
from tortus_pg.ingest.llm_extract import (
    EDGE_TYPES,
    NODE_KINDS,
    ExtractionAnswer,
    LLMExtractor,
    merged,
)
from tortus_pg.ingest.types import Chunk, Concept, Document, ExtractedEdge, Extraction, Mention
from tortus_pg.llm import ChatClient, strict_schema

CHAT = "/v1/chat/completions"
PARAGRAPHS = (
    "The Payments Service depends on the Ledger API for every card charge; the ledger api\nanswers within 20 ms.",
    "Incident INC-7 was caused by an expired TLS certificate on the ledger  gateway, so payments failed for an hour.",
)
TEXT = "\n\n".join(PARAGRAPHS)
TITLE = "Payments Service"


def chunks_of(text: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    start = 0
    for i, part in enumerate(text.split("\n\n")):
        chunks.append(Chunk(i, start, start + len(part), part))
        start += len(part) + 2
    return chunks


DOC = Document(TEXT, "text", title=TITLE)
CHUNKS = chunks_of(TEXT)


def entity(name: str, kind: str = "entity") -> dict[str, str]:
    return {"name": name, "kind": kind}


def relation(source: str, type_: str, target: str, evidence: str, confidence: float = 0.9) -> dict[str, Any]:
    return {"source": source, "type": type_, "target": target, "evidence": evidence, "confidence": confidence}


def answer(entities: list[dict[str, str]], relations: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"entities": entities, "relations": relations or []})


FIRST = answer(
    [entity("Payments Service"), entity("Ledger API", "api")],
    [relation("Payments Service", "depends_on", "Ledger API", "The Payments Service depends on the Ledger API")],
)
SECOND = answer(
    [entity("INC-7", "event"), entity("TLS certificate", "concept"), entity("ledger gateway", "api")],
    [
        relation("INC-7", "caused_by", "TLS certificate", "caused by an expired TLS certificate", 0.8),
        # The quote's single space stands for the double space in the text.
        relation("TLS certificate", "part_of", "ledger gateway", "TLS certificate on the ledger gateway", 0.6),
    ],
)
EMPTY = answer([])


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with openai_server(contents=[FIRST, SECOND]) as state:
        yield state


@pytest.fixture
def extractor(server: FakeOpenAI) -> Iterator[LLMExtractor]:
    with ChatClient(server.base_url, None, "test-chat", max_retries=2) as client:
        yield LLMExtractor(client)


def by_key(ex: Extraction) -> dict[str, Concept]:
    return {c.key: c for c in ex.concepts}


def edges_by_triple(ex: Extraction) -> dict[tuple[str, str, str], ExtractedEdge]:
    return {(e.src, e.type, e.dst): e for e in ex.edges}


def assert_grounded(doc: Document, chunks: list[Chunk], ex: Extraction) -> None:
    """Every mention and evidence span lies inside its chunk; edges join known concepts."""
    spans = {c.index: (c.start, c.end) for c in chunks}
    keys = {c.key for c in ex.concepts}
    assert len(keys) == len(ex.concepts)
    for concept in ex.concepts:
        assert concept.kind in NODE_KINDS and concept.mentions
        for m in concept.mentions:
            start, end = spans[m.chunk]
            assert start <= m.start < m.end <= end
    triples = [(e.src, e.dst, e.type) for e in ex.edges]
    assert len(triples) == len(set(triples))
    for edge in ex.edges:
        assert edge.type in EDGE_TYPES and edge.src in keys and edge.dst in keys and edge.src != edge.dst
        start, end = spans[edge.evidence.chunk]
        assert start <= edge.evidence.start < edge.evidence.end <= end
        assert 0.0 <= edge.confidence <= 1.0


def test_grounded_entities_become_concepts_with_every_occurrence(extractor: LLMExtractor) -> None:
    ex = extractor.extract(DOC, CHUNKS)
    assert_grounded(DOC, CHUNKS, ex)
    assert ex.warnings == ()
    concepts = by_key(ex)
    assert list(concepts) == ["payments service", "ledger api", "inc-7", "tls certificate", "ledger gateway"]
    ledger = concepts["ledger api"]
    assert (ledger.label, ledger.kind) == ("Ledger API", "api")
    # Case-insensitive: both "Ledger API" and "ledger api" are mentions.
    assert [DOC.text[m.start : m.end] for m in ledger.mentions] == ["Ledger API", "ledger api"]
    assert {m.chunk for m in ledger.mentions} == {0}
    gateway = concepts["ledger gateway"]
    assert [DOC.text[m.start : m.end] for m in gateway.mentions] == ["ledger  gateway"]
    assert gateway.label == "ledger gateway" and gateway.mentions[0].chunk == 1
    assert concepts["inc-7"].kind == "event"


def test_grounded_relations_become_edges_whose_evidence_is_the_quote(extractor: LLMExtractor) -> None:
    ex = extractor.extract(DOC, CHUNKS)
    edges = edges_by_triple(ex)
    assert set(edges) == {
        ("payments service", "depends_on", "ledger api"),
        ("inc-7", "caused_by", "tls certificate"),
        ("tls certificate", "part_of", "ledger gateway"),
    }
    depends = edges[("payments service", "depends_on", "ledger api")]
    assert (depends.confidence, depends.rule, depends.evidence.chunk) == (0.9, "llm:test-chat", 0)
    assert DOC.text[depends.evidence.start : depends.evidence.end] == "The Payments Service depends on the Ledger API"
    caused = edges[("inc-7", "caused_by", "tls certificate")]
    assert caused.evidence.chunk == 1
    assert DOC.text[caused.evidence.start : caused.evidence.end] == "caused by an expired TLS certificate"
    part = edges[("tls certificate", "part_of", "ledger gateway")]
    assert DOC.text[part.evidence.start : part.evidence.end] == "TLS certificate on the ledger  gateway"


def test_title_concept_is_the_one_extract_concepts_makes(extractor: LLMExtractor) -> None:
    deterministic = by_key(extract_concepts(DOC, CHUNKS))
    title = by_key(extractor.extract(DOC, CHUNKS))["payments service"]
    expected = deterministic["payments service"]
    assert (title.label, title.kind, title.mentions) == (expected.label, expected.kind, expected.mentions)


def test_title_argument_wins_and_is_found_outside_the_first_chunk(server: FakeOpenAI, extractor: LLMExtractor) -> None:
    server.contents = [EMPTY]
    ex = extractor.extract(DOC, CHUNKS, title="Incident INC-7 (outage)")
    (title,) = ex.concepts
    assert (title.key, title.label, title.kind) == ("incident inc-7", "Incident INC-7", "entity")
    # No occurrence in the first chunk, so the whole first chunk stands for it, as in extract_concepts.
    assert [(m.chunk, DOC.text[m.start : m.end]) for m in title.mentions] == [
        (0, PARAGRAPHS[0]),
        (1, "Incident INC-7"),
    ]
    assert title == by_key(extract_concepts(DOC, CHUNKS, title="Incident INC-7 (outage)"))["incident inc-7"]


def test_relation_to_the_title_needs_no_mention_in_its_chunk(server: FakeOpenAI, extractor: LLMExtractor) -> None:
    server.contents = [
        EMPTY,
        answer(
            [entity("INC-7", "event"), entity("Payments Service")],
            [relation("INC-7", "affects", "payments service", "so payments failed for an hour")],
        ),
    ]
    ex = extractor.extract(DOC, CHUNKS)
    assert ex.warnings == ()
    assert set(edges_by_triple(ex)) == {("inc-7", "affects", "payments service")}
    assert {m.chunk for m in by_key(ex)["payments service"].mentions} == {0}


def test_ungrounded_entities_and_relations_are_dropped_with_warnings(
    server: FakeOpenAI, extractor: LLMExtractor
) -> None:
    server.contents = [
        answer(
            [entity("Payments Service"), entity("Ledger API", "api"), entity("Stripe"), entity("pay")],
            [
                relation("Payments Service", "depends_on", "Stripe", "The Payments Service depends on"),
                relation("Payments Service", "depends_on", "Ledger API", "Payments relies on the Ledger API"),
                relation("Ledger API", "related_to", "Ledger API", "the ledger api"),
                relation("Ledger API", "supports", "Payments Service", "the ledger api answers within 20 ms"),
            ],
        ),
        answer([entity("Kafka")]),
    ]
    ex = extractor.extract(DOC, CHUNKS)
    assert_grounded(DOC, CHUNKS, ex)
    assert set(by_key(ex)) == {"payments service", "ledger api"}  # "pay" is only part of a word
    supports = edges_by_triple(ex)[("ledger api", "supports", "payments service")]
    assert DOC.text[supports.evidence.start : supports.evidence.end] == "the ledger api\nanswers within 20 ms"
    assert ex.warnings == (
        "3 entities not found in their chunk were dropped",
        "2 relations not between two entities found in their chunk were dropped",
        "1 relation whose evidence is not a quote from its chunk was dropped",
    )


def test_entities_over_the_limit_are_dropped(server: FakeOpenAI) -> None:
    server.contents = [answer([entity("Payments Service"), entity("Ledger API"), entity("card charge")]), EMPTY]
    with ChatClient(server.base_url, None, "m") as client:
        ex = LLMExtractor(client, max_entities=2).extract(DOC, CHUNKS, title="")
    assert [c.key for c in ex.concepts] == ["payments service", "ledger api"]
    assert ex.warnings == ("1 entity over the per-chunk limit was dropped",)


def test_confidence_is_clamped_and_plural_phrases_key_like_extract_concepts(
    server: FakeOpenAI, extractor: LLMExtractor
) -> None:
    server.contents = [
        answer(
            [entity("Ledger API", "api"), entity("card charges", "concept")],
            [
                relation("Ledger API", "related_to", "card charge", "Ledger API for every card charge", 1.7),
                relation("Ledger API", "defines", "card charges", "Ledger API for every card", -0.2),
            ],
        ),
        EMPTY,
    ]
    text = PARAGRAPHS[0].replace("card charge", "card charges")
    doc = Document(text, "text")
    ex = extractor.extract(doc, chunks_of(text))
    assert ex.warnings == ()
    assert concept_key("card charges", fold_plural=True) == "card charge"
    edges = edges_by_triple(ex)
    # related_to is undirected, so it is stored in key order like the deterministic edges.
    assert edges[("card charge", "related_to", "ledger api")].confidence == 1.0
    assert edges[("ledger api", "defines", "card charge")].confidence == 0.0


def test_invalid_json_is_retried(server: FakeOpenAI, extractor: LLMExtractor) -> None:
    server.contents = ['{"entities": [', FIRST, SECOND]
    ex = extractor.extract(DOC, CHUNKS)
    assert len(ex.edges) == 3 and ex.warnings == ()
    assert (extractor.ledger.requests, extractor.ledger.retries) == (3, 1)


@pytest.mark.parametrize(
    ("failures", "contents", "problem"),
    [
        ((500, 500, 500), [SECOND], "HTTP 500"),
        ((), ["no json here", '{"entities": []}', '{"entities": [], "relations": [], "x": 1}', SECOND],
         "gave up after 3 attempts"),
    ],
)  # fmt: skip
def test_chunk_that_keeps_failing_is_skipped_with_a_warning(
    server: FakeOpenAI, extractor: LLMExtractor, failures: tuple[int, ...], contents: list[str], problem: str
) -> None:
    server.fail(*failures)
    server.contents = contents
    result = extractor.extract_detailed(DOC, CHUNKS)
    assert result.failed_chunks == 1
    (warning,) = result.extraction.warnings
    assert warning.startswith("chunk 0: llm extraction failed: ") and problem in warning
    assert set(edges_by_triple(result.extraction)) == {
        ("inc-7", "caused_by", "tls certificate"),
        ("tls certificate", "part_of", "ledger gateway"),
    }
    # The title concept does not depend on the model.
    assert "payments service" in by_key(result.extraction)
    assert len(server.requests) == 4


def test_token_ledger_counts_what_the_server_reported(server: FakeOpenAI, extractor: LLMExtractor) -> None:
    server.fail(429)
    result = extractor.extract_detailed(DOC, CHUNKS)
    assert result.failed_chunks == 0
    ledger = extractor.ledger
    assert ledger is extractor.client.ledger
    assert (ledger.requests, ledger.retries) == (3, 1)
    answered = len(server.requests) - 1  # the 429 carried no usage
    assert ledger.prompt_tokens == answered * USAGE["prompt_tokens"]
    assert ledger.completion_tokens == answered * USAGE["completion_tokens"]


def test_each_chunk_is_one_request_carrying_the_strict_schema(server: FakeOpenAI) -> None:
    with ChatClient(server.base_url, None, "test-chat") as client:
        LLMExtractor(client, max_chunk_chars=40).extract(DOC, CHUNKS)
    bodies = server.bodies(CHAT)
    assert len(bodies) == len(CHUNKS)
    for body, chunk in zip(bodies, CHUNKS, strict=True):
        assert body["model"] == "test-chat"
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "tortus_extraction", "schema": strict_schema(ExtractionAnswer), "strict": True},
        }
        system, user = body["messages"]
        assert system["role"] == "system" and "verbatim" in system["content"]
        assert user["role"] == "user" and f"Document title: {TITLE}" in user["content"]
        assert user["content"].endswith("\n" + chunk.text[:40])
        assert chunk.text[:41] not in user["content"]


def test_grounding_only_looks_at_the_text_the_model_saw(server: FakeOpenAI) -> None:
    server.contents = [answer([entity("Payments Service"), entity("card charge")]), EMPTY]
    with ChatClient(server.base_url, None, "m") as client:
        ex = LLMExtractor(client, max_chunk_chars=40).extract(DOC, CHUNKS, title="")
    assert [c.key for c in ex.concepts] == ["payments service"]
    assert ex.warnings == ("1 entity not found in its chunk was dropped",)


def test_no_chunks_means_no_requests(server: FakeOpenAI, extractor: LLMExtractor) -> None:
    assert extractor.extract(Document("", "text", title="T"), []) == Extraction()
    assert server.requests == []


def test_extraction_schema_is_strict_and_lists_the_allowed_kinds_and_types() -> None:
    schema = strict_schema(ExtractionAnswer)
    objects = [schema, *schema["$defs"].values()]
    assert len(objects) == 3
    for obj in objects:
        assert obj["additionalProperties"] is False and obj["required"] == list(obj["properties"])
    assert schema["$defs"]["Entity"]["properties"]["kind"]["enum"] == [
        "concept", "entity", "claim", "api", "decision", "event"
    ]  # fmt: skip
    assert set(schema["$defs"]["Relation"]["properties"]["type"]["enum"]) == {
        "supports", "contradicts", "depends_on", "caused_by", "implements", "related_to", "part_of",
        "defines", "same_as", "cites", "owned_by", "led_by", "affects", "supersedes",
    }  # fmt: skip
    ExtractionAnswer.model_validate_json(SECOND)
    with pytest.raises(ValidationError, match="kind"):
        ExtractionAnswer.model_validate({"entities": [entity("x", "chunk")], "relations": []})


def edge(src: str, dst: str, type_: str, confidence: float, rule: str) -> ExtractedEdge:
    return ExtractedEdge(src, dst, type_, confidence, rule, Mention(0, 0, 5))


def test_merged_unions_concepts_by_key_and_keeps_the_most_confident_edge() -> None:
    a = Extraction(
        concepts=(
            Concept("ledger api", "Ledger API", "api", (Mention(0, 10, 20), Mention(1, 50, 60))),
            Concept("payments", "Payments", "entity", (Mention(0, 0, 8),)),
        ),
        edges=(edge("payments", "ledger api", "depends_on", 0.85, "cue:depends on"),
               edge("ledger api", "payments", "related_to", 0.5, "cooccurrence")),
        warnings=("a",),
    )  # fmt: skip
    b = Extraction(
        concepts=(
            Concept("ledger api", "ledger api", "entity", (Mention(0, 2, 5), Mention(1, 50, 60))),
            Concept("kafka", "Kafka", "entity", (Mention(1, 70, 75),)),
        ),
        edges=(edge("payments", "ledger api", "depends_on", 0.9, "llm:m"),
               edge("ledger api", "payments", "related_to", 0.4, "llm:m"),
               edge("kafka", "ledger api", "part_of", 0.7, "llm:m")),
        warnings=("b", "a"),
    )  # fmt: skip
    ex = merged(a, b)
    assert ex.concepts == (
        Concept("ledger api", "Ledger API", "api", (Mention(0, 2, 5), Mention(0, 10, 20), Mention(1, 50, 60))),
        Concept("payments", "Payments", "entity", (Mention(0, 0, 8),)),
        Concept("kafka", "Kafka", "entity", (Mention(1, 70, 75),)),
    )
    assert [(e.src, e.type, e.dst, e.confidence, e.rule) for e in ex.edges] == [
        ("payments", "depends_on", "ledger api", 0.9, "llm:m"),
        ("ledger api", "related_to", "payments", 0.5, "cooccurrence"),
        ("kafka", "part_of", "ledger api", 0.7, "llm:m"),
    ]
    assert ex.warnings == ("a", "b")
    assert merged(ex, ex) == ex
    assert merged(Extraction(), a) == merged(a, Extraction()) == a


def test_merged_deterministic_and_llm_extractions_share_keys(extractor: LLMExtractor) -> None:
    deterministic = extract_concepts(DOC, CHUNKS)
    llm = extractor.extract(DOC, CHUNKS)
    both = merged(deterministic, llm)
    assert_grounded(DOC, CHUNKS, both)
    keys = by_key(both)
    assert set(keys) == set(by_key(deterministic)) | set(by_key(llm))
    # Both extractors found these names; they merge into one concept each.
    for shared in ("payments service", "ledger api", "inc-7"):
        assert shared in by_key(deterministic) and shared in by_key(llm)
        mentions = set(keys[shared].mentions)
        assert mentions == set(by_key(deterministic)[shared].mentions) | set(by_key(llm)[shared].mentions)
    assert edges_by_triple(llm).keys() <= edges_by_triple(both).keys()


def test_each_llm_call_is_reported_as_progress(extractor: LLMExtractor) -> None:
    seen: list[tuple[str, int, int]] = []
    with progress.listening(lambda step, done, total: seen.append((step, done, total))):
        extractor.extract(DOC, CHUNKS)
    assert [(done, total) for _, done, total in seen] == [(i, len(CHUNKS)) for i in range(len(CHUNKS) + 1)]
    assert {step for step, _, _ in seen} == {"extracting with the LLM"}
