"""tortus.traverse (bounded walk with budgets and prune reasons) and tortus.ppr, in PostgreSQL."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from tortus_pg import tenants
from tortus_pg.db import tenant_scope

EDGE_TYPES = ("mentions", "depends_on", "related_to", "next", "part_of")


@dataclass(frozen=True)
class Hit:
    node_id: int
    kind: str
    label: str
    hop: int
    path: list[int]
    edge_types: list[str]
    directions: list[str]
    hop_scores: list[float]
    reasons: list[str]
    score: float
    torus_distance: float | None
    pruned: bool
    prune_reason: str | None


@dataclass
class Graph:
    """Nodes written into the current tenant, by key."""

    conn: psycopg.Connection
    ids: dict[str, int] = field(default_factory=dict)

    def node(
        self,
        key: str,
        kind: str = "chunk",
        *,
        at: tuple[float, float] | None = None,
        embedding: Sequence[float] | None = None,
        subgraphs: Sequence[str] = (),
    ) -> int:
        row = self.conn.execute(
            "insert into tortus.node (tenant_id, kind, key, label, theta, phi, embedding, embedding_model) "
            "values (tortus.current_tenant(), %s, %s, %s, %s, %s, %s::vector, %s) returning node_id",
            [
                kind,
                key,
                key,
                at and at[0],
                at and at[1],
                None if embedding is None else str(list(embedding)),
                None if embedding is None else "test",
            ],
        ).fetchone()
        assert row is not None
        self.ids[key] = row[0]
        for name in subgraphs:
            self.conn.execute(
                "insert into tortus.subgraph (tenant_id, name) values (tortus.current_tenant(), %s) "
                "on conflict do nothing",
                [name],
            )
            self.conn.execute(
                "insert into tortus.membership (tenant_id, node_id, subgraph) values (tortus.current_tenant(), %s, %s)",
                [row[0], name],
            )
        return int(row[0])

    def edge(self, src: str, dst: str, type: str = "related_to", weight: float = 1.0, confidence: float = 1.0) -> None:
        self.conn.execute(
            "insert into tortus.edge (tenant_id, src, dst, type, weight, confidence) "
            "values (tortus.current_tenant(), %s, %s, %s, %s, %s)",
            [self.ids[src], self.ids[dst], type, weight, confidence],
        )

    def portal(
        self, src: str, dst: str, src_subgraph: str, dst_subgraph: str, reason: str, weight: float = 1.0
    ) -> None:
        self.conn.execute(
            "insert into tortus.portal (tenant_id, src, dst, src_subgraph, dst_subgraph, kind, weight, reason) "
            "values (tortus.current_tenant(), %s, %s, %s, %s, 'shared_concept', %s, %s)",
            [self.ids[src], self.ids[dst], src_subgraph, dst_subgraph, weight, reason],
        )


def traverse(conn: psycopg.Connection, seeds: Sequence[int], query: str | None = None, **policy: object) -> list[Hit]:
    with conn.cursor(row_factory=class_row(Hit)) as cur:
        return cur.execute(
            "select * from tortus.traverse(%s::bigint[], %s::vector, %s)", [list(seeds), query, Jsonb(policy)]
        ).fetchall()


def kept(hits: list[Hit]) -> dict[int, Hit]:
    return {h.node_id: h for h in hits if not h.pruned}


def ppr(conn: psycopg.Connection, seeds: Sequence[int], **kwargs: object) -> dict[int, float]:
    args = ", ".join(f"{k} => %({k})s" for k in kwargs)
    sql = f"select node_id, score from tortus.ppr(%(seeds)s::bigint[]{', ' + args if args else ''})"
    return {n: s for n, s in conn.execute(sql, {"seeds": list(seeds), **kwargs}).fetchall()}  # type: ignore[arg-type]


@pytest.fixture
def graph(conn: psycopg.Connection) -> Iterator[Graph]:
    """An empty tenant t; the test runs in its scope."""
    tenants.create_tenant(conn, "t")
    with tenant_scope(conn, "t"):
        yield Graph(conn)


def chain(g: Graph) -> None:
    """chunk A -mentions-> Ledger Service -depends_on-> Key Vault <-mentions- chunk B."""
    g.node("A", at=(0.1, 0.1), embedding=[1, 0, 0], subgraphs=["pay"])
    g.node("Ledger Service", "concept", at=(0.2, 0.1), subgraphs=["pay"])
    g.node("Key Vault", "concept", at=(0.3, 0.1), subgraphs=["pay", "ops"])
    g.node("B", at=(0.4, 0.1), embedding=[0, 1, 0], subgraphs=["ops"])
    g.edge("A", "Ledger Service", "mentions", 0.6)
    g.edge("Ledger Service", "Key Vault", "depends_on", 0.9)
    g.edge("B", "Key Vault", "mentions", 0.6)


def test_chain_reaches_the_other_chunk_in_three_hops_with_reasons(graph: Graph) -> None:
    chain(graph)
    ids = graph.ids
    hits = kept(traverse(graph.conn, [ids["A"]], "[1,0,0]", max_hops=3))
    b = hits[ids["B"]]
    assert b.hop == 3 and b.kind == "chunk"
    assert b.path == [ids["A"], ids["Ledger Service"], ids["Key Vault"], ids["B"]]
    assert b.edge_types == ["mentions", "depends_on", "mentions"]
    assert b.directions == ["out", "out", "in"]
    assert b.reasons == ["mentions edge (w=0.6)", "depends_on edge (w=0.9)", "mentioned by chunk (w=0.6)"]
    assert len(b.hop_scores) == 3 and all(0 < s <= 1 for s in b.hop_scores)
    assert b.score == pytest.approx(math.prod(b.hop_scores) * math.exp(-b.torus_distance))  # type: ignore[operator]
    assert b.torus_distance == pytest.approx(0.3)
    seed = hits[ids["A"]]
    assert (seed.hop, seed.path, seed.edge_types, seed.score) == (0, [ids["A"]], [], 1.0)
    assert max(h.hop for h in hits.values()) == 3


def test_supported_traverse_adds_the_weakest_edge_and_span_count_of_each_kept_path(graph: Graph) -> None:
    chain(graph)
    ids, conn = graph.ids, graph.conn
    conn.execute("update tortus.edge set confidence = 0.4 where type = 'depends_on'")
    source = conn.execute(
        "insert into tortus.source (tenant_id, uri, kind, sha256, text) "
        "values (tortus.current_tenant(), 'a.md', 'markdown', repeat('0', 64), 'A mentions Ledger Service.') "
        "returning source_id"
    ).fetchone()
    assert source is not None
    conn.execute(
        "insert into tortus.evidence_span (tenant_id, source_id, edge_id, start_char, end_char) "
        "select tenant_id, %s, edge_id, 0, 10 from tortus.edge where type = 'mentions' and src = %s",
        [source[0], ids["A"]],
    )
    plain = traverse(conn, [ids["A"]], "[1,0,0]", max_hops=3, edge_types_deny=["depends_on"])
    rows = conn.execute(
        "select node_id, pruned, min_confidence, spans from tortus.supported_traverse(%s::bigint[], '[1,0,0]', %s)",
        [[ids["A"]], Jsonb({"max_hops": 3, "edge_types_deny": ["depends_on"]})],
    ).fetchall()
    assert [(r[0], r[1]) for r in rows] == [(h.node_id, h.pruned) for h in plain]
    support = {node: (conf, spans) for node, pruned, conf, spans in rows if not pruned}
    assert support[ids["A"]] == (1.0, 0)
    assert support[ids["Ledger Service"]] == (1.0, 1)
    assert any(r[1] for r in rows) and all(conf is None and spans is None for _, pruned, conf, spans in rows if pruned)
    full = dict((r[0], (r[2], r[3])) for r in conn.execute(
        "select node_id, pruned, min_confidence, spans from tortus.supported_traverse(%s::bigint[], null, %s) "
        "where not pruned", [[ids["A"]], Jsonb({"max_hops": 3})]).fetchall())
    assert full[ids["B"]] == (pytest.approx(0.4), 1)  # depends_on at 0.4; one span, on the first hop


def test_max_hops_bounds_the_walk(graph: Graph) -> None:
    for i in range(8):
        graph.node(f"c{i}")
    for i in range(7):
        graph.edge(f"c{i}", f"c{i + 1}", "next", 0.5)
    hits = traverse(graph.conn, [graph.ids["c0"]], max_hops=2)
    assert {h.node_id for h in hits if not h.pruned} == {graph.ids[f"c{i}"] for i in range(3)}
    assert max(h.hop for h in hits) == 2
    assert [(h.node_id, h.hop) for h in traverse(graph.conn, [graph.ids["c0"]], max_hops=0)] == [(graph.ids["c0"], 0)]
    # The server cap: at most 4 hops whatever the policy says.
    assert max(h.hop for h in traverse(graph.conn, [graph.ids["c0"]], max_hops=50)) == 4


def hub(g: Graph, n: int = 50) -> None:
    g.node("seed", embedding=[1, 0])
    g.node("hub", "concept")
    g.edge("seed", "hub", "mentions", 0.6)
    for i in range(n):
        # Similarity to the query falls with i, so the best neighbours are known.
        g.node(f"n{i}", embedding=[math.cos(i / n), math.sin(i / n)])
        g.edge(f"n{i}", "hub", "mentions", 0.6)


def test_fan_out_caps_neighbours_expanded_per_node(graph: Graph) -> None:
    hub(graph)
    hits = traverse(graph.conn, [graph.ids["seed"]], "[1,0]", fan_out=10, max_hops=2)
    second = [h for h in hits if h.hop == 2]
    assert len([h for h in second if not h.pruned]) == 10
    assert {h.node_id for h in second if not h.pruned} == {graph.ids[f"n{i}"] for i in range(10)}
    over = [h for h in second if h.pruned]
    assert over and all(h.prune_reason and h.prune_reason.startswith("over fan_out") for h in over)
    assert all(h.path[:2] == [graph.ids["seed"], graph.ids["hub"]] for h in second)


def test_only_the_strongest_edges_of_a_node_are_scored(graph: Graph) -> None:
    # Twice fan_out edges are read per expanded node, strongest first: the third, weakest edge's
    # end would score best (it alone is like the query) but is never read.
    graph.node("seed", embedding=[1, 0])
    for name, weight, embedding in (("strong", 0.9, [-1, 0]), ("second", 0.8, [-1, 0.1]), ("weak", 0.1, [1, 0])):
        graph.node(name, embedding=embedding)
        graph.edge("seed", name, "next", weight)
    hits = traverse(graph.conn, [graph.ids["seed"]], "[1,0]", fan_out=1, max_hops=1)
    assert graph.ids["weak"] not in {h.node_id for h in hits}
    assert set(kept(hits)) == {graph.ids["seed"], graph.ids["second"]}
    wide = traverse(graph.conn, [graph.ids["seed"]], "[1,0]", fan_out=2, max_hops=1)
    assert set(kept(wide)) == {graph.ids["seed"], graph.ids["weak"], graph.ids["second"]}


def test_hub_concepts_score_below_rare_ones(graph: Graph) -> None:
    hub(graph, 30)
    graph.node("rare", "concept")
    graph.edge("seed", "rare", "mentions", 0.6)
    hits = kept(traverse(graph.conn, [graph.ids["seed"]], max_hops=1))
    assert hits[graph.ids["rare"]].score > hits[graph.ids["hub"]].score


def test_the_hub_penalty_counts_mentions_as_place_concepts_last_counted_them(graph: Graph) -> None:
    """A concept's hop score is divided by ln(e + the chunks mentioning it): as
    tortus.place_concepts counted them (run by the index step), or counted by the walk for a
    concept it has not counted; mentions added since count from the next placement."""
    hub(graph, 30)  # the seed and 30 chunks mention the hub
    def weighted() -> float:  # the hub's hop score times its penalty: the same whatever the count
        return kept(traverse(graph.conn, [graph.ids["seed"]], max_hops=1))[graph.ids["hub"]].hop_scores[0]
    live = weighted()
    assert graph.conn.execute("select tortus.place_concepts()").fetchone() == (0,)  # no chunk placed
    assert graph.conn.execute("select mentions from tortus.node where node_id = %s",
                              [graph.ids["hub"]]).fetchone() == (31,)
    assert weighted() == pytest.approx(live)
    for i in range(30):
        graph.node(f"late{i}")
        graph.edge(f"late{i}", "hub", "mentions", 0.6)
    assert weighted() == pytest.approx(live)  # 31 until the concepts are placed again
    graph.conn.execute("select tortus.place_concepts()")
    assert weighted() == pytest.approx(live * math.log(math.e + 31) / math.log(math.e + 61))
    graph.conn.execute("delete from tortus.edge where dst = %s and type = 'mentions' and src <> %s",
                       [graph.ids["hub"], graph.ids["seed"]])
    graph.conn.execute("select tortus.place_concepts()")
    assert graph.conn.execute("select mentions from tortus.node where node_id = %s",
                              [graph.ids["hub"]]).fetchone() == (1,)
    graph.conn.execute("delete from tortus.edge where dst = %s", [graph.ids["hub"]])
    graph.conn.execute("select tortus.place_concepts()")
    assert graph.conn.execute("select mentions from tortus.node where node_id = %s",
                              [graph.ids["hub"]]).fetchone() == (None,)


def test_max_nodes_bounds_kept_and_pruned_rows(graph: Graph) -> None:
    hub(graph)
    hits = traverse(graph.conn, [graph.ids["seed"]], "[1,0]", max_nodes=5, max_hops=3)
    assert len([h for h in hits if not h.pruned]) == 5
    pruned = [h for h in hits if h.pruned]
    assert 0 < len(pruned) <= 5
    assert any(h.prune_reason == "over max_nodes budget (5)" for h in pruned)


def test_denied_edge_type_is_not_followed_and_is_reported(graph: Graph) -> None:
    chain(graph)
    ids = graph.ids
    hits = traverse(graph.conn, [ids["A"]], max_hops=3, edge_types_deny=["depends_on"])
    assert set(kept(hits)) == {ids["A"], ids["Ledger Service"]}
    (vault,) = [h for h in hits if h.node_id == ids["Key Vault"]]
    assert vault.pruned and vault.prune_reason == "edge type depends_on is in edge_types_deny"
    assert vault.edge_types == ["mentions", "depends_on"]
    allowed = traverse(graph.conn, [ids["A"]], max_hops=3, edge_types_allow=["mentions"])
    assert set(kept(allowed)) == {ids["A"], ids["Ledger Service"]}
    assert any(h.prune_reason == "edge type depends_on is not in edge_types_allow" for h in allowed)


def test_blocked_edges_are_not_read_when_not_reported(graph: Graph) -> None:
    chain(graph)
    ids = graph.ids
    reported = traverse(graph.conn, [ids["A"]], max_hops=3, edge_types_deny=["depends_on"])
    quiet = traverse(graph.conn, [ids["A"]], max_hops=3, edge_types_deny=["depends_on"], report_blocked=False)
    assert kept(quiet).keys() == kept(reported).keys() == {ids["A"], ids["Ledger Service"]}
    assert any(h.prune_reason == "edge type depends_on is in edge_types_deny" for h in reported)
    assert not any(h.pruned for h in quiet)


def portals(g: Graph) -> None:
    """pay: A; ops: B; sec: C. Portals A -> B -> C and a shared concept A, B -mentions-> Key Vault."""
    g.node("A", subgraphs=["pay"])
    g.node("B", subgraphs=["ops"])
    g.node("C", subgraphs=["sec"])
    g.node("Key Vault", "concept", subgraphs=["pay", "ops"])
    g.edge("A", "Key Vault", "mentions", 0.6)
    g.edge("B", "Key Vault", "mentions", 0.6)
    g.portal("A", "B", "pay", "ops", "both mention Key Vault (2 chunks mention it)", 0.8)
    g.portal("B", "C", "ops", "sec", "both mention Ledger (2 chunks mention it)", 0.8)


def test_portal_hop_is_taken_and_counted_against_the_budget(graph: Graph) -> None:
    portals(graph)
    ids = graph.ids
    hits = traverse(graph.conn, [ids["A"]], max_hops=3, max_portal_hops=1)
    b = kept(hits)[ids["B"]]
    assert (b.hop, b.edge_types, b.directions) == (1, ["portal"], ["portal"])
    assert b.reasons == ["portal: both mention Key Vault (2 chunks mention it) (w=0.8)"]
    (c,) = [h for h in hits if h.node_id == ids["C"]]
    assert c.pruned and c.prune_reason == "portal budget spent (max_portal_hops 1)"
    two = kept(traverse(graph.conn, [ids["A"]], max_hops=3, max_portal_hops=2))
    assert two[ids["C"]].directions == ["portal", "portal"]
    none = traverse(graph.conn, [ids["A"]], max_hops=3, max_portal_hops=0)
    assert all("portal" not in h.directions for h in none if not h.pruned)
    assert kept(none)[ids["B"]].edge_types == ["mentions", "mentions"]


def test_local_only_stays_in_the_seeds_subgraphs_and_takes_no_portal(graph: Graph) -> None:
    portals(graph)
    ids = graph.ids
    hits = traverse(graph.conn, [ids["A"]], max_hops=3, local_only=True)
    assert set(kept(hits)) == {ids["A"], ids["Key Vault"]}
    reasons = {h.node_id: h.prune_reason for h in hits if h.pruned}
    assert reasons[ids["B"]] in ("portal not taken: local_only", "outside the seeds' subgraphs (local_only)")
    assert all("portal" not in h.directions for h in hits if not h.pruned)
    only_ops = traverse(graph.conn, [ids["B"]], max_hops=3, subgraphs=["ops"])
    assert set(kept(only_ops)) == {ids["B"], ids["Key Vault"]}
    assert {h.prune_reason for h in only_ops if h.pruned} == {"outside the allowed subgraphs"}


def test_torus_radius_prunes_far_nodes(graph: Graph) -> None:
    graph.node("seed", at=(0.0, 0.0))
    graph.node("near", at=(6.2, 0.1))  # across the wrap: about 0.12 away
    graph.node("far", at=(3.0, 3.0))
    graph.node("Topic", "concept")  # no coordinates: never gated by the radius
    for other in ("near", "far"):
        graph.edge("seed", other, "related_to", 0.9)
    graph.edge("seed", "Topic", "mentions")
    hits = traverse(graph.conn, [graph.ids["seed"]], max_hops=1, torus_radius=0.5)
    assert set(kept(hits)) == {graph.ids["seed"], graph.ids["near"], graph.ids["Topic"]}
    (far,) = [h for h in hits if h.pruned]
    assert far.node_id == graph.ids["far"]
    assert far.prune_reason is not None and far.prune_reason.startswith("outside torus_radius (distance 4.")
    ungated = kept(traverse(graph.conn, [graph.ids["seed"]], max_hops=1))
    assert ungated[graph.ids["near"]].score > ungated[graph.ids["far"]].score


def test_query_similarity_ranks_neighbours_and_tolerates_other_dimensions(graph: Graph) -> None:
    graph.node("seed")
    graph.node("close", embedding=[1, 0, 0])
    graph.node("away", embedding=[-1, 0, 0])
    graph.node("odd", embedding=[1, 0])
    for other in ("close", "away", "odd"):
        graph.edge("seed", other, "next", 0.5)
    hits = kept(traverse(graph.conn, [graph.ids["seed"]], "[1,0,0]", max_hops=1))
    assert hits[graph.ids["close"]].score > hits[graph.ids["odd"]].score > hits[graph.ids["away"]].score


def test_min_score_prunes_weak_candidates(graph: Graph) -> None:
    chain(graph)
    hits = traverse(graph.conn, [graph.ids["A"]], max_hops=3, min_score=0.1)
    assert set(kept(hits)) == {graph.ids["A"], graph.ids["Ledger Service"]}
    assert any(h.prune_reason and h.prune_reason.startswith("score ") for h in hits)


def test_bad_policy_is_refused_with_the_key_named(session_conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="unknown traversal policy key.*max_hop"):
        session_conn.execute("select tortus.traverse_policy('{\"max_hop\": 2}')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="fan_out must be an integer"):
        session_conn.execute("select tortus.traverse_policy('{\"fan_out\": 2.5}')")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="edge_types_deny must be an array of strings"):
        session_conn.execute('select tortus.traverse_policy(\'{"edge_types_deny": "mentions"}\')')
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="report_blocked must be true or false"):
        session_conn.execute('select tortus.traverse_policy(\'{"report_blocked": "no"}\')')
    row = session_conn.execute(
        'select tortus.traverse_policy(\'{"max_hops": 9, "fan_out": 1000, "max_nodes": 99999}\')'
    ).fetchone()
    assert row is not None
    assert (row[0]["max_hops"], row[0]["fan_out"], row[0]["max_nodes"]) == (4, 100, 2000)


def test_other_tenants_graph_is_invisible_even_by_id(conn: psycopg.Connection) -> None:
    tenants.create_tenant(conn, "a")
    tenants.create_tenant(conn, "b")
    with tenant_scope(conn, "b"):
        g = Graph(conn)
        chain(g)
        assert len(kept(traverse(conn, list(g.ids.values()), max_hops=3))) == 4
    with tenant_scope(conn, "a"):
        assert traverse(conn, list(g.ids.values()), max_hops=3) == []
        assert ppr(conn, list(g.ids.values())) == {}
    # The owner role passes row-level security for every tenant (admin policy): only the
    # functions' own tenant filter keeps b's graph out of a's walk.
    assert conn.execute("select count(*) from tortus.node where tenant_id = 'b'").fetchone() == (4,)
    conn.execute("select set_config('tortus.tenant', 'a', true)")
    assert traverse(conn, list(g.ids.values()), max_hops=3) == []


# -- personalized PageRank ---------------------------------------------------------------------


def line(g: Graph, n: int) -> list[int]:
    for i in range(n):
        g.node(f"l{i}")
    for i in range(n - 1):
        g.edge(f"l{i}", f"l{i + 1}", "next", 0.5)
    return [g.ids[f"l{i}"] for i in range(n)]


def test_ppr_scores_sum_to_one_and_peak_at_the_seed(graph: Graph) -> None:
    nodes = line(graph, 9)
    scores = ppr(graph.conn, [nodes[4]])
    assert sum(scores.values()) == pytest.approx(1.0)
    assert max(scores, key=scores.__getitem__) == nodes[4]
    # Symmetric around the seed and falling with distance.
    assert scores[nodes[3]] == pytest.approx(scores[nodes[5]])
    assert scores[nodes[4]] > scores[nodes[3]] > scores[nodes[2]] > scores[nodes[1]]


def reference_ppr(
    edges: list[tuple[int, int, float]], seeds: list[int], damping: float, iterations: int
) -> dict[int, float]:
    """Power iteration in Python: undirected weighted graph, unsent mass restarts at the seeds."""
    out: defaultdict[int, defaultdict[int, float]] = defaultdict(lambda: defaultdict(float))
    for a, b, w in edges:
        out[a][b] += w
        out[b][a] += w
    scores = {x: 1 / len(seeds) for x in seeds}
    for _ in range(iterations):
        new: defaultdict[int, float] = defaultdict(float)
        sent = 0.0
        for u, s in scores.items():
            total = sum(out[u].values())
            for v, w in out[u].items():
                new[v] += damping * s * w / total
            sent += damping * s if total else 0.0
        for x in seeds:
            new[x] += (1 - sent) / len(seeds)
        scores = dict(new)
    return scores


def test_ppr_matches_a_reference_power_iteration(graph: Graph) -> None:
    rng = random.Random(3)
    nodes = [graph.node(f"r{i}", rng.choice(["chunk", "concept"])) for i in range(14)]
    edges: list[tuple[int, int, float]] = []
    for _ in range(30):
        a, b = rng.sample(range(14), 2)
        type_ = rng.choice(EDGE_TYPES)
        w = rng.choice([0.125, 0.25, 0.5, 0.75, 1.0])  # exact as real
        try:
            with graph.conn.transaction():
                graph.edge(f"r{a}", f"r{b}", type_, w)
        except psycopg.errors.UniqueViolation:
            continue
        edges.append((nodes[a], nodes[b], w))
    seeds = [nodes[0], nodes[5]]
    got = ppr(graph.conn, seeds, damping=0.8, iterations=25, max_frontier=1000)
    want = reference_ppr(edges, seeds, 0.8, 25)
    assert set(got) == set(want)
    for node_id, score in want.items():
        assert got[node_id] == pytest.approx(score, rel=1e-9, abs=1e-12)


def test_ppr_gives_no_score_to_unreachable_nodes(graph: Graph) -> None:
    nodes = line(graph, 4)
    graph.node("x")
    graph.node("y")
    graph.edge("x", "y", "related_to")
    scores = ppr(graph.conn, [nodes[0]], iterations=30)
    assert set(scores) == set(nodes)
    assert sum(scores.values()) == pytest.approx(1.0)


def test_ppr_frontier_cap_is_respected(graph: Graph) -> None:
    hub(graph, 40)
    scores = ppr(graph.conn, [graph.ids["seed"]], max_frontier=10)
    assert len(scores) == 10
    assert sum(scores.values()) == pytest.approx(1.0)
    assert graph.ids["seed"] in scores and graph.ids["hub"] in scores
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="damping"), graph.conn.transaction():
        ppr(graph.conn, [graph.ids["seed"]], damping=1.0)


# -- property: every budget in a random policy holds on a random graph ---------------------------

SUBGRAPHS = ("s1", "s2", "s3")


@st.composite
def random_graphs(draw: st.DrawFn) -> dict[str, object]:
    n = draw(st.integers(2, 14))
    nodes = []
    for i in range(n):
        nodes.append(
            {
                "key": f"k{i}",
                "kind": draw(st.sampled_from(["chunk", "concept"])),
                "at": draw(st.none() | st.tuples(st.floats(0, 6.28), st.floats(0, 6.28))),
                "embedding": draw(st.none() | st.lists(st.floats(-1, 1), min_size=2, max_size=3)),
                "subgraphs": draw(st.lists(st.sampled_from(SUBGRAPHS), unique=True, max_size=2)),
            }
        )
    pairs = st.tuples(st.integers(0, n - 1), st.integers(1, n - 1)).map(lambda p: (p[0], (p[0] + p[1]) % n))
    edges = draw(
        st.lists(
            st.tuples(
                pairs,
                st.sampled_from(EDGE_TYPES),
                st.floats(0, 1, width=32, exclude_min=True),
                st.floats(0, 1, width=32),
            ),
            min_size=n // 2,
            max_size=3 * n,
            unique_by=lambda e: (e[0], e[1]),
        )
    )
    portal_pairs = draw(st.lists(pairs, max_size=n, unique=True))
    portal_rows = []
    for a, b in portal_pairs:
        sa, sb = nodes[a]["subgraphs"], nodes[b]["subgraphs"]
        if sa and sb and sa[0] != sb[0]:
            portal_rows.append((a, b, sa[0], sb[0]))
    policy = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "max_hops": st.integers(0, 6),
                "fan_out": st.integers(1, 4),
                "beam_width": st.integers(1, 4),
                "max_nodes": st.integers(1, 12),
                "max_portal_hops": st.integers(0, 2),
                "edge_types_allow": st.lists(st.sampled_from((*EDGE_TYPES, "portal")), unique=True, min_size=3),
                "edge_types_deny": st.lists(st.sampled_from((*EDGE_TYPES, "portal")), unique=True, max_size=2),
                "local_only": st.booleans(),
                "subgraphs": st.lists(st.sampled_from(SUBGRAPHS), unique=True, min_size=1),
                "torus_radius": st.floats(0.3, 4.5),
                "min_score": st.floats(0, 0.02),
            },
        )
    )
    seeds = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    query = draw(st.none() | st.lists(st.floats(-1, 1), min_size=2, max_size=3))
    return {"nodes": nodes, "edges": edges, "portals": portal_rows, "policy": policy, "seeds": seeds, "query": query}


def write_graph(conn: psycopg.Connection, spec: dict[str, object]) -> list[int]:
    nodes: list[dict[str, object]] = spec["nodes"]  # type: ignore[assignment]
    conn.execute(
        "insert into tortus.subgraph (tenant_id, name) select tortus.current_tenant(), unnest(%s::text[])",
        [list(SUBGRAPHS)],
    )
    rows = conn.execute(
        "insert into tortus.node (tenant_id, kind, key, label, theta, phi, embedding, embedding_model) "
        "select tortus.current_tenant(), k, y, y, t, p, e::vector, case when e is not null then 'test' end "
        "from unnest(%s::text[], %s::text[], %s::float8[], %s::float8[], %s::text[]) as x(k, y, t, p, e) "
        "returning key, node_id",
        [
            [x["kind"] for x in nodes],
            [x["key"] for x in nodes],
            [x["at"][0] if x["at"] else None for x in nodes],  # type: ignore[index]
            [x["at"][1] if x["at"] else None for x in nodes],  # type: ignore[index]
            [str(x["embedding"]) if x["embedding"] is not None else None for x in nodes],
        ],
    ).fetchall()
    by_key = dict(rows)
    ids = [by_key[x["key"]] for x in nodes]
    members = [(ids[i], s) for i, x in enumerate(nodes) for s in x["subgraphs"]]  # type: ignore[attr-defined]
    conn.execute(
        "insert into tortus.membership (tenant_id, node_id, subgraph) "
        "select tortus.current_tenant(), n, s from unnest(%s::bigint[], %s::text[]) as x(n, s)",
        [[m[0] for m in members], [m[1] for m in members]],
    )
    edges: list[tuple[tuple[int, int], str, float, float]] = spec["edges"]  # type: ignore[assignment]
    conn.execute(
        "insert into tortus.edge (tenant_id, src, dst, type, weight, confidence) "
        "select tortus.current_tenant(), s, d, y, w, c "
        "from unnest(%s::bigint[], %s::bigint[], %s::text[], %s::real[], %s::real[]) as x(s, d, y, w, c)",
        [
            [ids[e[0][0]] for e in edges],
            [ids[e[0][1]] for e in edges],
            [e[1] for e in edges],
            [e[2] for e in edges],
            [e[3] for e in edges],
        ],
    )
    portal_rows: list[tuple[int, int, str, str]] = spec["portals"]  # type: ignore[assignment]
    conn.execute(
        "insert into tortus.portal (tenant_id, src, dst, src_subgraph, dst_subgraph, kind, reason) "
        "select tortus.current_tenant(), s, d, a, b, 'shared_concept', 'test' "
        "from unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[]) as x(s, d, a, b)",
        [
            [ids[p[0]] for p in portal_rows],
            [ids[p[1]] for p in portal_rows],
            [p[2] for p in portal_rows],
            [p[3] for p in portal_rows],
        ],
    )
    return ids


def check_budgets(spec: dict[str, object], ids: list[int], hits: list[Hit]) -> None:
    policy: dict[str, object] = spec["policy"]  # type: ignore[assignment]
    max_hops = min(int(policy.get("max_hops", 2)), 4)  # type: ignore[call-overload]
    fan_out = int(policy.get("fan_out", 25))  # type: ignore[call-overload]
    beam_width = int(policy.get("beam_width", 50))  # type: ignore[call-overload]
    max_nodes = int(policy.get("max_nodes", 200))  # type: ignore[call-overload]
    max_portal_hops = int(policy.get("max_portal_hops", 1))  # type: ignore[call-overload]
    allow = policy.get("edge_types_allow")
    deny = set(policy.get("edge_types_deny", ()))  # type: ignore[call-overload]
    nodes: list[dict[str, object]] = spec["nodes"]  # type: ignore[assignment]
    index = {node_id: i for i, node_id in enumerate(ids)}
    member = {ids[i]: set(x["subgraphs"]) for i, x in enumerate(nodes)}  # type: ignore[call-overload]
    links: set[tuple[int, int, str, str]] = set()
    for (a, b), type_, _, _ in spec["edges"]:  # type: ignore[attr-defined]
        links |= {(ids[a], ids[b], type_, "out"), (ids[b], ids[a], type_, "in")}
    for a, b, _, _ in spec["portals"]:  # type: ignore[attr-defined]
        links.add((ids[a], ids[b], "portal", "portal"))
    seeds = {ids[i] for i in spec["seeds"]}  # type: ignore[attr-defined]

    good = [h for h in hits if not h.pruned]
    bad = [h for h in hits if h.pruned]
    assert len(good) <= max_nodes and len(bad) <= max_nodes
    assert len({h.node_id for h in hits}) == len(hits)  # one row per candidate
    assert all(h.prune_reason for h in bad) and all(h.prune_reason is None for h in good)
    by_id = {h.node_id: h for h in good}
    children: Counter[int] = Counter()
    for h in hits:
        assert h.node_id in index and h.hop <= max_hops
        assert len(h.path) == h.hop + 1 and h.path[-1] == h.node_id and h.path[0] in seeds
        assert len(h.edge_types) == len(h.directions) == len(h.hop_scores) == len(h.reasons) == h.hop
        for (a, b), type_, direction in zip(
            zip(h.path, h.path[1:], strict=False), h.edge_types, h.directions, strict=True
        ):
            assert (a, b, type_, direction) in links
        if h.hop:
            parent = by_id[h.path[-2]]  # every parent is a kept row, on the same path
            assert parent.path == h.path[:-1] and parent.hop == h.hop - 1
            if not h.pruned:
                children[parent.node_id] += 1
    assert all(count <= fan_out for count in children.values())
    expanded: defaultdict[int, set[int]] = defaultdict(set)
    for h in hits:
        if h.hop:
            expanded[h.hop].add(h.path[-2])
    assert all(len(parents) <= beam_width for parents in expanded.values())
    seed_subgraphs = set().union(*(member[s] for s in by_id if by_id[s].hop == 0)) if good else set()
    for h in good:
        assert h.directions.count("portal") <= max_portal_hops
        assert not deny & set(h.edge_types)
        if allow is not None:
            assert set(h.edge_types) <= set(allow)  # type: ignore[call-overload]
        if policy.get("subgraphs") is not None:
            assert member[h.node_id] & set(policy["subgraphs"])  # type: ignore[call-overload]
        if policy.get("local_only"):
            assert "portal" not in h.directions
            assert not member[h.node_id] or member[h.node_id] & seed_subgraphs
        if policy.get("torus_radius") is not None and h.torus_distance is not None:
            assert h.torus_distance <= policy["torus_radius"] + 1e-9  # type: ignore[operator]
        if policy.get("min_score") is not None and h.hop:
            assert h.score >= policy["min_score"]  # type: ignore[operator]
        assert 0 <= h.score <= 1 and all(0 <= s <= 1 for s in h.hop_scores)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_every_budget_in_the_policy_holds(session_conn: psycopg.Connection, spec: dict[str, object]) -> None:
    with session_conn.transaction(force_rollback=True):
        tenants.create_tenant(session_conn, "prop")
        with tenant_scope(session_conn, "prop"):
            ids = write_graph(session_conn, spec)
            query = None if spec["query"] is None else str(spec["query"])
            seeds = [ids[i] for i in spec["seeds"]]  # type: ignore[attr-defined]
            hits = traverse(session_conn, seeds, query, **spec["policy"])  # type: ignore[arg-type]
            check_budgets(spec, ids, hits)
            scores = ppr(session_conn, seeds, max_frontier=5)
            assert len(scores) <= 5 and sum(scores.values()) == pytest.approx(1.0)
            reachable = defaultdict(set)
            for (a, b), *_ in spec["edges"]:  # type: ignore[attr-defined]
                reachable[ids[a]].add(ids[b])
                reachable[ids[b]].add(ids[a])
            seen, todo = set(seeds), list(seeds)
            while todo:
                for nxt in reachable[todo.pop()] - seen:
                    seen.add(nxt)
                    todo.append(nxt)
            assert set(scores) <= seen
