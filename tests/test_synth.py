"""Grounded synthesis against the demo corpus's statistics: extractive quotes, LLM claims
checked against the evidence they cite (served by a local OpenAI-compatible server), refusals."""

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from openai_server import openai_server

from tortus_pg.db import tenant_scope
from tortus_pg.evidence import Evidence
from tortus_pg.llm import ChatClient
from tortus_pg.synth import LLMSynthesizer, Terms, _unasked, lexemes, question_terms, synthesize

CLAUSE = "7.3.2 Signing keys used to issue authentication tokens must be rotated at least every 90 days."
OWNER = "Key Vault is owned by the Platform Team. The Security Governance Office sets the rules."


EVIDENCE = [
    Evidence(1, "Information Security Policy > clause 7.3.2", "security/policy.pdf", 100, 100 + len(CLAUSE), 2,
             CLAUSE, 0.0, "seed"),
    Evidence(2, "Key Vault > Ownership", "security/key-vault.md", 40, 40 + len(OWNER), None, OWNER, 0.0, "walk"),
]


@pytest.fixture
def db(demo: tuple[Path, dict[str, str]]) -> Iterator[psycopg.Connection]:
    with psycopg.connect(demo[1]["TORTUS_DATABASE_URL"]) as conn, tenant_scope(conn, "default"):
        yield conn


def llm_answer(*claims: tuple[str, list[int]], answerable: bool = True) -> str:
    return json.dumps({"answerable": answerable, "claims": [{"text": t, "citations": c} for t, c in claims]})


def test_extractive_quotes_the_sentence_and_cites_its_exact_span(db: psycopg.Connection) -> None:
    out = synthesize(db, "How often must signing keys be rotated?", EVIDENCE)
    assert not out.withheld and out.claims
    claim = out.claims[0]
    assert claim["uri"] == "security/policy.pdf" and claim["page"] == 2 and "90 days" in claim["text"]
    start, end = claim["span"]
    assert CLAUSE[start - 100 : end - 100] == claim["text"]
    assert out.answer is not None and out.answer.endswith("[1]")


def test_a_missing_identifier_or_named_thing_withholds(db: psycopg.Connection) -> None:
    missing_id = synthesize(db, "What does clause 7.3.5 require?", EVIDENCE)
    assert missing_id.withheld and missing_id.warnings == ["answer withheld: no evidence mentions 7.3.5"]
    spelled = synthesize(db, "What was the root cause of INC-2025-030?", EVIDENCE)
    assert spelled.warnings == ["answer withheld: no evidence mentions INC-2025-030"]
    unnamed = synthesize(db, "Who owns the Ledger Service?", EVIDENCE[1:], names=["Ledger Service"])
    assert unnamed.withheld and "Ledger Service" in unnamed.warnings[0]


TABLE = "| Code | Meaning | Retry |\n|---|---|---|\n| E-2107 | Ledger write timed out | Yes, same key |"
STORE = ("Feature Store computes and serves the features that models use. "
         "Feature Store is owned by the Data Platform Team.")


def test_table_rows_are_quoted_but_not_their_header(db: psycopg.Connection) -> None:
    table = [Evidence(3, "Error codes > Ledger errors", "payments/error-codes.html", 0, len(TABLE), None, TABLE,
                      0.0, "seed")]
    out = synthesize(db, "What does the code E-2107 mean, and may it be retried?", table)
    assert [c["text"] for c in out.claims] == ["| E-2107 | Ledger write timed out | Yes, same key |"]


def test_a_sentence_matching_only_its_heading_is_not_quoted(db: psycopg.Connection) -> None:
    row = "| E-3301 | Risk score unavailable | Yes |"
    said = "Merchants received E-1042 responses from Checkout Gateway."
    evidence = [Evidence(5, "Error codes > Risk errors", "payments/error-codes.html", 0, len(row), None, row, 0.0,
                         "seed"),
                Evidence(6, "INC-2025-014 > Impact", "incidents/inc-2025-014.md", 0, len(said), None, said, 0.0,
                         "seed")]
    out = synthesize(db, "Which error did merchants receive?", evidence, [[0, 1]])
    assert [c["text"] for c in out.claims] == [said]


