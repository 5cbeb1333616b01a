"""Evidence-following visibility: a source open only to some groups hides, from every other caller,
the source, its chunks and spans, the edges it alone supports, the concepts only it mentions,
and the traces of questions asked by its readers; what other sources also support stays visible,
with their evidence only. Keys and bound logins carry the groups; a caller restricted to groups
writes nothing of the graph, and cannot borrow another key's groups."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from tortus_pg.api.app import create_app

from tortus_pg import migrate, tenants
from tortus_pg.config import load_settings
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.errors import InvalidInput
from tortus_pg.ingest.pipeline import IngestOptions, ingest_bytes

from .conftest import serving

TENANT = "vis"
OPEN = "# Atlas Service\n\nThe Atlas Service depends on the Key Store. The Atlas Service runs in Frankfurt.\n"
CLOSED = ("# Atlas Ownership\n\nThe Atlas Service is owned by the Payroll Team. "
          "The Payroll Team approves the Salary Ledger.\n")
SECRET_WORDS = ("Payroll", "Salary Ledger")


@dataclass
class World:
    owner: str
    keys: dict[str, str]  # full (every group), hr, fin; writer (every group, may ingest)
    login: Callable[[str], str]  # the URL of a named login
    logins: dict[str, str]  # analyst bound with groups fin; app bound with groups hr


@pytest.fixture
def world(fresh_db: Callable[..., str]) -> Iterator[World]:
    url = fresh_db()
    migrate.upgrade(url)
    suffix = uuid.uuid4().hex[:8]
    logins = {"fin": f"vis_fin_{suffix}", "hr_app": f"vis_hr_{suffix}"}
    with connect(url) as conn:
        tenants.create_tenant(conn, TENANT)
        embedder = HashEmbedder(dim=384)
        ingest_bytes(conn, TENANT, "open.md", OPEN.encode(), embedder, IngestOptions())
        ingest_bytes(conn, TENANT, "closed.md", CLOSED.encode(), embedder, IngestOptions(), readers=("hr",))
        keys = {"full": tenants.create_key(conn, TENANT, ["query"]).key,
                "hr": tenants.create_key(conn, TENANT, ["query"], groups=["hr"]).key,
                "fin": tenants.create_key(conn, TENANT, ["query"], groups=["fin"]).key,
                "writer": tenants.create_key(conn, TENANT, ["query", "ingest"]).key}
        for name in logins.values():
            conn.execute(f"create role {name} login password 'pw'")
        tenants.grant_login(conn, logins["fin"], TENANT, groups=["fin"])
        tenants.grant_login(conn, logins["hr_app"], TENANT, "app", groups=["hr"])
        conn.commit()
    try:
        yield World(url, keys, lambda login: re.sub(r"//[^@/]*@", f"//{login}:pw@", url, count=1), logins)
    finally:
        with connect(url, autocommit=True) as conn:
            for name in logins.values():
                conn.execute(f"drop role {name}")


def _graph(conn: psycopg.Connection) -> dict[str, object]:
    """What the session sees of the tenant's graph."""
    def one(sql: str) -> object:
        return conn.execute(sql).fetchone()[0]  # type: ignore[index]
    return {
        "sources": sorted(r[0] for r in conn.execute("select uri from tortus.source")),
        "labels": " | ".join(r[0] for r in conn.execute("select label from tortus.node order by label")),
        "chunk_text": " ".join(r[0] for r in conn.execute("select text from tortus.node where kind = 'chunk'")),
        "spans": one("select count(*) from tortus.evidence_span"),
        "edges": one("select count(*) from tortus.edge"),
        "postings": one("select count(*) from tortus.bm25_posting where lexeme = 'payrol'"),
        "grids": one("select count(*) from tortus.torus_grid"),  # it counts every chunk, hidden ones too
    }


def _as_key(conn: psycopg.Connection, key: str) -> dict[str, object]:
    with conn.transaction(force_rollback=True):
        conn.execute("set local role tortus_app")
        assert conn.execute("select tortus.enter_tenant(%s)", [tenants.key_hash(key)]).fetchone() == (TENANT,)
        return _graph(conn)


