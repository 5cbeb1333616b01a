"""Deterministic extraction: concept kinds, exact mentions, keys and typed edges."""

from __future__ import annotations

from importlib.resources import files

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.extract import MAX_COOCCURRING, concept_key, extract_concepts
from tortus_pg.ingest.types import Chunk, Concept, Document, ExtractedEdge, Extraction

NODE_KINDS = {"concept", "entity", "claim", "chunk", "section", "api", "decision", "event"}
EDGE_TYPES = {
    "supports", "contradicts", "depends_on", "caused_by", "implements", "related_to",
    "mentions", "part_of", "next", "defines", "same_as", "cites", "owned_by", "led_by", "affects",
    "supersedes",
}  # fmt: skip

ENGINEERING = (
    "The Payments Service depends on the Ledger API. Incident INC-2024-017 was caused by a "
    "TLS certificate expiry. Clause 7.3.2 requires that card data is encrypted with TLS 1.3, "
    "as decided in ADR-012. The `ledger-api` exposes POST /v1/payments and returns E-1042 "
    "when the ledger_writer queue is full; see section 4.1 of the PCI DSS."
)
LOVELACE = (
    "Ada Lovelace was an English mathematician and writer, chiefly known for her work on "
    "Charles Babbage's proposed mechanical general-purpose computer. She worked with Charles "
    "Babbage on the Analytical Engine. She was the daughter of Lord Byron."
)


def extract(text: str, kind: str = "text", title: str | None = None) -> Extraction:
    doc = Document(text, kind, title=title)
    return extract_concepts(doc, chunk_document(doc))


def by_key(ex: Extraction) -> dict[str, Concept]:
    return {c.key: c for c in ex.concepts}


def typed(ex: Extraction) -> set[tuple[str, str, str]]:
    return {(e.src, e.type, e.dst) for e in ex.edges if e.type != "related_to"}


def assert_well_formed(doc: Document, ex: Extraction, chunk_list: list[Chunk]) -> None:
    chunks = {c.index: c for c in chunk_list}
    keys = [c.key for c in ex.concepts]
    assert len(keys) == len(set(keys))
    for concept in ex.concepts:
        assert concept.key and concept.kind in NODE_KINDS and concept.mentions
        for m in concept.mentions:
            chunk = chunks[m.chunk]
            assert chunk.start <= m.start < m.end <= chunk.end
            assert doc.text[m.start : m.end].strip()
    seen: set[tuple[str, str, str]] = set()
    for edge in ex.edges:
        assert edge.type in EDGE_TYPES and edge.src != edge.dst
        assert edge.src in keys and edge.dst in keys
        assert (edge.src, edge.dst, edge.type) not in seen
        seen.add((edge.src, edge.dst, edge.type))
        assert 0 < edge.confidence <= 1 and edge.rule
        chunk = chunks[edge.evidence.chunk]
        assert chunk.start <= edge.evidence.start < edge.evidence.end <= chunk.end


def test_engineering_paragraph_yields_typed_concepts() -> None:
    ex = extract(ENGINEERING, "markdown")
    kinds = {c.key: c.kind for c in ex.concepts}
    assert kinds["payments service"] == "entity"
    assert kinds["ledger api"] == "entity"
    assert kinds["inc-2024-017"] == "event"
    assert kinds["adr-012"] == "decision"
    assert kinds["tls"] == "entity"
    assert kinds["tls 1.3"] == "entity"
    assert kinds["clause 7.3.2"] == "entity"
    assert kinds["section 4.1"] == "entity"
    assert kinds["e-1042"] == "entity"
    assert kinds["pci dss"] == "entity"
    assert kinds["ledger-api"] == "api"
    assert kinds["post /v1/payments"] == "api"
    assert kinds["ledger_writer"] == "api"
    assert kinds["tls certificate expiry"] == "concept"
    assert "the" not in kinds and "incident" not in {k for k, v in kinds.items() if v != "concept"}


def test_engineering_paragraph_yields_cue_edges() -> None:
    edges = typed(extract(ENGINEERING, "markdown"))
    assert ("payments service", "depends_on", "ledger api") in edges
    assert ("inc-2024-017", "caused_by", "tls certificate expiry") in edges
    assert ("clause 7.3.2", "depends_on", "card data") in edges


def test_mentions_are_exact_spans() -> None:
    doc = Document(ENGINEERING + "\n\nThe Ledger API is fast. Ledger API again.", "markdown")
    chunks = chunk_document(doc)
    ex = extract_concepts(doc, chunks)
    assert_well_formed(doc, ex, chunks)
    ledger = by_key(ex)["ledger api"]
    assert [doc.text[m.start : m.end] for m in ledger.mentions] == ["Ledger API"] * 3
    assert [doc.text[m.start : m.end] for m in by_key(ex)["inc-2024-017"].mentions] == [
        "INC-2024-017"
    ]