def test_evidence_about_the_subject_but_not_the_question_withholds(db: psycopg.Connection) -> None:
    store = [Evidence(4, "Feature Store", "data/feature-store.md", 0, len(STORE), None, STORE, 0.0, "seed")]
    cost = synthesize(db, "What does the Feature Store cost?", store, names=["Feature Store"])
    assert cost.withheld and "not what it asks" in cost.warnings[0] and "cost" in cost.warnings[0]
    owner = synthesize(db, "Which team owns the Feature Store?", store, names=["Feature Store"])
    assert not owner.withheld and owner.answer is not None and "Data Platform Team" in owner.answer


def test_claims_must_mention_what_the_question_names() -> None:
    terms = Terms({"p99": 4.6, "latenc": 2.3, "target": 4.6, "ledger": 1.3, "servic": 0.9}, frozenset(),
                  {"Ledger Service": frozenset({"ledger", "servic"})})
    other_service = _unasked(terms, {"p99", "latenc", "target", "gateway"})
    assert other_service == "the sentences that match the question do not mention Ledger Service"
    assert _unasked(terms, {"p99", "latenc", "target", "ledger", "servic"}) is None


def seed(node_id: int, label: str, uri: str, text: str) -> Evidence:
    """A search hit quoting `text` whole, from offset 0 of `uri`."""
    return Evidence(node_id, label, uri, 0, len(text), None, text, 0.0, "seed")


INCIDENT = "incidents/inc-2025-014.md"
MERCHANTS = "What does the error code that merchants received during INC-2025-014 mean?"
SUMMARY = "Merchants received E-1042 responses during INC-2025-014."


def test_claims_must_mention_the_identifiers_the_question_names(db: psycopg.Connection) -> None:
    # The chain names INC-2025-014 (in a heading), but the sentence matching the question
    # best is a table row about another code: no answer about that incident.
    row = "| E-1090 | Merchant account suspended | No | Compliance or risk hold on the merchant. |"
    evidence = [seed(9, "Error codes > Account errors", "payments/error-codes.html", row),
                seed(10, "INC-2025-014 > Overview", INCIDENT, "The outage lasted 47 minutes on a Tuesday morning.")]
    out = synthesize(db, MERCHANTS, evidence, [[0, 1]])
    assert out.withheld and out.warnings == [
        "answer withheld: the sentences that match the question do not mention INC-2025-014"]
    evidence.append(seed(11, "INC-2025-014 > Summary", INCIDENT, SUMMARY))
    answered = synthesize(db, MERCHANTS, evidence, [[0, 1, 2]])
    assert not answered.withheld and SUMMARY in [c["text"] for c in answered.claims]


def test_the_sentence_about_an_identifier_a_claim_resolves_to_follows_it(db: psycopg.Connection) -> None:
    # "The error code that merchants received" is E-1042 by the first claim; E-1042's row shares
    # no word with the question, yet it is what the question asks, and it beats a row that only
    # matches "merchant".
    rows = ("| Code | Meaning | Retry |\n|---|---|---|\n| E-1090 | Merchant account suspended | No |\n"
            "| E-1042 | Upstream TLS handshake failed | Yes |")
    table = seed(12, "Error codes > Transport errors", "payments/error-codes.html", rows)
    evidence = [seed(11, "INC-2025-014 > Summary", INCIDENT, SUMMARY), table]
    out = synthesize(db, MERCHANTS, evidence, [[0, 1]])
    assert not out.withheld
    assert [c["text"] for c in out.claims] == [SUMMARY, "| E-1042 | Upstream TLS handshake failed | Yes |"]
    # Only a sentence of another chunk of the same chain resolves it.
    assert "E-1042 | Upstream" not in (synthesize(db, MERCHANTS, evidence, [[0], [1]]).answer or "")
    # A claim naming no identifier beyond the question's resolves nothing.
    plain = [seed(11, "INC-2025-014 > Summary", INCIDENT, "Merchants received errors during INC-2025-014."), table]
    assert "E-1042 | Upstream" not in (synthesize(db, MERCHANTS, plain, [[0, 1]]).answer or "")


