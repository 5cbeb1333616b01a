"""GraphQL over a real socket: the REST answer, each directive's effect, the limits checked
before any resolver, tenants kept apart, malformed input answered with errors."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from .conftest import Api

QUESTION = "INC-2025-014 was triggered by an expired certificate on some system. Which team runs that system?"
RETRIES = "What is the maximum number of retries for Checkout Gateway calls to the Ledger Service?"
ROTATION = "How often must the Token Service rotate its token signing keys?"
ANSWER = """answer shortAnswer withheld refusal confidence warnings traceId
  claims { text evidence { uri start end page text } }
  reasoningPath { from to edgeType weight reason evidence { uri start end page text } }
  evidence { uri start end text }
  budget { hops { used limit } ms { used limit } tokens { used limit } portalHops { used limit } }
  diagnostics { seeds hops pruned portals namedConcepts }"""


def gql(api: Api, query: str, key: str | None = "demo", **variables: Any) -> dict[str, Any]:
    with api.client(key) as http:
        response = http.post("/graphql", json={"query": query, "variables": variables or None})
    assert response.status_code in (200, 400), response.text
    return response.json()  # type: ignore[no-any-return]


def ask(api: Api, question: str, directives: str = "", key: str = "demo", k: int = 5) -> dict[str, Any]:
    reply = gql(api, f"query($q: String!, $k: Int) {{ ask(question: $q, k: $k) {directives} {{ {ANSWER} }} }}",
                key, q=question, k=k)
    assert "errors" not in reply, reply
    return reply["data"]["ask"]  # type: ignore[no-any-return]


def test_graphql_gives_the_rest_answer_path_and_evidence(api: Api) -> None:
    over_graphql = ask(api, QUESTION)
    with api.client() as http:
        rest = http.post("/api/query", json={"question": QUESTION}).json()
    assert over_graphql["answer"] == rest["answer"] and over_graphql["withheld"] is False
    assert [(h["from"], h["to"], h["edgeType"]) for h in over_graphql["reasoningPath"]] == \
        [(h["from"], h["to"], h["edge_type"]) for h in rest["path"]]
    assert [(e["uri"], e["start"], e["end"]) for e in over_graphql["evidence"]] == \
        [(e["uri"], *e["span"]) for e in rest["evidence"]]
    assert [c["text"] for c in over_graphql["claims"]] == [c["text"] for c in rest["claims"]]


def test_budget_directive_bounds_hops_and_tokens_and_clamps_with_a_warning(api: Api) -> None:
    free, bounded = ask(api, QUESTION), ask(api, QUESTION, "@budget(maxHops: 1, maxTokens: 60, maxMs: 2500)")
    assert bounded["budget"]["hops"] == {"used": bounded["budget"]["hops"]["used"], "limit": 1}
    assert bounded["budget"]["hops"]["used"] <= 1 < free["budget"]["hops"]["used"]
    assert bounded["budget"]["tokens"]["used"] <= 60 < free["budget"]["tokens"]["used"]
    assert bounded["budget"]["ms"]["limit"] == 2500
    clamped = ask(api, QUESTION, "@budget(maxHops: 99)")
    assert clamped["budget"]["hops"]["limit"] < 99 and any("max_hops" in w for w in clamped["warnings"])


def test_min_support_directive_sets_the_support_an_answer_needs(api: Api) -> None:
    free, strict = ask(api, ROTATION), ask(api, ROTATION, "@minSupport(value: 1)")
    assert not free["withheld"] and strict["withheld"] and strict["refusal"] == "LOW_SUPPORT"
    assert strict["confidence"] == free["confidence"] < 1
    with api.client() as http:
        rest = http.post("/api/query", json={"question": ROTATION, "min_support": 1}).json()
        too_high = http.post("/api/query", json={"question": ROTATION, "min_support": 1.5})
    assert rest["withheld"] and rest["refusal"] == "LOW_SUPPORT" and too_high.status_code == 422
    refused = gql(api, f'{{ ask(question: "{ROTATION}") @minSupport(value: -1) {{ answer }} }}')
    assert "min_support must be a number from 0 to 1" in refused["errors"][0]["message"]


def test_explain_hops_directive_shows_or_hides_diagnostics(api: Api) -> None:
    plain, on = ask(api, QUESTION), ask(api, QUESTION, "@explainHops")
    off = ask(api, QUESTION, "@explainHops(on: false)")
    assert off["diagnostics"] is None and plain["diagnostics"] is not None
    assert len(on["diagnostics"]["pruned"]) > len(plain["diagnostics"]["pruned"]) == 20


def test_portal_directives_allow_or_forbid_portal_hops(api: Api) -> None:
    prefer = ask(api, RETRIES, "@portalPreference(type: PREFER)")
    avoid, local = ask(api, RETRIES, "@portalPreference(type: AVOID)"), ask(api, RETRIES, "@localOnly")
    assert prefer["budget"]["portalHops"]["limit"] == 1 and prefer["diagnostics"]["portals"][0]["allowed"]
    for reply in (avoid, local):
        assert reply["budget"]["portalHops"] == {"used": 0, "limit": 0}
        assert not reply["diagnostics"]["portals"][0]["allowed"]
        assert all(h["edgeType"] != "portal" for h in reply["reasoningPath"])


def test_no_personalization_directive_seeds_from_search_alone(api: Api) -> None:
    named, unnamed = ask(api, ROTATION), ask(api, ROTATION, "@noPersonalization")
    assert named["diagnostics"]["namedConcepts"] and unnamed["diagnostics"]["namedConcepts"] == []


def test_failover_plan_directive_decides_whether_a_thin_walk_is_widened(api: Api) -> None:
    # Fifty evidence chunks are more than the walk finds within its radius: level 1 widens it,
    # the default (level 0) does not.
    widened, strict = ask(api, RETRIES, "@failoverPlan(level: 1)", k=50), ask(api, RETRIES, k=50)
    note = "the walk found too little within the torus radius and was widened"
    assert note in widened["warnings"] and note not in strict["warnings"]


def test_semantic_group_directive_keeps_the_walk_in_the_subgraph(api: Api) -> None:
    free = ask(api, QUESTION, "@explainHops")
    kept = ask(api, QUESTION, '@explainHops @semanticGroup(name: "incidents")')
    with psycopg.connect(api.env["TORTUS_DATABASE_URL"]) as conn:
        members = {r[0] for r in conn.execute(
            "select s.uri from tortus.source s where s.tenant_id = 'default' and 'incidents' = any(s.subgraphs)")}
    walked = {h["evidence"][0]["uri"] for h in kept["reasoningPath"] if h["edgeType"] not in ("search", "portal")
              and h["evidence"]}
    free_walked = {h["evidence"][0]["uri"] for h in free["reasoningPath"] if h["edgeType"] not in ("search", "portal")
                   and h["evidence"]}
    assert walked and walked <= members and not free_walked <= members


def test_limits_are_checked_before_any_resolver(api: Api) -> None:
    aliases = "{ " + " ".join(f"a{i}: sources {{ uri }}" for i in range(16)) + " }"
    tokens = "{ sources { " + " ".join(["uri"] * 1000) + " } }"
    deep = "{ __schema { types { fields { type { ofType { ofType { ofType { name } } } } } } } }"
    spread = "fragment F on __Type { fields { type { ofType { ofType { name } } } } } { __schema { types { ...F } } }"
    for query, words in ((aliases, "16 aliases"), (tokens, "tokens"), (deep, "8 levels deep"),
                         (spread, "7 levels deep")):
        reply = gql(api, query)
        assert "data" not in reply and words in json.dumps(reply["errors"]), (words, reply)
    # Within the limits: six levels, fifteen aliases.
    assert "errors" not in gql(api, "{ __schema { types { fields { type { ofType { name } } } } } }")
    assert "errors" not in gql(api, "{ " + " ".join(f"a{i}: sources {{ uri }}" for i in range(15)) + " }")


def test_introspection_can_be_turned_off(api_closed: Api) -> None:
    reply = gql(api_closed, "{ __schema { queryType { name } } }")
    assert "data" not in reply and "introspection is turned off" in reply["errors"][0]["message"]
    assert "errors" not in gql(api_closed, "{ sources { uri } }")


def test_another_tenant_sees_nothing_of_the_demo_through_graphql(api: Api) -> None:
    mine = ask(api, QUESTION, "@explainHops")
    with psycopg.connect(api.env["TORTUS_DATABASE_URL"]) as conn:
        row = conn.execute("select node_id from tortus.node where tenant_id = 'default' and kind <> 'chunk' "
                           "and label = 'Key Vault'").fetchone()
    assert row is not None
    concept = row[0]
    demo = gql(api, "query($id: Int!) { concept(id: $id) { label edges { type } } sources { sourceId uri } }",
               id=concept)
    assert demo["data"]["concept"]["label"] and demo["data"]["concept"]["edges"] and demo["data"]["sources"]
    other = gql(api, "query($id: Int!) { concept(id: $id) { label } sources { uri } "
                     "search(query: \"E-1042 certificate\") { uri } }", key="other", id=concept)
    demo_uris = {s["uri"] for s in demo["data"]["sources"]}
    assert other["data"]["concept"] is None
    assert not demo_uris & {s["uri"] for s in other["data"]["sources"] + other["data"]["search"]}
    # A trace of another tenant answers exactly as one that never existed.
    theirs = gql(api, "query($t: Int!) { trace(id: $t) }", key="other", t=mine["traceId"])
    never = gql(api, "query($t: Int!) { trace(id: $t) }", key="other", t=999999999)
    assert theirs["data"] == never["data"] == {"trace": None}
    assert theirs["errors"][0]["message"] == f"no trace {mine['traceId']}"
    assert never["errors"][0]["message"] == "no trace 999999999"
    source = demo["data"]["sources"][0]["sourceId"]
    removed = gql(api, "mutation($id: Int!) { removeSource(id: $id) }", key="other", id=source)
    assert removed["data"]["removeSource"] is None and removed["errors"][0]["message"] == f"no source {source}"
    assert len(gql(api, "{ sources { uri } }")["data"]["sources"]) == len(demo["data"]["sources"])
    assert ask(api, QUESTION, key="other")["evidence"] == []


def test_ingest_and_remove_through_mutations_need_the_ingest_scope(api: Api) -> None:
    text = "# Tide Gauge\n\nThe Tide Gauge reports the water level of berth nine every ten minutes."
    add = "mutation($t: String!) { ingest(text: $t, name: \"gauge.md\") { uri status sourceId chunks } }"
    refused = gql(api, add, key="reader", t=text)
    assert refused["data"]["ingest"] is None and "'ingest' scope" in refused["errors"][0]["message"]
    added = gql(api, add, key="other", t=text)["data"]["ingest"]
    assert added["status"] == "ingested" and added["uri"] == "upload/gauge.md" and added["chunks"] >= 1
    found = gql(api, "{ search(query: \"berth nine water level\", mode: \"keyword\") { uri } }", key="other")
    assert found["data"]["search"][0]["uri"] == "upload/gauge.md"
    gone = gql(api, "mutation($id: Int!) { removeSource(id: $id) }", key="other", id=added["sourceId"])
    assert gone["data"]["removeSource"] == "upload/gauge.md"


def test_malformed_requests_and_directives_get_errors_never_a_500(api: Api) -> None:
    cases = [
        f'{{ ask(question: "{QUESTION}") @budget(maxHops: "two") {{ answer }} }}',
        f'{{ ask(question: "{QUESTION}") @portalPreference(type: SIDEWAYS) {{ answer }} }}',
        f'{{ ask(question: "{QUESTION}") @teleport {{ answer }} }}',
        f'{{ ask(question: "{QUESTION}") @failoverPlan(level: 7) {{ answer }} }}',
        f'{{ ask(question: "{QUESTION}") @semanticGroup(name: "no such group") {{ answer }} }}',
        f'{{ ask(question: "{QUESTION}") @traversal(engine: AGE) {{ answer }} }}',  # no mirror here
        f'{{ ask(question: "{QUESTION}") @traversal(engine: NEO4J) {{ answer }} }}',
        "{ ask(question: ",
    ]
    for query in cases:
        reply = gql(api, query)
        assert reply["errors"] and reply["errors"][0]["message"], query
        assert not (reply.get("data") or {}).get("ask"), query
    no_mirror = gql(api, f'{{ ask(question: "{QUESTION}") @traversal(engine: AGE) {{ answer }} }}')
    assert "graph sync-age" in no_mirror["errors"][0]["message"]
    with api.client() as http:
        bad_json = http.post("/graphql", content=b"{nope", headers={"Content-Type": "application/json"})
        no_query = http.post("/graphql", json={"variables": {}})
    with api.client(None) as http:
        no_key = http.post("/graphql", json={"query": "{ sources { uri } }"})
    assert bad_json.status_code == 400 and "JSON" in bad_json.json()["error"]["message"]
    assert no_query.status_code == 400 and "query" in no_query.json()["error"]["message"]
    assert no_key.status_code == 401


def test_the_schema_names_every_directive(api: Api) -> None:
    reply = gql(api, "{ __schema { directives { name } } }")
    names = {d["name"] for d in reply["data"]["__schema"]["directives"]}
    assert {"semanticGroup", "portalPreference", "failoverPlan", "explainHops", "noPersonalization", "localOnly",
            "budget", "traversal", "minSupport"} <= names
