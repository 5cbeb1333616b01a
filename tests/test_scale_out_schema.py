"""What distributing by tenant (Citus) relies on: every tenant table carries `tenant_id`, every
primary key and unique constraint includes it, and every foreign key joins a row to a row of
the same tenant, so one tenant's rows, keys and joins can live on one shard."""

from __future__ import annotations

import psycopg

from tortus_pg.db import connect

# The tenant catalog is a reference table (on every node); the deployment secret is one row.
NOT_DISTRIBUTED = {"tenant", "tenant_secret"}

_CONSTRAINTS = """
select r.relname, c.contype, c.conname,
       array(select a.attname from unnest(c.conkey) with ordinality k(n, ord)
             join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.n order by k.ord),
       f.relname,
       array(select a.attname from unnest(c.confkey) with ordinality k(n, ord)
             join pg_attribute a on a.attrelid = c.confrelid and a.attnum = k.n order by k.ord)
from pg_constraint c
join pg_class r on r.oid = c.conrelid
left join pg_class f on f.oid = c.confrelid
where r.relnamespace = 'tortus'::regnamespace and c.contype in ('p', 'u', 'f') and c.conparentid = 0
"""
_TABLES = """
select c.relname, exists (select 1 from pg_attribute a where a.attrelid = c.oid and a.attname = 'tenant_id'
                                                         and not a.attisdropped)
from pg_class c where c.relnamespace = 'tortus'::regnamespace and c.relkind in ('r', 'p')
"""


def _schema(url: str) -> tuple[dict[str, bool], list[tuple[str, str, str, list[str], str | None, list[str]]]]:
    with connect(url) as conn:
        tables = {str(name): bool(has) for name, has in conn.execute(_TABLES).fetchall()}
        constraints = [(str(t), str(k), str(n), list(c), f, list(fc)) for t, k, n, c, f, fc
                       in conn.execute(_CONSTRAINTS).fetchall()]
    return tables, constraints


def test_every_tenant_table_can_be_distributed_by_tenant(db_url: str) -> None:
    tables, constraints = _schema(db_url)
    distributed = set(tables) - NOT_DISTRIBUTED
    assert {"source", "node", "edge", "evidence_span", "api_key", "query_trace"} <= distributed
    assert not [t for t in distributed if not tables[t]], "tenant tables without a tenant_id column"
    keys = [(t, name, cols) for t, kind, name, cols, _, _ in constraints if kind in "pu" and t in distributed]
    assert keys and not [k for k in keys if "tenant_id" not in k[2]], "keys a shard could not enforce"


def test_no_foreign_key_crosses_tenants(db_url: str) -> None:
    _, constraints = _schema(db_url)
    foreign = [(t, name, cols, f, fcols) for t, kind, name, cols, f, fcols in constraints if kind == "f"]
    assert len(foreign) >= 20
    crossing = [(t, name) for t, name, cols, f, fcols in foreign
                if "tenant_id" not in cols or f is None or fcols[cols.index("tenant_id")] != "tenant_id"]
    assert not crossing, f"foreign keys that may point at another tenant's row: {crossing}"


def test_a_row_pointing_at_another_tenants_row_is_refused(db_url: str) -> None:
    """The composite keys are what stops it, whatever row-level security allows the owner."""
    with connect(db_url) as conn, conn.transaction(force_rollback=True):
        for tenant in ("so-a", "so-b"):
            conn.execute("insert into tortus.tenant (tenant_id, name) values (%s, %s)", [tenant, tenant])
        source = conn.execute("insert into tortus.source (tenant_id, uri, kind, sha256, text) values ('so-a', 'a.md', "
                              "'markdown', repeat('0', 64), '') returning source_id").fetchone()
        assert source is not None
        try:
            with conn.transaction():
                conn.execute("insert into tortus.node (tenant_id, kind, key, label, source_id) "
                             "values ('so-b', 'chunk', 'k', 'l', %s)", [source[0]])
        except psycopg.errors.ForeignKeyViolation:
            pass
        else:
            raise AssertionError("a node of tenant so-b was stored against tenant so-a's source")