def test_claims_naming_another_title_of_the_same_shape_withhold(db: psycopg.Connection) -> None:
    # No document says "executive": "Chief Information Security Officer" is another chief officer.
    lines = ("Larkfield Pay Information Security Policy, version 3.1.\n\n"
             "Approved by the Chief Information Security Officer.")
    evidence = [seed(20, "Information Security Policy", "security/policy.pdf", lines)]
    out = synthesize(db, "Who is the chief executive officer of Larkfield Pay?", evidence)
    assert out.withheld and out.warnings == [
        "answer withheld: the evidence names another chief … officer than the chief executive officer asked about"]
    # The title asked about is the one the evidence names: the rule has nothing to say.
    asked = synthesize(db, "Who approved the policy as chief information security officer of Larkfield Pay?", evidence)
    assert not any("names another" in w for w in asked.warnings)


def test_what_a_named_thing_implements_answers_for_it_with_the_sentence_saying_so(db: psycopg.Connection) -> None:
    token = ("Token Service relies on Key Vault for its signing keys. "
             "Token Service implements clause 7.3.2 of the Information Security Policy.")
    evidence = [EVIDENCE[0], Evidence(3, "Token Service > Signing keys", "security/token-service.md", 0, len(token),
                                      None, token, 0.0, "seed")]
    question = "How often must the Token Service rotate its signing keys?"
    plain = question_terms(db, question, names=["Token Service"])
    withheld = synthesize(db, question, evidence, terms=plain)
    assert withheld.withheld and "do not mention Token Service" in withheld.warnings[0]
    inheriting = question_terms(db, question, names=["Token Service"], inherits={"Token Service": ["clause 7.3.2"]})
    out = synthesize(db, question, evidence, terms=inheriting)
    assert not out.withheld and [c["text"] for c in out.claims] == [
        CLAUSE, "Token Service implements clause 7.3.2 of the Information Security Policy."]
    # What the thing implements must be what the claims quote: another clause links nothing.
    other = question_terms(db, question, names=["Token Service"], inherits={"Token Service": ["clause 7.2.3"]})
    assert synthesize(db, question, evidence, terms=other).withheld


CLASSES = ("2. Retention classes\n2.1 Class F - financial records. Ledger entries, payment records and bank\n"
           "statements. Retained for 10 years after the end of the financial year.\n"
           "2.2 Class T - product telemetry. Retained for 180 days.")
TOPICS = "Payments topics keep messages for 7 days, so a consumer can recover from a long outage."
ROW = "| Ledger Service | nightly export of committed journal entries | `finance.ledger_entries` |"


def test_a_clause_value_after_its_subject_answers_and_no_second_value_joins(db: psycopg.Connection) -> None:
    evidence = [seed(30, "Data Retention Standard > 2. Retention classes", "data/retention.pdf", CLASSES),
                seed(31, "Event Bus > Main topics and retention", "platform/event-bus.html", TOPICS)]
    out = synthesize(db, "How long are ledger entries kept?", evidence)
    assert [c["text"] for c in out.claims] == [
        "Ledger entries, payment records and bank statements.",
        "Retained for 10 years after the end of the financial year."]
    # The value must follow in the same paragraph: after a blank line it belongs to no claim.
    apart = CLASSES.replace("bank\nstatements. ", "bank statements.\n\n")
    split = synthesize(db, "How long are ledger entries kept?",
                       [seed(30, evidence[0].label, "data/retention.pdf", apart), evidence[1]])
    assert split.claims and not any("10 years" in c["text"] for c in split.claims)
    # Only a measure follows its subject so: a narrative's next sentence with "every year" is no
    # answer to "When …".
    story = "Vogue China is published by Condé Nast. It has made a profit every year since it debuted."
    when = synthesize(db, "When was the company that published Vogue China founded?",
                      [seed(33, "Vogue China", "wiki/vogue-china", story)])
    assert when.claims or when.draft
    assert not any("every year" in c["text"] for c in when.claims + when.draft)


