"""Relation chains on the demo corpus: the typed paths `tortus.relation_paths` returns, and the
chain `best_relation` picks to answer a "Which team / system / decision …" question."""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from tortus_pg.db import tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.engine import answer as ask
from tortus_pg.evidence import Evidence
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.question import concepts_in, labels
from tortus_pg.query.terms import question_terms
from tortus_pg.relations import (
    Relation,
    Target,
    answer,
    best_relation,
    described_relation,
    matches,
    target_of,
)


@pytest.fixture
def db(demo: tuple[Path, dict[str, str]]) -> Iterator[psycopg.Connection]:
    with psycopg.connect(demo[1]["TORTUS_DATABASE_URL"]) as conn, tenant_scope(conn, "default"):
        yield conn


@pytest.mark.parametrize(("question", "target"), [
    ("Which team owns the Checkout Gateway?", Target("group", "team")),
    ("which database cluster does the Ledger Service rely on?", Target("system", "database cluster")),
    ("The gateway depends on a service. Which architecture decision record made that change?",
     Target("decision", "architecture decision record")),
    ("In which incident did merchants receive E-1042?", Target("event", "incident")),
    # Who leads a group is a person (the group's name is not asked for).
    ("Who leads the team that owns the Checkout Gateway?", Target("person", "leads the team")),
    ("Who heads up the Fleet Data group?", Target("person", "heads up the group")),
    ("Who is the engineering manager for Route Desk?", Target("person", "is the engineering manager for")),
    # A noun inside a name, a definitional question, and other kinds ask for no relation.
    ("In which Token Service release did the algorithm change?", None),
    ("What is the service level of the Ledger Service?", None),
    ("Which film came out first?", None),
    ("Who directed the film that opened the festival?", None),
    ("Who owns the Checkout Gateway?", None),
])
def test_which_questions_ask_for_a_kind_of_node(question: str, target: Target | None) -> None:
    assert target_of(question) == target


def test_a_node_is_of_the_asked_kind() -> None:
    assert matches("group", "entity", "Platform Team") and not matches("group", "entity", "Key Vault")
    assert matches("system", "entity", "Key Vault") and not matches("system", "entity", "Platform Team")
    assert matches("decision", "decision", "ADR-011") and not matches("decision", "entity", "ADR-011")
    assert matches("event", "event", "INC-2025-014") and not matches("system", "event", "INC-2025-014")
    # A group named without saying so is one when a thing is owned by it; a person, when a group
    # is led by them.
    assert matches("group", "entity", "Route Desk", ("owned_by", "out"))
    assert not matches("group", "entity", "Route Desk", ("depends_on", "out"))
    assert matches("person", "entity", "Imogen Varga", ("led_by", "out"))
    assert not matches("person", "entity", "Imogen Varga", ("led_by", "in"))
    assert not matches("person", "entity", "kestrel-3", ("led_by", "out"))


def _node(db: psycopg.Connection, label: str) -> int:
    row = db.execute("select node_id from tortus.node where tenant_id = tortus.current_tenant() and label = %s "
                     "and kind <> 'chunk' order by node_id limit 1", [label]).fetchone()
    assert row is not None, label
    return int(row[0])


