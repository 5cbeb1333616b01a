"""A Hypothesis state machine drives ingest, update, removal and search in two tenants against
a model of what each tenant holds. After every step each tenant holds exactly its model's
sources, every chunk belongs to a source of its own tenant, and a search finds nothing of the
other tenant."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tortus_pg import migrate, tenants
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.ingest.pipeline import IngestOptions, ingest_bytes
from tortus_pg.ingest.store import remove_source
from tortus_pg.retrieve import search

TENANTS = ("left", "right")
NAMES = ("alpha.md", "beta.md", "gamma.md")
WORDS = ("ledger", "vault", "gateway", "broker", "archive", "planner")
EMBEDDER = HashEmbedder(dim=64)


def _text(tenant: str, name: str, word: str, version: int) -> str:
    # The tenant's own word in every document, so a search for it tells whose rows come back.
    return f"# {name}\n\nThe {word} of {tenant}land keeps version {version} of the {tenant}word records.\n"


class Tenants(RuleBasedStateMachine):
    url = ""

    def __init__(self) -> None:
        super().__init__()
        self.conn = connect(self.url)
        for tenant in TENANTS:  # every run starts from empty tenants
            with tenant_scope(self.conn, tenant):
                for (uri,) in self.conn.execute("select uri from tortus.source").fetchall():
                    remove_source(self.conn, uri)
        self.conn.commit()
        self.model: dict[str, dict[str, int]] = {t: {} for t in TENANTS}  # tenant -> uri -> version

    @rule(tenant=st.sampled_from(TENANTS), name=st.sampled_from(NAMES), word=st.sampled_from(WORDS))
    def ingest_or_update(self, tenant: str, name: str, word: str) -> None:
        version = self.model[tenant].get(f"upload/{name}", 0) + 1
        with self.conn.transaction():
            ingest_bytes(self.conn, tenant, name, _text(tenant, name, word, version).encode(), EMBEDDER,
                         IngestOptions(), uri=f"upload/{name}")
        self.model[tenant][f"upload/{name}"] = version

    @rule(tenant=st.sampled_from(TENANTS), name=st.sampled_from(NAMES))
    def remove(self, tenant: str, name: str) -> None:
        with tenant_scope(self.conn, tenant):
            removed = remove_source(self.conn, f"upload/{name}")
        assert removed == (f"upload/{name}" in self.model[tenant])
        self.model[tenant].pop(f"upload/{name}", None)

    @invariant()
    def each_tenant_holds_its_model(self) -> None:
        for tenant in TENANTS:
            with tenant_scope(self.conn, tenant):
                rows = self.conn.execute("select uri, text from tortus.source").fetchall()
                orphans = self.conn.execute(
                    "select count(*) from tortus.node n where n.kind = 'chunk' and not exists "
                    "(select 1 from tortus.source s where s.source_id = n.source_id)").fetchone()
            assert {uri for uri, _ in rows} == set(self.model[tenant])
            assert all(f"version {self.model[tenant][uri]} " in text for uri, text in rows)
            assert orphans == (0,)

    @invariant()
    def search_finds_nothing_of_the_other_tenant(self) -> None:
        for tenant, other in (("left", "right"), ("right", "left")):
            with tenant_scope(self.conn, tenant):
                hits = search(self.conn, f"{other}word {other}land", mode="keyword", k=20)
            assert not any(other in hit.text for hit in hits)

    def teardown(self) -> None:
        self.conn.close()


@pytest.mark.slow
def test_tenants_keep_their_own_sources_through_any_sequence(fresh_db: Callable[..., str]) -> None:
    url = fresh_db()
    migrate.upgrade(url)
    with psycopg.connect(url) as conn:
        for tenant in TENANTS:
            tenants.create_tenant(conn, tenant)
    Tenants.url = url
    run = settings(max_examples=15, stateful_step_count=12, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])(Tenants)
    run.TestCase().runTest()