def test_a_standard_that_never_names_the_thing_speaks_for_what_implements_it(db: psycopg.Connection) -> None:
    evidence = [seed(32, "Analytics Warehouse > What flows in", "data/warehouse.md", ROW),
                seed(30, "Data Retention Standard > 2. Retention classes", "data/retention.pdf", CLASSES)]
    question = "How long does the Analytics Warehouse keep its ledger entry tables?"
    inheriting = question_terms(db, question, names=["Analytics Warehouse"],
                                inherits={"Analytics Warehouse": ["Data Retention Standard"]})
    out = synthesize(db, question, evidence, terms=inheriting)
    assert "Retained for 10 years after the end of the financial year." in [c["text"] for c in out.claims]
    # No claim names the warehouse: the engine is told, to quote the edge saying it applies.
    assert out.inherited == [("Analytics Warehouse", "Data Retention Standard")]
    # Of two standards it implements, only the one quoted is named.
    both = question_terms(db, question, names=["Analytics Warehouse"], inherits={
        "Analytics Warehouse": ["Information Security Policy", "Data Retention Standard"]})
    assert synthesize(db, question, evidence, terms=both).inherited == [("Analytics Warehouse",
                                                                         "Data Retention Standard")]
    plain = synthesize(db, question, evidence, terms=question_terms(db, question, names=["Analytics Warehouse"]))
    assert "10 years" not in (plain.answer or "") and plain.inherited == []


def test_a_passage_title_repeated_as_its_first_line_is_not_quoted(db: psycopg.Connection) -> None:
    title = "Key Vault (Platform Team service)"
    text = f"{title}\n\nKey Vault stores the signing keys and certificates of the Platform Team."
    passage = [Evidence(8, title, "platform/key-vault.md", 0, len(text), None, text, 0.0, "seed")]
    out = synthesize(db, "Which team's service is Key Vault?", passage)
    assert [c["text"] for c in out.claims] == [text.split("\n\n")[1]]


MOVED = "ADR-011 moved Postgres Cluster A to hosts with local NVMe drives. The move finished on 12 May 2025."


def test_a_question_asking_for_a_time_gets_the_sentence_giving_one(db: psycopg.Connection) -> None:
    moved = [Evidence(7, "ADR-011 > Decision", "platform/adr-011.md", 0, len(MOVED), None, MOVED, 0.0, "seed")]
    out = synthesize(db, "When did ADR-011 move Postgres Cluster A to NVMe drives?", moved)
    # The first sentence covers every word of the question; the second adds only the date.
    assert [c["text"] for c in out.claims] == [MOVED.split(". ")[0] + ".", "The move finished on 12 May 2025."]
    what = synthesize(db, "Where did ADR-011 move Postgres Cluster A?", moved)
    assert [c["text"] for c in what.claims] == [MOVED.split(". ")[0] + "."]


def test_a_question_asking_for_a_time_is_withheld_when_no_sentence_gives_one(db: psycopg.Connection) -> None:
    first = MOVED.split(". ")[0] + "."
    undated = [Evidence(7, "ADR-011 > Decision", "platform/adr-011.md", 0, len(first), None, first, 0.0, "seed")]
    out = synthesize(db, "When did ADR-011 move Postgres Cluster A to NVMe drives?", undated)
    assert out.withheld and out.answer is None
    assert out.warnings == ["answer withheld: the question asks for a time and no sentence that matches it gives one"]
    assert [c["text"] for c in out.draft] == [first]  # kept, so a bridge it names may still be followed


