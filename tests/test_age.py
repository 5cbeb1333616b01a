"""The Apache AGE backend: the tenant's graph mirrored into AGE, the walk read through Cypher
with the same paths as the SQL walk, analysts' Cypher, and clear errors where AGE is absent.

The tests that need AGE skip where the server lacks it (the embedded server ships without it);
the others run everywhere."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from importlib.resources import files
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from tortus_pg import age, migrate
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.engine import answer
from tortus_pg.errors import InvalidInput
from tortus_pg.indexing import build_index
from tortus_pg.ingest import pipeline, sources
from tortus_pg.ingest.pipeline import IngestOptions, ingest_bytes
from tortus_pg.policy import TraversalPolicy
from tortus_pg.tenants import create_tenant, delete_tenant

TENANT, OTHER = "age-demo", "age-other"
EMBEDDER = HashEmbedder(384)
QUESTIONS = [json.loads(line)["question"] for line in
             (files("tortus_pg") / "demo" / "golden.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
# Budgets and filters the walk honours: defaults, tight budgets that prune, type filters, portals.
POLICIES: list[dict[str, Any]] = [
    {"max_hops": 2},
    {"max_hops": 3, "fan_out": 3, "beam_width": 4, "max_nodes": 40, "max_portal_hops": 1},
    {"max_hops": 2, "edge_types_allow": ["mentions", "depends_on", "portal"], "min_score": 0.01},
    {"max_hops": 3, "edge_types_deny": ["next", "related_to"], "local_only": True},
]
_WALK = """
select node_id, hop, path, edge_types, directions, reasons, score, torus_distance, pruned, prune_reason
from tortus.traverse(%s::bigint[], null, %s) order by pruned, hop, score desc, node_id
"""


def _has_age(pg_server: Any) -> bool:
    with psycopg.connect(pg_server.admin_url("postgres")) as conn:
        return conn.execute("select 1 from pg_available_extensions where name = 'age'").fetchone() is not None


@pytest.fixture(scope="module")
def age_url(pg_server: Any) -> Iterator[str]:
    """A database with AGE holding the demo corpus (hash embedder) and its mirror."""
    if not _has_age(pg_server):
        pytest.skip("Apache AGE is not installed on this PostgreSQL server (the embedded server ships "
                    "without it); build or install AGE there to run the AGE backend's tests")
    url: str = pg_server.create_database("tortus_age")
    with psycopg.connect(pg_server.admin_url("tortus_age"), autocommit=True) as admin:
        admin.execute("create extension age")
        admin.execute(sql.SQL("grant usage on schema ag_catalog to {}").format(sql.Identifier(pg_server.owner_role)))
    migrate.upgrade(url)
    with connect(url) as conn:
        for tenant in (TENANT, OTHER):
            create_tenant(conn, tenant)
        conn.commit()
        specs = sources.from_manifest(sources.demo_manifest(), uri_base="demo")
        assert not pipeline.ingest(conn, TENANT, specs, EMBEDDER).failed
        build_index(conn, TENANT)
        age.sync(conn, TENANT)
        conn.commit()
    yield url
    pg_server.drop_database("tortus_age")


@pytest.fixture
def owner(age_url: str) -> Iterator[psycopg.Connection]:
    with connect(age_url) as conn:
        yield conn


def _seed_sets(conn: psycopg.Connection) -> list[list[int]]:
    chunks = [r[0] for r in conn.execute("select node_id from tortus.node where kind = 'chunk' order by node_id")]
    concepts = [r[0] for r in conn.execute(
        "select node_id from tortus.node where kind <> 'chunk' order by node_id")]
    return [chunks[:3], chunks[10:16], concepts[:4], chunks[40:42] + concepts[20:22]]


def test_the_walk_through_cypher_finds_the_same_paths_as_the_sql_walk(owner: psycopg.Connection) -> None:
    with tenant_scope(owner, TENANT):
        for seeds in _seed_sets(owner):
            for policy in POLICIES:
                on_tables = owner.execute(_WALK, [seeds, Jsonb(policy)]).fetchall()
                on_age = owner.execute(_WALK, [seeds, Jsonb({**policy, "traversal": "age"})]).fetchall()
                assert on_age == on_tables, (seeds, policy)
                assert any(row[8] for row in on_tables) or policy == POLICIES[0]  # budgets did prune


def test_answers_are_the_same_with_either_traversal(owner: psycopg.Connection) -> None:
    with tenant_scope(owner, TENANT):
        for question in QUESTIONS[:12]:
            on_tables = answer(owner, question, embedder=EMBEDDER, store=False)
            on_age = answer(owner, question, embedder=EMBEDDER, store=False,
                            policy=TraversalPolicy(traversal="age"))
            assert (on_age.answer, on_age.path, [e.node_id for e in on_age.evidence]) == \
                (on_tables.answer, on_tables.path, [e.node_id for e in on_tables.evidence]), question


def _mirror_counts(conn: psycopg.Connection, tenant: str) -> tuple[int, int]:
    with tenant_scope(conn, tenant, role="analyst"):
        nodes = conn.execute("select * from tortus.cypher('MATCH (n:Node) RETURN count(n)')").fetchone()
        edges = conn.execute("select * from tortus.cypher('MATCH ()-[e]->() RETURN count(e)')").fetchone()
        graph = conn.execute("select (select count(*) from tortus.node), (select count(*) from tortus.edge) "
                             "+ (select count(*) from tortus.portal)").fetchone()
    assert nodes and edges and graph
    assert (nodes[0], edges[0]) == graph
    return int(nodes[0]), int(edges[0])


def test_ingest_update_and_removal_keep_the_mirror_in_step(owner: psycopg.Connection) -> None:
    before = _mirror_counts(owner, TENANT)
    options = IngestOptions()
    doc = b"# Refund Service\n\nThe Refund Service depends on the Ledger Service for every refund.\n"
    ingest_bytes(owner, TENANT, "refunds.md", doc, EMBEDDER, options, uri="test/refunds.md")
    grown = _mirror_counts(owner, TENANT)
    assert grown[0] > before[0] and grown[1] > before[1]
    changed = doc.replace(b"Ledger Service", b"Ledger Service and the Event Bus")
    ingest_bytes(owner, TENANT, "refunds.md", changed, EMBEDDER, options, uri="test/refunds.md")
    _mirror_counts(owner, TENANT)
    assert pipeline.remove(owner, TENANT, "test/refunds.md")
    assert _mirror_counts(owner, TENANT) == before
    assert age.sync(owner, TENANT).added == 0, "already in step"


def test_analysts_read_only_their_tenants_mirror_and_never_write_it(owner: psycopg.Connection) -> None:
    with tenant_scope(owner, TENANT, role="analyst"):
        rows = owner.execute("select * from tortus.cypher(%s, %s)", [
            "MATCH (s:Node {label: $name})-[:depends_on]->(t:Node) RETURN {service: s.label, needs: t.label}",
            Jsonb({"name": "Checkout Gateway"})]).fetchall()
        assert rows and all(r[0]["service"] == "Checkout Gateway" for r in rows)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="read-only"), owner.transaction():
            owner.execute("select * from tortus.cypher('MATCH (n:Node) DETACH DELETE n')")
        # AGE lets Cypher call SQL functions; this runs as the owner, so only Cypher's own are allowed.
        for call in ("RETURN tortus.rebuild_portals()", "MATCH (n:Node) RETURN pg_catalog.upper(n.label)",
                     "RETURN current_user()"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="Cypher's own functions"), \
                    owner.transaction():
                owner.execute("select * from tortus.cypher(%s)", [call])
        assert owner.execute("select * from tortus.cypher('RETURN toUpper(\"count(x)\")')").fetchall() == \
            [("COUNT(X)",)]
    with tenant_scope(owner, OTHER, role="analyst"), \
            pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="no Apache AGE mirror"), \
            owner.transaction():
        owner.execute("select * from tortus.cypher('MATCH (n) RETURN n.id')")
    graph = owner.execute("select tortus.age_graph(%s)", [TENANT]).fetchone()
    assert graph is not None
    with tenant_scope(owner, OTHER), \
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="its own mirror"), owner.transaction():
        owner.execute("select * from tortus.age_neighbours(%s, array[1])", [TENANT])
    with tenant_scope(owner, OTHER), pytest.raises(psycopg.errors.InsufficientPrivilege), owner.transaction():
        owner.execute(sql.SQL("select count(*) from {}.{}").format(sql.Identifier(graph[0]), sql.Identifier("Node")))


def test_without_age_the_errors_say_what_to_do(fresh_db: Any) -> None:
    url = fresh_db()
    migrate.upgrade(url)
    with connect(url, autocommit=True) as conn:
        create_tenant(conn, TENANT)
        assert not age.available(conn) and age.follow(conn, TENANT) is None
        with pytest.raises(age.AgeUnavailable, match="CREATE EXTENSION age"):
            age.sync(conn, TENANT)
        with tenant_scope(conn, TENANT), pytest.raises(psycopg.errors.InvalidParameterValue, match='"sql" or "age"'):
            conn.execute("""select tortus.traverse_policy('{"traversal": "cypher"}')""")
        with tenant_scope(conn, TENANT), pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="mirror"):
            conn.execute("""select * from tortus.traverse(array[1], null, '{"traversal": "age"}')""")
        with tenant_scope(conn, TENANT), pytest.raises(InvalidInput, match="graph sync-age"):
            answer(conn, "What does the Checkout Gateway depend on?", embedder=EMBEDDER, store=False,
                   policy=replace(TraversalPolicy(), traversal="age"))


def test_the_cypher_examples_in_the_sql_reference_return_rows(owner: psycopg.Connection) -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "sql.md").read_text(encoding="utf-8")
    examples = re.findall(r"```sql age\n(.*?)```", doc, flags=re.S)
    assert len(examples) >= 3
    with tenant_scope(owner, TENANT, role="analyst"):
        for example in examples:
            assert owner.execute(example).fetchall(), example


def test_deleting_a_tenant_drops_its_mirror(owner: psycopg.Connection) -> None:
    create_tenant(owner, "age-gone")
    owner.commit()
    ingest_bytes(owner, "age-gone", "note.md", b"# Note\n\nThe Note Service depends on the Ledger Service.\n",
                 EMBEDDER, IngestOptions())
    age.sync(owner, "age-gone")
    assert age.mirrored(owner, "age-gone")
    delete_tenant(owner, "age-gone")
    assert not age.mirrored(owner, "age-gone")
