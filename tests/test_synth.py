"""Grounded synthesis against the demo corpus's statistics: extractive quotes, LLM claims
checked against the evidence they cite (served by a local OpenAI-compatible server), refusals."""

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import psycopg
import pytest
from openai_server import openai_server

from tortus_pg.db import tenant_scope
from tortus_pg.evidence import Evidence
from tortus_pg.llm import ChatClient
from tortus_pg.query.question import Question
from tortus_pg.query.refusal import Refusal
from tortus_pg.query.results import Claim, ClaimSupport
from tortus_pg.query.support import THRESHOLD, model_for
from tortus_pg.query.terms import lexemes, question_terms
from tortus_pg.synth import LLMSynthesizer, Synthesis, evidence_sentences, synthesize

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


def ask(db: psycopg.Connection, text: str, names: Sequence[str] = ()) -> Question:
    """The question as synthesis reads it: its terms weighed by the demo corpus, about `names`
    (synthesis reads no embedding, and the question names no concept of the graph)."""
    return Question(text, np.zeros(0, dtype=np.float32), (), (), question_terms(db, text, names=names))


def quoted(out: Synthesis) -> list[Claim]:
    """The claims the reader chose, answered or kept as the draft of a withheld answer."""
    return out.claims or out.draft


def texts(out: Synthesis) -> str:
    return " ".join(c.text for c in quoted(out))


def llm_answer(*claims: tuple[str, list[int]], answerable: bool = True) -> str:
    return json.dumps({"answerable": answerable, "claims": [{"text": t, "citations": c} for t, c in claims]})


def test_extractive_quotes_the_sentence_and_cites_its_exact_span(db: psycopg.Connection) -> None:
    out = synthesize(db, ask(db, "How often must signing keys be rotated?"), EVIDENCE)
    claim = quoted(out)[0]
    assert claim.uri == "security/policy.pdf" and claim.page == 2 and "90 days" in claim.text
    assert claim.span is not None and claim.citation == 1
    start, end = claim.span
    assert CLAUSE[start - 100 : end - 100] == claim.text


def test_a_missing_identifier_withholds_whatever_the_support(db: psycopg.Connection) -> None:
    missing_id = synthesize(db, ask(db, "What does clause 7.3.5 require?"), EVIDENCE)
    assert missing_id.withheld and missing_id.warnings == ["answer withheld: no evidence mentions 7.3.5"]
    assert missing_id.refusal is Refusal.MISSING_IDENTIFIER and missing_id.confidence == 0.0
    spelled = synthesize(db, ask(db, "What was the root cause of INC-2025-030?"), EVIDENCE)
    assert spelled.warnings == ["answer withheld: no evidence mentions INC-2025-030"]


def test_the_answer_is_withheld_below_the_support_threshold_and_kept_as_a_draft(db: psycopg.Connection) -> None:
    # The owner sentence is the best the evidence has for a question it does not answer: its
    # support (the model's, from the signals synthesis measures) decides.
    off_topic = synthesize(db, ask(db, "Which vendor prints the quarterly newsletter?"), EVIDENCE[1:])
    assert off_topic.withheld and off_topic.refusal is Refusal.LOW_SUPPORT and off_topic.draft
    assert off_topic.confidence == pytest.approx(model_for(None).probability(off_topic.signals))
    assert off_topic.confidence < THRESHOLD
    owned = synthesize(db, ask(db, "Which team owns Key Vault?", names=["Key Vault"]), EVIDENCE[1:])
    assert not owned.withheld and owned.confidence >= THRESHOLD and "Platform Team" in (owned.answer or "")


LATENCY = "The gateway targets a p99 latency of 350 ms for confirmations at the load balancer."
LEDGER = "The Ledger Service records every payment in a double-entry journal."