def test_lexemes_are_remembered_per_configuration(db: psycopg.Connection) -> None:
    texts = ["Keys are rotated every 90 days.", "Keys are rotated every 90 days.", "Running retries"]
    fresh = [set(r[0]) for r in db.execute(
        "select array(select lexeme from unnest(to_tsvector('english', t))) from unnest(%s::text[]) t", [texts])]
    assert lexemes(db, texts) == fresh == lexemes(db, texts)
    assert lexemes(db, ["Running retries"], "simple") == [{"running", "retries"}]


def test_llm_claims_are_checked_against_the_evidence_they_cite(db: psycopg.Connection) -> None:
    reply = llm_answer(
        ("Key Vault is owned by the Platform Team.", [2]),
        ("Key Vault is owned by the Platform Team.", [1]),  # cites the wrong evidence
    )
    with openai_server(contents=[reply]) as server, ChatClient(server.base_url, None, "chat", backoff_s=0) as chat:
        out = synthesize(db, "Which team owns Key Vault?", EVIDENCE, synthesizer=LLMSynthesizer(chat))
        prompt = server.bodies("/v1/chat/completions")[0]["messages"][1]["content"]
    assert "[1] " + CLAUSE in prompt and "[2] " + OWNER in prompt
    assert [c["support"] for c in out.claims] == ["supported", "unsupported"]
    assert out.claims[0]["uri"] == "security/key-vault.md" and not out.withheld
    assert out.warnings == ["claim 2 is not supported by the evidence it cites"]
    assert 0 < out.confidence < out.coverage


def test_llm_without_a_supported_claim_or_saying_unanswerable_withholds(db: psycopg.Connection) -> None:
    unsupported = llm_answer(("The vault is run by the Treasury Team.", [2]))
    unanswerable = llm_answer(answerable=False)
    with openai_server(contents=[unsupported, unanswerable]) as server, \
            ChatClient(server.base_url, None, "chat", backoff_s=0) as chat:
        first = synthesize(db, "Which team owns Key Vault?", EVIDENCE, synthesizer=LLMSynthesizer(chat))
        second = synthesize(db, "Which team owns Key Vault?", EVIDENCE, synthesizer=LLMSynthesizer(chat))
    assert first.withheld and first.claims[0]["support"] == "unsupported"
    assert second.withheld and second.warnings == ["answer withheld: the model found no answer"]


def test_llm_claims_must_give_the_kind_of_answer_asked_for(db: psycopg.Connection) -> None:
    vague = llm_answer(("Signing keys used to issue authentication tokens must be rotated.", [1]))
    dated = llm_answer(("Signing keys must be rotated at least every 90 days.", [1]))
    with openai_server(contents=[vague, dated]) as server, \
            ChatClient(server.base_url, None, "chat", backoff_s=0) as chat:
        first = synthesize(db, "How often must signing keys be rotated?", EVIDENCE, synthesizer=LLMSynthesizer(chat))
        second = synthesize(db, "How often must signing keys be rotated?", EVIDENCE, synthesizer=LLMSynthesizer(chat))
    assert first.withheld and first.claims[0]["support"] == "supported"
    assert first.warnings == ["answer withheld: the question asks for an amount and no supported claim gives one"]
    assert not second.withheld and second.answer is not None and "90 days" in second.answer


def test_refusal_comes_before_the_model_is_asked(db: psycopg.Connection) -> None:
    with openai_server(contents=[llm_answer(("anything", [1]))]) as server, \
            ChatClient(server.base_url, None, "chat", backoff_s=0) as chat:
        out = synthesize(db, "What does error E-1099 mean?", EVIDENCE, synthesizer=LLMSynthesizer(chat))
        asked = server.bodies("/v1/chat/completions")
    assert out.withheld and asked == []
