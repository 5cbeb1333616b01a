"""The JSON forms of an answer's claims, path hops and budget: what the REST and GraphQL APIs,
`tortus-pg query --json` and the stored trace carry."""

from __future__ import annotations

from tortus_pg.query.results import Budget, Claim, ClaimSupport, PathHop, SourceSpan, Use


def test_a_claim_gives_only_what_its_way_of_answering_knows() -> None:
    read = Claim("Keys rotate every 90 days.", 1, 0, "policy.pdf", 2, (10, 36), matched_terms=("key", "rotat"),
                 short_answer="every 90 days")
    assert read.to_json() == {
        "text": "Keys rotate every 90 days.", "citation": 1, "evidence": 0, "uri": "policy.pdf", "page": 2,
        "span": [10, 36], "support": "supported", "matched_terms": ["key", "rotat"], "short_answer": "every 90 days"}
    drafted = Claim("The vault is run by Treasury.", 2, None, None, None, None, ClaimSupport.UNSUPPORTED,
                    support_share=0.2)
    assert drafted.to_json() == {"text": "The vault is run by Treasury.", "citation": 2, "evidence": None, "uri": None,
                                 "page": None, "span": None, "support": "unsupported", "support_share": 0.2}
    assert Claim("A owned by B", 1, 3, "a.md", None, (0, 5), relation="A owned by B").to_json()["relation"] == \
        "A owned by B"


def test_a_search_hop_has_no_source_node_and_a_walked_hop_its_torus_distance() -> None:
    quote = SourceSpan("a.md", (0, 4), None, "text")
    searched = PathHop("question", None, "a.md > A", 7, "search", 0.03, "hybrid search rank 1", (quote,))
    walked = PathHop("A", 7, "B", 9, "owned_by", 0.9, "a relation", (quote,), torus_distance=None, shard_crossing=True)
    assert searched.searched and not walked.searched
    assert list(searched.to_json()) == ["from", "to", "to_id", "edge_type", "weight", "reason", "evidence",
                                        "shard_crossing"]
    assert walked.to_json() == {
        "from": "A", "from_id": 7, "to": "B", "to_id": 9, "edge_type": "owned_by", "weight": 0.9,
        "reason": "a relation", "torus_distance": None,
        "evidence": [{"uri": "a.md", "span": [0, 4], "page": None, "text": "text"}], "shard_crossing": True}


def test_a_budget_lists_each_limit_and_use() -> None:
    budget = Budget(Use(3000, 412.5), Use(3, 2), Use(1200, 640), Use(1, 0))
    assert budget.to_json() == {"ms": {"limit": 3000, "used": 412.5}, "hops": {"limit": 3, "used": 2},
                                "tokens": {"limit": 1200, "used": 640}, "portal_hops": {"limit": 1, "used": 0}}