def test_relation_paths_follow_typed_edges_both_ways_within_the_hop_bound(db: psycopg.Connection) -> None:
    gateway = _node(db, "Checkout Gateway")
    rows = db.execute("select path, edges, types, directions from tortus.relation_paths(%s::bigint[], 2)",
                      [[gateway]]).fetchall()
    labels = dict(db.execute("select node_id, label from tortus.node where tenant_id = tortus.current_tenant() "
                             "and node_id = any(%s)", [list({n for p, *_ in rows for n in p})]).fetchall())
    chains = {tuple(labels[n] for n in p): (t, d) for p, _, t, d in rows}
    assert chains[("Checkout Gateway", "Payments Team")] == (["owned_by"], ["out"])
    assert chains[("Checkout Gateway", "Ledger Service", "Core Ledger Team")] == (["depends_on", "owned_by"],
                                                                                  ["out", "out"])
    # Against the edge: INC-2025-014 affected the gateway.
    assert chains[("Checkout Gateway", "INC-2025-014")] == (["affects"], ["in"])
    assert all(1 <= len(e) <= 2 and len(set(p)) == len(p) == len(e) + 1 for p, e, _, _ in rows)
    assert not any("mentions" in t or "related_to" in t for _, _, t, _ in rows)
    # One edge per node: a single chain, each path the start of the next.
    single = sorted(r[0] for r in db.execute("select path from tortus.relation_paths(%s::bigint[], 2, fan_out => 1)",
                                             [[gateway]]).fetchall())
    assert [len(p) for p in single] == [2, 3] and single[1][:2] == single[0]
    # max_paths bounds the rows, however far the hops and the fan-out would go.
    count = db.execute("select count(*) from tortus.relation_paths(%s::bigint[], 50, fan_out => 100000, "
                       "max_paths => 3)", [[gateway]]).fetchone()
    assert count == (3,)


def test_relation_paths_stay_inside_the_current_tenant(db: psycopg.Connection) -> None:
    gateway = _node(db, "Checkout Gateway")
    db.execute("select set_config('tortus.tenant', 'another-tenant', true)")
    # The same node ids, asked for by another tenant: no path, no edge.
    assert db.execute("select count(*) from tortus.relation_paths(%s::bigint[], 3)", [[gateway]]).fetchone() == (0,)


def _relation(db: psycopg.Connection, question: str, max_hops: int = 3) -> Relation | None:
    target = target_of(question)
    assert target is not None, question
    concepts = concepts_in(db, question)
    terms = question_terms(db, question, names=labels(db, [c.node for c in concepts if c.defined_by]))
    return best_relation(db, target, terms, [c.node for c in concepts], max_hops)


def test_the_chain_to_a_node_of_the_asked_kind_answers(db: psycopg.Connection) -> None:
    r = _relation(db, "Which team owns the system whose expired certificate caused INC-2025-014?")
    assert r is not None and r.labels == ["INC-2025-014", "Key Vault", "Platform Team"]
    assert [h.type for h in r.hops] == ["caused_by", "owned_by"] and r.directions == ["out", "out"]
    for hop in r.hops:  # each claim is the span that states the edge, inside the chunk cited for it
        text = db.execute("select tortus.span_text(s.tenant_id, s.source_id, %s, %s) from tortus.source s "
                          "where s.tenant_id = tortus.current_tenant() and s.uri = %s",
                          [hop.start, hop.end, hop.uri]).fetchone()
        assert text == (hop.text,) and hop.chunk is not None


def test_the_end_node_s_own_name_does_not_cover_the_question(db: psycopg.Connection) -> None:
    # "Token Service relies on Key Vault" would add "service" only through the name of the node
    # it ends at: the shorter chain to Key Vault, which provides the certificates, wins.
    r = _relation(db, "Which system provides the client certificates for the service that the Payout Scheduler "
                      "uses to deliver payment files to banks?")
    assert r is not None and r.labels == ["Payout Scheduler", "Bank Connector", "Key Vault"]


def test_no_chain_within_the_hop_budget_or_covering_the_question_is_no_answer(db: psycopg.Connection) -> None:
    question = "Which team owns the streaming platform that feeds the features used by the Fraud Scoring Service?"
    three = _relation(db, question)
    assert three is not None and three.labels[-2:] == ["Event Bus", "Platform Team"]
    assert _relation(db, question, max_hops=2) is None
    assert _relation(db, "Which team owns the weather forecast for Lisbon?") is None
    assert _relation(db, "Which team approved the p99 latency target of the Ledger Service?") is None