def test_wikipedia_passage_links_people_things_and_the_title() -> None:
    ex = extract(LOVELACE, title="Ada Lovelace")
    concepts = by_key(ex)
    assert concepts["charles babbage"].kind == "entity"
    assert len(concepts["charles babbage"].mentions) == 2
    assert concepts["analytical engine"].kind == "entity"
    assert concepts["lord byron"].kind == "entity"
    title = ex.concepts[0]
    assert (title.key, title.kind, title.label) == ("ada lovelace", "entity", "Ada Lovelace")
    assert title.mentions[0].chunk == 0
    assert LOVELACE[title.mentions[0].start : title.mentions[0].end] == "Ada Lovelace"
    assert {"she", "english mathematician"}.isdisjoint(concepts)


def test_mention_in_one_passage_shares_a_key_with_the_passage_about_it() -> None:
    about = extract("The Analytical Engine was a proposed computer.", title="Analytical Engine")
    mention = extract(LOVELACE, title="Ada Lovelace")
    assert about.concepts[0].key in by_key(mention)
    ledger_doc = extract("The Ledger API records postings.", title="the Ledger API")
    service_doc = extract("The Payments Service calls Ledger API.", title="Payments Service")
    assert ledger_doc.concepts[0].key == "ledger api"
    assert ("payments service", "depends_on", "ledger api") in typed(service_doc)


def test_title_with_disambiguator_matches_the_bare_name() -> None:
    ex = extract(
        "Terence D. Robinson (date of birth unknown) was a male wrestler who competed for England.",
        title="Terence Robinson (wrestler)",
    )
    title = ex.concepts[0]
    assert title.key == "terence robinson"
    assert [ex.concepts[0].mentions[0].start, ex.concepts[0].mentions[0].end] == [0, 19]
    assert "england" in by_key(ex)


def test_title_absent_from_text_is_mentioned_by_the_first_chunk() -> None:
    doc = Document("He was a bishop in the tenth century.\n\nMore text.", "text", title="Theodred")
    chunks = chunk_document(doc)
    ex = extract_concepts(doc, chunks)
    title = ex.concepts[0]
    assert title.key == "theodred"
    assert (title.mentions[0].start, title.mentions[0].end) == (chunks[0].start, chunks[0].end)


def test_title_keeps_its_identifier_kind() -> None:
    ex = extract("ADR-012 chooses PostgreSQL for the ledger.", title="ADR-012")
    assert (ex.concepts[0].key, ex.concepts[0].kind) == ("adr-012", "decision")
    assert len(ex.concepts[0].mentions) == 1


def test_the_title_is_defined_by_the_first_chunk() -> None:
    ex = extract(LOVELACE, title="Ada Lovelace")
    assert ex.defines == ((0, "ada lovelace"),)
    assert extract("plain words only here", title=None).defines == ()


def test_a_clause_is_defined_by_the_chunk_headed_by_its_number() -> None:
    text = (files("tortus_pg") / "demo" / "pdf-src" / "information-security-policy.txt").read_text()
    doc = Document(text, "pdf", title="Information Security Policy")
    chunks = chunk_document(doc)
    ex = extract_concepts(doc, chunks)
    defined = {key: chunks[c] for c, key in ex.defines}
    assert defined["clause 7.3.2"].text.startswith("7.3.2 Signing keys")
    assert defined["clause 7.2.3"].text.startswith("7.2.3 Signing keys must be non-exportable")
    assert defined["information security policy"].index == chunks[0].index
    # A cited clause keeps its mentions (the version history cites 7.3.2); an uncited one
    # exists without any.
    assert by_key(ex)["clause 7.3.2"].mentions and by_key(ex)["clause 7.2.3"].mentions == ()