def test_sentences_about_another_thing_than_the_question_names_are_withheld(db: psycopg.Connection) -> None:
    # The asked attribute is stated of another service than the one the question names: the
    # gateway's latency target answers another question.
    pages = [Evidence(4, "Checkout Gateway > Service levels", "payments/gateway.md", 0, len(LATENCY), None, LATENCY,
                      0.0, "seed"),
             Evidence(5, "Ledger Service > Summary", "payments/ledger.md", 0, len(LEDGER), None, LEDGER, 0.0, "seed")]
    # Two documents, two chains: nothing ties one to the other.
    other = synthesize(db, ask(db, "What is the p99 latency target of the Ledger Service?", names=["Ledger Service"]),
                       pages, [[0], [1]])
    assert other.withheld and other.refusal is Refusal.NOT_ABOUT and other.confidence == 0.0
    assert other.warnings == ["answer withheld: no sentence that matches it is about Ledger Service"]
    assert "350 ms" in texts(other)  # kept as the draft a bridge may lead on from
    own = synthesize(db, ask(db, "What is the p99 latency target of the Checkout Gateway?", names=["Checkout Gateway"]),
                     pages, [[0], [1]])
    assert own.refusal is not Refusal.NOT_ABOUT and "350 ms" in texts(own)
    # Saying one of the things the question names is enough.
    both = ask(db, "What p99 latency target does the Checkout Gateway set for the Ledger Service?",
               names=["Checkout Gateway", "Ledger Service"])
    assert synthesize(db, both, pages[:1]).refusal is not Refusal.NOT_ABOUT


TABLE = "| Code | Meaning | Retry |\n|---|---|---|\n| E-2107 | Ledger write timed out | Yes, same key |"
STORE = ("Feature Store computes and serves the features that models use. "
         "Feature Store is owned by the Data Platform Team.")


def test_table_rows_are_quoted_but_not_their_header(db: psycopg.Connection) -> None:
    table = [Evidence(3, "Error codes > Ledger errors", "payments/error-codes.html", 0, len(TABLE), None, TABLE,
                      0.0, "seed")]
    out = synthesize(db, ask(db, "What does the code E-2107 mean, and may it be retried?"), table)
    assert [c.text for c in quoted(out)] == ["| E-2107 | Ledger write timed out | Yes, same key |"]


def test_a_sentence_matching_only_its_heading_is_not_quoted(db: psycopg.Connection) -> None:
    row = "| E-3301 | Risk score unavailable | Yes |"
    said = "Merchants received E-1042 responses from Checkout Gateway."
    evidence = [Evidence(5, "Error codes > Risk errors", "payments/error-codes.html", 0, len(row), None, row, 0.0,
                         "seed"),
                Evidence(6, "INC-2025-014 > Impact", "incidents/inc-2025-014.md", 0, len(said), None, said, 0.0,
                         "seed")]
    out = synthesize(db, ask(db, "Which error did merchants receive?"), evidence, [[0, 1]])
    assert [c.text for c in quoted(out)] == [said]


def seed(node_id: int, label: str, uri: str, text: str) -> Evidence:
    """A search hit quoting `text` whole, from offset 0 of `uri`."""
    return Evidence(node_id, label, uri, 0, len(text), None, text, 0.0, "seed")


INCIDENT = "incidents/inc-2025-014.md"
MERCHANTS = "What does the error code that merchants received during INC-2025-014 mean?"
SUMMARY = "Merchants received E-1042 responses during INC-2025-014."


def test_the_sentence_about_an_identifier_a_claim_resolves_to_follows_it(db: psycopg.Connection) -> None:
    # "The error code that merchants received" is E-1042 by the first claim; E-1042's row shares
    # no word with the question, yet it is what the question asks, and it beats a row that only
    # matches "merchant".
    rows = ("| Code | Meaning | Retry |\n|---|---|---|\n| E-1090 | Merchant account suspended | No |\n"
            "| E-1042 | Upstream TLS handshake failed | Yes |")
    table = seed(12, "Error codes > Transport errors", "payments/error-codes.html", rows)
    evidence = [seed(11, "INC-2025-014 > Summary", INCIDENT, SUMMARY), table]
    out = synthesize(db, ask(db, MERCHANTS), evidence, [[0, 1]])
    assert [c.text for c in quoted(out)][:2] == [SUMMARY, "| E-1042 | Upstream TLS handshake failed | Yes |"]
    # The bridge links the chunks even when nothing else groups them.
    assert "E-1042 | Upstream" in texts(synthesize(db, ask(db, MERCHANTS), evidence, [[0], [1]]))
    # A claim naming no identifier beyond the question's resolves nothing.
    plain = [seed(11, "INC-2025-014 > Summary", INCIDENT, "Merchants received errors during INC-2025-014."), table]
    assert "E-1042 | Upstream" not in texts(synthesize(db, ask(db, MERCHANTS), plain, [[0, 1]]))


def test_a_passage_title_repeated_as_its_first_line_is_not_quoted(db: psycopg.Connection) -> None:
    title = "Key Vault (Platform Team service)"
    text = f"{title}\n\nKey Vault stores the signing keys and certificates of the Platform Team."
    passage = [Evidence(8, title, "platform/key-vault.md", 0, len(text), None, text, 0.0, "seed")]
    out = synthesize(db, ask(db, "Which team's service is Key Vault?"), passage)
    assert [c.text for c in quoted(out)] == [text.split("\n\n")[1]]