ALIASED = {
    "van-planner.md": "# Van Planner\n\nVan Planner, known internally as Wayfinder, builds the route of every van.\n"
                      "Van Planner is owned by the Routing Team.\n",
    "routing-team.md": "# Routing Team\n\nThe Routing Team plans the vans' day.\n",
}


@pytest.mark.parametrize("corpus", [ALIASED], indirect=True)
def test_a_chain_ending_on_an_alias_reaches_nothing_new(corpus: psycopg.Connection) -> None:
    types = {r[0] for r in corpus.execute("select type from tortus.edge").fetchall()}
    assert {"same_as", "owned_by"} <= types  # ingest states the alias and the owner
    # "Which system is Wayfinder?" would end on its other name, Van Planner: no answer.
    assert _relation(corpus, "Which system is Wayfinder known as?") is None
    owner = _relation(corpus, "Which team owns Wayfinder?")
    assert owner is not None and owner.labels[-1] == "Routing Team"


KINDS = {
    "route-planner.md": "# Route Planner\n\nRoute Planner builds the daily plans of the van fleet.\n"
                        "Route Planner relies on kestrel-3 for its orders.\n"
                        "Route Planner depends on Mapgrid for road distances between depots.\n",
    "kestrel-3.md": "# kestrel-3\n\nkestrel-3 is the PostgreSQL cluster that holds the routing data.\n",
}


@pytest.mark.parametrize("corpus", [KINDS], indirect=True)
def test_a_system_answer_is_a_thing_the_sources_call_one(corpus: psycopg.Connection) -> None:
    # A provider no source calls a system, service, cluster … answers no "Which system" question,
    # however well the edge to it covers the question's words.
    assert _relation(corpus, "Which system does Route Planner depend on for road distances between depots?") is None
    # The cluster's own page says what it is.
    cluster = _relation(corpus, "Which database cluster does Route Planner rely on for its orders?")
    assert cluster is not None and cluster.labels == ["Route Planner", "kestrel-3"]


SIBLINGS = {
    "ledger-api.md": "# Ledger API\n\nThe Ledger API records payments. It is owned by the Money Movement team.\n",
    "refund-worker.md": "# Refund Worker\n\nRefund Worker is the service that pays refunds back to cards.\n",
    "money-movement.md": "# Money Movement team\n\nLead: Priya Raman\nServices owned: Ledger API, Refund Worker\n",
}


@pytest.mark.parametrize("corpus", [SIBLINGS], indirect=True)
def test_a_chain_does_not_answer_through_a_sibling(corpus: psycopg.Connection) -> None:
    # The Ledger API and the Refund Worker share an owner: that makes neither the other's
    # database, whatever the chain through the team covers.
    owned = corpus.execute("select count(*) from tortus.edge where type = 'owned_by'").fetchone()
    assert owned is not None and owned[0] >= 2  # both are owned_by the team
    assert _relation(corpus, "Which database service does the Ledger API keep its payments in?") is None
    team = _relation(corpus, "Which team owns the Ledger API?")
    assert team is not None and team.labels[-1].startswith("Money Movement")


CHAIN = {
    "inc-77.md": "# INC-77\n\nINC-77 was caused by Tollgate, whose disk filled up overnight.\n",
    "tollgate.md": "# Tollgate\n\nTollgate is the service that meters toll roads for the vans.\n"
                   "Tollgate is owned by the Metering Team.\n",
    "metering-team.md": "# Metering Team\n\nThe Metering Team runs the billing meters.\n",
}


@pytest.mark.parametrize("corpus", [CHAIN], indirect=True)
def test_the_node_a_chain_ends_at_is_the_short_answer(corpus: psycopg.Connection) -> None:
    r = _relation(corpus, "Which team owns the service that caused INC-77?")
    assert r is not None and r.labels == ["INC-77", "Tollgate", "Metering Team"]
    _, synthesis, _ = answer(corpus, r, [], np.asarray(HashEmbedder(384).embed(["q"])[0]), k=5, max_tokens=1_200)
    # Only the claim stating the last edge gives it; the bridge's claim gives none.
    assert [(c.relation, c.short_answer) for c in synthesis.claims] == [
        ("INC-77 caused by Tollgate", None), ("Tollgate owned by Metering Team", "Metering Team")]