def test_no_title_means_no_title_concept() -> None:
    assert {c.kind for c in extract("plain words only here", title=None).concepts} == {"concept"}
    assert extract_concepts(Document("", "text", title="X"), []) == Extraction()


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        (
            "The Billing Service depends on the Ledger API.",
            ("billing service", "depends_on", "ledger api"),
        ),
        (
            "The Billing Service relies on the Ledger API.",
            ("billing service", "depends_on", "ledger api"),
        ),
        (
            "The Billing Service requires the Ledger API.",
            ("billing service", "depends_on", "ledger api"),
        ),
        (
            "The Billing Service calls the Ledger API.",
            ("billing service", "depends_on", "ledger api"),
        ),
        (
            "The Ledger API is required by the Billing Service.",
            ("billing service", "depends_on", "ledger api"),
        ),
        (
            "INC-2024-017 was caused by the DNS Resolver.",
            ("inc-2024-017", "caused_by", "dns resolver"),
        ),
        ("The DNS Resolver caused INC-2024-017.", ("inc-2024-017", "caused_by", "dns resolver")),
        (
            "INC-2024-017 happened because of the DNS Resolver.",
            ("inc-2024-017", "caused_by", "dns resolver"),
        ),
        (
            "INC-2024-017 happened due to the DNS Resolver.",
            ("inc-2024-017", "caused_by", "dns resolver"),
        ),
        (
            "Due to the DNS Resolver, INC-2024-017 happened.",
            ("inc-2024-017", "caused_by", "dns resolver"),
        ),
        ("The Payment Gateway implements ADR-012.", ("payment gateway", "implements", "adr-012")),
        ("The Audit Report supports ADR-012.", ("audit report", "supports", "adr-012")),
        ("The Audit Report confirms ADR-012.", ("audit report", "supports", "adr-012")),
        ("ADR-014 contradicts ADR-012.", ("adr-014", "contradicts", "adr-012")),
        ("ADR-014 conflicts with ADR-012.", ("adr-014", "contradicts", "adr-012")),
        (
            "Contrary to ADR-012, the Ledger Service retries writes.",
            ("ledger service", "contradicts", "adr-012"),
        ),
        ("The Ledger API is owned by Team Atlas.", ("ledger api", "owned_by", "team atlas")),
        ("Team Atlas owns the Ledger API.", ("ledger api", "owned_by", "team atlas")),
        (
            "INC-2024-017 affects the Checkout Service.",
            ("inc-2024-017", "affects", "checkout service"),
        ),
        (
            "INC-2024-017 impacted the Checkout Service.",
            ("inc-2024-017", "affects", "checkout service"),
        ),
        (
            "The Checkout Service was affected by INC-2024-017.",
            ("inc-2024-017", "affects", "checkout service"),
        ),
        ("ADR-014 supersedes ADR-012.", ("adr-014", "supersedes", "adr-012")),
        ("ADR-014 replaces ADR-012.", ("adr-014", "supersedes", "adr-012")),
        ("ADR-012 was superseded by ADR-014.", ("adr-014", "supersedes", "adr-012")),
        (
            "The Ledger API is part of the Payments Platform.",
            ("ledger api", "part_of", "payments platform"),
        ),
    ],
)
def test_cue_phrase_gives_typed_edge_in_the_right_direction(
    sentence: str, expected: tuple[str, str, str]
) -> None:
    ex = extract(sentence)
    assert typed(ex) == {expected}
    edge = next(e for e in ex.edges if e.type == expected[1])
    assert edge.rule.startswith("cue:") and edge.confidence >= 0.6
    assert sentence[edge.evidence.start : edge.evidence.end] == sentence
    # The pair is linked by the typed edge only, not also by co-occurrence.
    assert not [
        e
        for e in ex.edges
        if {e.src, e.dst} == {expected[0], expected[2]} and e.type == "related_to"
    ]


def test_negated_cue_gives_no_typed_edge() -> None:
    ex = extract("The Billing Service does not depend on the Ledger API.")
    assert typed(ex) == set()
    assert [(e.src, e.dst, e.type) for e in ex.edges] == [
        ("billing service", "ledger api", "related_to")
    ]


def test_cooccurrence_is_capped_per_sentence() -> None:
    names = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India"]
    sentence = "The meeting included " + ", ".join(f"{n} Team" for n in names) + "."
    ex = extract(sentence)
    related = [e for e in ex.edges if e.type == "related_to"]
    involved = {e.src for e in related} | {e.dst for e in related}
    assert len(involved) == MAX_COOCCURRING
    assert len(related) == MAX_COOCCURRING * (MAX_COOCCURRING - 1) // 2
    assert all(e.rule == "cooccurrence" and 0.3 <= e.confidence <= 0.5 for e in related)
    assert all(e.src < e.dst for e in related)


def test_repeated_edges_are_deduplicated_keeping_the_highest_confidence() -> None:
    text = (
        "The Billing Service calls the Ledger API. The Billing Service depends on the "
        "Ledger API. The Billing Service depends on the Ledger API."
    )
    edges = [e for e in extract(text).edges if e.type == "depends_on"]
    assert len(edges) == 1
    assert edges[0].confidence == 0.85 and edges[0].rule == "cue:depends on"