MOVED = "ADR-011 moved Postgres Cluster A to hosts with local NVMe drives. The move finished on 12 May 2025."


def test_a_question_asking_for_a_time_gets_the_sentence_giving_one(db: psycopg.Connection) -> None:
    moved = [Evidence(7, "ADR-011 > Decision", "platform/adr-011.md", 0, len(MOVED), None, MOVED, 0.0, "seed")]
    out = synthesize(db, ask(db, "When did ADR-011 move Postgres Cluster A to NVMe drives?"), moved)
    # The first sentence covers every word of the question; the second adds only the date.
    assert [c.text for c in quoted(out)] == [MOVED.split(". ")[0] + ".", "The move finished on 12 May 2025."]
    what = synthesize(db, ask(db, "Where did ADR-011 move Postgres Cluster A?"), moved)
    assert [c.text for c in what.claims] == [MOVED.split(". ")[0] + "."]


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
    with openai_server(contents=[reply]) as server, ChatClient(server.base_url, None, "chat") as chat:
        out = synthesize(db, ask(db, "Which team owns Key Vault?"), EVIDENCE, synthesizer=LLMSynthesizer(chat))
        prompt = server.bodies("/v1/chat/completions")[0]["messages"][1]["content"]
    assert "[1] " + CLAUSE in prompt and "[2] " + OWNER in prompt
    assert [c.support for c in out.claims] == [ClaimSupport.SUPPORTED, ClaimSupport.UNSUPPORTED]
    assert out.claims[0].uri == "security/key-vault.md" and not out.withheld
    assert out.warnings == ["claim 2 is not supported by the evidence it cites"]
    assert 0 < out.confidence < out.coverage


def test_llm_without_a_supported_claim_or_saying_unanswerable_withholds(db: psycopg.Connection) -> None:
    unsupported = llm_answer(("The vault is run by the Treasury Team.", [2]))
    unanswerable = llm_answer(answerable=False)
    with openai_server(contents=[unsupported, unanswerable]) as server, \
            ChatClient(server.base_url, None, "chat") as chat:
        first = synthesize(db, ask(db, "Which team owns Key Vault?"), EVIDENCE, synthesizer=LLMSynthesizer(chat))
        second = synthesize(db, ask(db, "Which team owns Key Vault?"), EVIDENCE, synthesizer=LLMSynthesizer(chat))
    assert first.withheld and first.claims[0].support is ClaimSupport.UNSUPPORTED
    assert second.withheld and second.warnings == ["answer withheld: the model found no answer"]


def test_llm_claims_must_give_the_kind_of_answer_asked_for(db: psycopg.Connection) -> None:
    vague = llm_answer(("Signing keys used to issue authentication tokens must be rotated.", [1]))
    dated = llm_answer(("Signing keys must be rotated at least every 90 days.", [1]))
    rotated = ask(db, "How often must signing keys be rotated?")
    with openai_server(contents=[vague, dated]) as server, \
            ChatClient(server.base_url, None, "chat") as chat:
        first = synthesize(db, rotated, EVIDENCE, synthesizer=LLMSynthesizer(chat))
        second = synthesize(db, rotated, EVIDENCE, synthesizer=LLMSynthesizer(chat))
    assert first.withheld and first.claims[0].support is ClaimSupport.SUPPORTED
    assert first.warnings == [Refusal.NO_VALUE_OF_TYPE.message("an amount")]
    assert not second.withheld and second.answer is not None and "90 days" in second.answer


def test_refusal_comes_before_the_model_is_asked(db: psycopg.Connection) -> None:
    with openai_server(contents=[llm_answer(("anything", [1]))]) as server, \
            ChatClient(server.base_url, None, "chat") as chat:
        out = synthesize(db, ask(db, "What does error E-1099 mean?"), EVIDENCE, synthesizer=LLMSynthesizer(chat))
        asked = server.bodies("/v1/chat/completions")
    assert out.withheld and asked == []


def test_the_verb_closing_a_what_does_question_does_not_weigh(db: psycopg.Connection) -> None:
    # "What does X say?" asks what X states: the clause need not repeat "say" to answer it. A verb
    # of any other question keeps its weight, and so does a word inside a name.
    assert "say" not in question_terms(db, "What does clause 7.3.2 say?").weights
    assert "indic" not in question_terms(db, "What did the incident report indicate?").weights
    assert "say" in question_terms(db, "Which clause does the policy say applies?").weights
    assert "happen" in question_terms(db, "When did the director of It Happened Only Once die?").weights
    clause = lexemes(db, ["Clause 7.3.2: signing keys must be rotated at least every 90 days."])[0]
    assert question_terms(db, "What does clause 7.3.2 say?").covered(clause) == 1.0  # the whole question