DESCRIBED = {
    "inc-90.md": "# INC-90: Trailers held at Harwich\n\n**System:** Tollgate\n\n"
                 "On 3 May trailers queued at the Harwich depot because every toll was refused.\n",
    "tollgate.md": "# Tollgate\n\nTollgate meters the toll roads the vans take.\n\nOwner: Route Desk\n",
    "route-desk.md": "# Route Desk\n\n**Lead:** Imogen Varga\n\nRoute Desk plans the vans' day.\n",
}
HELD = "Trailers queued at the Harwich depot in May. Who leads the team that owns the system involved?"


# The same service and lead, the incident named, and the group said to be one ("the squad").
LED = {**DESCRIBED, "inc-88.md": "# INC-88\n\nINC-88 was caused by Tollgate, whose disk filled up overnight.\n",
       "route-desk.md": "# Route Desk\n\n**Lead:** Imogen Varga\n\nRoute Desk is the squad that plans the vans' day.\n"}


@pytest.mark.parametrize("corpus", [LED], indirect=True)
def test_who_leads_the_owning_group_is_the_person_it_is_led_by(corpus: psycopg.Connection) -> None:
    # The group's name does not say it is one: that the service is owned by it does.
    owner = _relation(corpus, "Which team owns the service that caused INC-88?")
    assert owner is not None and owner.labels == ["INC-88", "Tollgate", "Route Desk"]
    lead = _relation(corpus, "Who leads the team that owns the service that caused INC-88?")
    assert lead is not None and lead.labels == ["INC-88", "Tollgate", "Route Desk", "Imogen Varga"]
    assert [h.type for h in lead.hops] == ["caused_by", "owned_by", "led_by"] and lead.asked == "lead"


def _documents(db: psycopg.Connection, *names: str) -> list[Evidence]:
    """Each named document's first chunk, as evidence in that order."""
    rows = [db.execute("select c.node_id, c.label, s.uri, c.text from tortus.node c join tortus.source s "
                       "on s.tenant_id = c.tenant_id and s.source_id = c.source_id where c.kind = 'chunk' "
                       "and s.uri like %s order by c.node_id limit 1", [f"%{name}"]).fetchone() for name in names]
    return [Evidence(n, label, uri, 0, len(text), None, text, 1.0, "seed") for n, label, uri, text in rows]


@pytest.mark.parametrize("corpus", [DESCRIBED], indirect=True)
def test_a_chain_from_a_thing_the_question_describes_starts_at_what_the_evidence_is_about(
        corpus: psycopg.Connection) -> None:
    target = target_of(HELD)
    assert target is not None and _relation(corpus, HELD) is None  # it names nothing a chain starts from
    terms = question_terms(corpus, HELD)
    found = described_relation(corpus, target, terms, [], _documents(corpus, "inc-90.md", "tollgate.md"), 3)
    assert found is not None and found.labels[-2:] == ["Route Desk", "Imogen Varga"]
    # Every hop but the asked one is stated in the evidence's documents ...
    assert described_relation(corpus, target, terms, [], _documents(corpus, "inc-90.md"), 3) is None
    # ... and the chain says every concept the question names.
    assert described_relation(corpus, target, terms, ["Imogen Varga", "Billing"],
                              _documents(corpus, "inc-90.md", "tollgate.md"), 3) is None
    # The engine takes that road when the evidence read alone does not answer.
    a = ask(corpus, HELD, embedder=HashEmbedder(384), policy=TraversalPolicy(), store=False)
    assert not a.withheld and a.short_answer == "Imogen Varga"
    assert [(h.source, h.edge_type, h.target) for h in a.path][-1] == ("Route Desk", "led_by", "Imogen Varga")