def test_no_self_edges() -> None:
    ex = extract("The Ledger API depends on the Ledger API. Ledger API calls Ledger API.")
    assert all(e.src != e.dst for e in ex.edges)


def test_code_fences_only_yield_identifiers() -> None:
    text = "```python\nLedger Client = make_client()\n# Depends On Nothing\n```\n"
    ex = extract(text, "markdown")
    assert {c.key: c.kind for c in ex.concepts} == {"make_client()": "api"}
    assert ex.edges == ()


def test_key_phrases_are_sparse_and_fold_plurals() -> None:
    text = (
        "Expired certificates caused outages. The certificate rotation job renews "
        "certificates. Each certificate has an owner and a rotation window."
    )
    ex = extract(text)
    phrases = [c for c in ex.concepts if c.kind == "concept"]
    assert 1 <= len(phrases) <= 3
    assert all(concept_key(c.label, fold_plural=True) == c.key for c in phrases)


def test_names_and_plain_labels_round_trip_through_concept_key() -> None:
    for concept in extract(ENGINEERING + " " + LOVELACE, "markdown", title="Ada Lovelace").concepts:
        fold = concept.kind == "concept"
        assert concept_key(concept.label, fold_plural=fold) == concept.key


@pytest.mark.parametrize(
    ("label", "key"),
    [
        ("the Ledger API", "ledger api"),
        ("Ledger API", "ledger api"),
        ("  The  Ledger\tAPI. ", "ledger api"),
        ("Ｌｅｄｇｅｒ API", "ledger api"),
        ("Lil Jon's", "lil jon"),
        ("Person - centered therapy", "person-centered therapy"),
        ("Person\u2013centered therapy", "person-centered therapy"),
        ("A. T. Ummer", "a.t. ummer"),
        ("`ledger-api`", "ledger-api"),
        ("make_client()", "make_client()"),
        ("C#", "c#"),
        ("(Lehman Brothers)", "lehman brothers"),
        ("Theodred II (Bishop of Elmham)", "theodred ii (bishop of elmham)"),
        ("A", "a"),
    ],
)
def test_concept_key_normalizes(label: str, key: str) -> None:
    assert concept_key(label) == key


def test_plural_folding_is_only_for_key_phrases() -> None:
    assert concept_key("TLS certificates", fold_plural=True) == "tls certificate"
    assert concept_key("policies", fold_plural=True) == "policy"
    assert concept_key("processes", fold_plural=True) == "process"
    assert concept_key("caches", fold_plural=True) == "cache"
    assert concept_key("analysis", fold_plural=True) == "analysis"
    assert concept_key("Lehman Brothers") == "lehman brothers"


@settings(max_examples=500, deadline=None)
@given(label=st.text(), fold=st.booleans())
def test_concept_key_is_idempotent(label: str, fold: bool) -> None:
    key = concept_key(label, fold_plural=fold)
    assert concept_key(key, fold_plural=fold) == key


_PIECES = st.sampled_from(
    [
        "The", "Ledger", "API", "depends", "on", "of", "and", "Bank", "England", "INC-2024-017",
        "ADR-7", "`x-y`", "v4.2", "caused", "by", "because", "section", "4.1", "snake_case",
        "CamelCaseThing", "/v1/items", "https://example.com/a", "'s", "A.", "T.", "certificates",
        "expiry", ".", ",", "(", ")", '"', "\n", "\n\n", "# Head", "```", "-", "é", "Ünïcode",
    ]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(_PIECES, max_size=60),
    seps=st.lists(st.sampled_from([" ", "", "  ", "\n"]), max_size=60),
    kind=st.sampled_from(["markdown", "text"]),
    title=st.one_of(st.none(), st.sampled_from(["Ledger API", "Bank of England (bank)", "ADR-7"])),
)
def test_extraction_is_well_formed_on_any_text(
    words: list[str], seps: list[str], kind: str, title: str | None
) -> None:
    text = "".join(w + (seps[i] if i < len(seps) else " ") for i, w in enumerate(words))
    doc = Document(text, kind, title=title)
    chunks = chunk_document(doc, max_chars=120, target_chars=80)
    ex = extract_concepts(doc, chunks)
    assert_well_formed(doc, ex, chunks)
    assert ex == extract_concepts(doc, chunks), "extraction is deterministic"


def test_edge_evidence_points_at_the_sentence() -> None:
    text = "Intro sentence here. The Billing Service depends on the Ledger API. Outro."
    edge: ExtractedEdge = next(e for e in extract(text).edges if e.type == "depends_on")
    assert text[edge.evidence.start : edge.evidence.end] == (
        "The Billing Service depends on the Ledger API."
    )