def test_a_source_closed_to_a_group_hides_what_only_it_supports(world: World) -> None:
    with connect(world.owner) as conn:
        with tenant_scope(conn, TENANT):
            conn.execute("select tortus.rebuild_torus_grid()")
        full = _as_key(conn, world.keys["full"])
        hr = _as_key(conn, world.keys["hr"])
        fin = _as_key(conn, world.keys["fin"])
    # hr reads every source, but as a caller restricted to groups it does not see the grid.
    assert {**hr, "grids": 1} == full
    assert full["sources"] == ["closed.md", "open.md"] and fin["sources"] == ["open.md"]
    assert all(word in str(full["labels"]) + str(full["chunk_text"]) for word in SECRET_WORDS)
    assert not any(word in str(fin["labels"]) + str(fin["chunk_text"]) for word in SECRET_WORDS)
    assert "Atlas Service" in str(fin["labels"])  # the open source supports it too
    assert 0 < fin["spans"] < full["spans"] and 0 < fin["edges"] < full["edges"]  # type: ignore[operator]
    assert full["postings"] > 0 and fin["postings"] == 0  # type: ignore[operator]
    assert full["grids"] == 1 and hr["grids"] == fin["grids"] == 0


def test_a_bound_login_reads_with_its_groups_and_a_restricted_one_writes_nothing(world: World) -> None:
    with psycopg.connect(world.login(world.logins["fin"])) as conn, conn.transaction(force_rollback=True):
        conn.execute("set local role tortus_analyst")
        conn.execute("select set_config('tortus.tenant', %s, true)", [TENANT])
        assert _graph(conn)["sources"] == ["open.md"]
    with psycopg.connect(world.login(world.logins["hr_app"])) as conn:
        with conn.transaction(force_rollback=True):
            conn.execute("set local role tortus_app")
            conn.execute("select set_config('tortus.tenant', %s, true)", [TENANT])
            assert _graph(conn)["sources"] == ["closed.md", "open.md"]
        for write in ("update tortus.node set label = 'x'", "delete from tortus.edge",
                      "insert into tortus.subgraph (tenant_id, name) values (tortus.current_tenant(), 'x')",
                      "select tortus.rebuild_torus_grid()"):
            with conn.transaction(force_rollback=True):
                conn.execute("set local role tortus_app")
                conn.execute("select set_config('tortus.tenant', %s, true)", [TENANT])
                try:
                    changed = conn.execute(write).rowcount
                except psycopg.errors.InsufficientPrivilege:
                    changed = 0  # refused by the insert policy
                assert changed == 0, write


def test_another_keys_groups_cannot_be_borrowed(world: World) -> None:
    with connect(world.owner) as conn, conn.transaction(force_rollback=True):
        conn.execute("set local role tortus_app")
        conn.execute("select tortus.enter_tenant(%s)", [tenants.key_hash(world.keys["fin"])])
        conn.execute("select set_config('tortus.key_hash', %s, true)", [tenants.key_hash(world.keys["hr"])])
        assert conn.execute("select count(*) from tortus.source").fetchone() == (0,)


def test_a_key_limited_to_groups_may_only_query(world: World) -> None:
    with connect(world.owner) as conn, pytest.raises(InvalidInput, match="query scope alone"):
        tenants.create_key(conn, TENANT, ["query", "ingest"], groups=["hr"])
    with connect(world.owner) as conn, pytest.raises(InvalidInput, match="group names"):
        tenants.create_key(conn, TENANT, ["query"], groups=["no spaces"])


def test_a_walk_counts_only_the_mentions_its_caller_can_read(world: World) -> None:
    """The hub penalty of a concept mentioned in a closed source: the count stored when the
    concepts were placed (every chunk) for a full reader, the mentions it can see for a
    restricted one, so the walk's scores tell it nothing about hidden chunks."""
    walk = ("select t.hop_scores[1] from tortus.traverse(array(select node_id from tortus.node "
            "where kind = 'chunk' and text like '%%depends on the Key Store%%'), null, '{\"max_hops\": 1}') t "
            "where t.label = 'Atlas Service'")
    with connect(world.owner) as conn:
        with tenant_scope(conn, TENANT):
            conn.execute("select tortus.place_concepts()")
            stored = conn.execute("select mentions from tortus.node where label = 'Atlas Service'").fetchone()
        scores = {}
        for name in ("full", "fin"):
            with conn.transaction(force_rollback=True):
                conn.execute("set local role tortus_app")
                conn.execute("select tortus.enter_tenant(%s)", [tenants.key_hash(world.keys[name])])
                scores[name] = conn.execute(walk).fetchone()[0]  # type: ignore[index]
    assert stored == (2,)  # the open and the closed source each mention it once
    assert scores["fin"] / scores["full"] == pytest.approx(math.log(math.e + 2) / math.log(math.e + 1))