def test_a_table_row_reads_under_its_column_headers(db: psycopg.Connection) -> None:
    # The row states the recovery window in its table's terms: its own cells name only the ledger,
    # the column headers say what the 35 days are. A sentence with more of the question's words
    # in it, but not the asked fact, comes second.
    prose = "The Billing Ledger cluster was resized in May to hold eight terabytes."
    rows = ("| Cluster | Consumer | Recovery window |\n|---|---|---|\n| heron-1 | Billing Ledger | 35 days |\n"
            "| heron-2 | Finance reporting | 7 days |")
    evidence = [seed(21, "Database inventory", "inventory.md", f"{prose}\n\n{rows}")]
    out = synthesize(db, ask(db, "What recovery window does the cluster of the Billing Ledger have?",
                             ["Billing Ledger"]), evidence)
    assert quoted(out)[0].text == "| heron-1 | Billing Ledger | 35 days |"
    assert {"recoveri", "window"} <= set(quoted(out)[0].matched_terms or ())  # from the headers


def test_a_table_row_is_one_sentence_whatever_its_cells_say() -> None:
    # A cell holding two sentences does not cut its row: the second would lose the row's first
    # cell and its column headers.
    timeline = ("| Time | Event |\n|---|---|\n| 04:30 UTC | Job resumed. First run purges 2.3 TB. |\n\n"
                "The purge ran again. It took an hour.")
    sentences = evidence_sentences([seed(22, "Timeline", "timeline.md", timeline)])
    assert [s.read_as for s in sentences] == [
        "Time: 04:30 UTC; Event: Job resumed. First run purges 2.3 TB.", "The purge ran again.", "It took an hour."]


def test_a_key_value_line_is_a_sentence_however_short() -> None:
    # "Lead: Priya Raman" states who leads in three words; a three-word fragment of prose is
    # not worth quoting.
    page = "Lead: Priya Raman\nTimeout: 800 ms\n\nSee below.\n\nThe team sits in Lisbon."
    sentences = evidence_sentences([seed(23, "Money Movement team", "team.md", page)])
    assert [s.text for s in sentences] == ["Lead: Priya Raman", "Timeout: 800 ms", "The team sits in Lisbon."]


ORIGINS = [("Ledger Service", "The Ledger Service is a Brevanian payments system run by the Platform Team."),
           ("Payout Scheduler", "The Payout Scheduler is a Brevanian batch system run by the Payments Team."),
           ("Fraud Scoring Service", "The Fraud Scoring Service is an Ostrian scoring system.")]


@pytest.mark.parametrize(("other", "verdict"), [(1, "Yes."), (2, "No.")])
def test_a_sameness_question_is_answered_yes_or_no_before_the_origins_quoted(
    db: psycopg.Connection, other: int, verdict: str
) -> None:
    items = [ORIGINS[0], ORIGINS[other]]
    evidence = [Evidence(20 + i, label, f"systems/{i}.md", 0, len(text), None, text, 0.0, "seed")
                for i, (label, text) in enumerate(items)]
    question = f"Are the {items[0][0]} and the {items[1][0]} from the same country?"
    out = synthesize(db, ask(db, question, names=[label for label, _ in items]), evidence)
    assert not out.withheld and out.answer is not None
    assert out.answer.startswith(f"{verdict} {items[0][1]} [1] {items[1][1]} [2]")
    assert out.claims[0].short_answer == verdict.rstrip(".").casefold()


def test_a_comparison_is_answered_by_the_option_picked_before_the_values_quoted(db: psycopg.Connection) -> None:
    items = [("Ledger Service", "The Ledger Service was first deployed in 2016."),
             ("Payout Scheduler", "The Payout Scheduler was first deployed in 2021.")]
    evidence = [Evidence(30 + i, label, f"systems/{i}.md", 0, len(text), None, text, 0.0, "seed")
                for i, (label, text) in enumerate(items)]
    question = "Which was deployed first, the Ledger Service or the Payout Scheduler?"
    out = synthesize(db, ask(db, question, names=[label for label, _ in items]), evidence)
    assert not out.withheld and out.answer == f"Ledger Service. {items[0][1]} [1] {items[1][1]} [2]"