def test_answers_and_traces_follow_the_askers_groups(world: World, tmp_path: Path) -> None:
    settings = load_settings(tmp_path, environ={"TORTUS_DATABASE_URL": world.owner, "TORTUS_EMBEDDER": "hash"})
    question = {"question": "Who owns the Atlas Service?"}
    with serving(create_app(settings, pool_size=2)) as base:
        def client(key: str) -> httpx.Client:
            return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {world.keys[key]}"}, timeout=60)
        with client("hr") as hr, client("fin") as fin, client("full") as full:
            asked = {name: c.post("/api/query", json=question).json() for name, c in (("hr", hr), ("fin", fin))}
            assert "Payroll" in str(asked["hr"]) and not any(w in str(asked["fin"]) for w in SECRET_WORDS)
            trace = asked["hr"]["trace_id"]
            assert hr.get(f"/api/traces/{trace}").status_code == 200
            assert full.get(f"/api/traces/{trace}").status_code == 200
            assert fin.get(f"/api/traces/{trace}").status_code == 404
            assert [s["uri"] for s in fin.get("/api/sources").json()] == ["open.md"]
            with client("writer") as writer:
                note = {"text": "# Fin Note\n\nThe Budget Board meets monthly.", "name": "fin.md", "readers": ["fin"]}
                assert writer.post("/api/sources", json=note).status_code == 200
                mutation = ('mutation { ingest(text: "# HR Note\\n\\nThe Hiring Panel meets weekly.", '
                            'name: "hr.md", readers: ["hr"]) { status } }')
                assert writer.post("/graphql", json={"query": mutation}).json() == {
                    "data": {"ingest": {"status": "ingested"}}}
            seen = {name: sorted(s["uri"] for s in c.get("/api/sources").json())
                    for name, c in (("hr", hr), ("fin", fin))}
            assert seen == {"hr": ["closed.md", "open.md", "upload/hr.md"], "fin": ["open.md", "upload/fin.md"]}


def test_readers_come_from_a_manifest_and_change_without_a_reingest(fresh_db: Callable[..., str],
                                                                    tmp_path: Path) -> None:
    from tortus_pg.ingest import pipeline, sources

    url = fresh_db()
    migrate.upgrade(url)
    (tmp_path / "open.md").write_text(OPEN)
    (tmp_path / "closed.md").write_text(CLOSED)
    manifest = tmp_path / "sources.toml"

    def ingest(readers: str) -> pipeline.IngestSummary:
        manifest.write_text(f'[[source]]\npath = "open.md"\n\n[[source]]\npath = "closed.md"\nreaders = {readers}\n')
        with connect(url) as conn:
            return pipeline.ingest(conn, TENANT, sources.from_manifest(manifest), HashEmbedder(dim=384))

    def readers() -> dict[str, list[str] | None]:
        with connect(url) as conn, tenant_scope(conn, TENANT):
            return {Path(u).name: r for u, r in conn.execute("select uri, readers from tortus.source")}

    with connect(url) as conn:
        tenants.create_tenant(conn, TENANT)
        conn.commit()
    assert ingest('["hr"]').count("ingested") == 2
    assert readers() == {"open.md": None, "closed.md": ["hr"]}
    again = ingest('["hr", "legal"]')
    assert again.count("unchanged") == 2 and readers()["closed.md"] == ["hr", "legal"]
    manifest.write_text('[[source]]\npath = "closed.md"\n')  # naming no readers never widens them
    with connect(url) as conn:
        pipeline.ingest(conn, TENANT, sources.from_manifest(manifest), HashEmbedder(dim=384))
    assert readers()["closed.md"] == ["hr", "legal"]
    assert ingest("[]").count("unchanged") == 2 and readers()["closed.md"] is None
    bad = ingest('"hr"')
    assert [why for _, why in bad.failed] == [f"{manifest}: source #2: readers must be a list of group names, not str"]
