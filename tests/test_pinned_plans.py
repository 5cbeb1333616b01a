"""A statement that names its tenant as a literal (`db.pinned`) is planned for that tenant's
partitions alone, returns what the unpinned statement returns, and row-level security still
decides what it sees."""

import psycopg
import pytest
from tenant_rows import seed_nodes

from tortus_pg import tenants
from tortus_pg.db import pinned, tenant_scope
from tortus_pg.errors import InvalidInput

LABELS = "select n.label from tortus.node n where n.tenant_id = tortus.current_tenant() order by 1"


@pytest.fixture
def two_tenants(conn: psycopg.Connection) -> psycopg.Connection:
    for tenant in ("pin-a", "pin-b"):
        tenants.create_tenant(conn, tenant)
        seed_nodes(conn, tenant, [f"{tenant} concept {n}" for n in range(3)])
    return conn


def _plan(conn: psycopg.Connection, query: str) -> str:
    return "\n".join(r[0] for r in conn.execute("explain (costs off) " + query).fetchall())


def test_a_pinned_statement_is_planned_for_its_tenants_partition_alone(two_tenants: psycopg.Connection) -> None:
    with tenant_scope(two_tenants, "pin-a", role="app"):
        loose, tight = _plan(two_tenants, LABELS), _plan(two_tenants, pinned(LABELS, "pin-a"))
    # Unpinned, the plan holds every tenant's partition and prunes them when it runs.
    assert "Append" in loose
    assert "Append" not in tight and tight.count("Scan") == 1


def test_a_pinned_statement_returns_what_the_unpinned_one_does(two_tenants: psycopg.Connection) -> None:
    with tenant_scope(two_tenants, "pin-b", role="app"):
        rows = two_tenants.execute(LABELS).fetchall()
        assert rows == two_tenants.execute(pinned(LABELS, "pin-b")).fetchall()
    assert [r[0] for r in rows] == ["pin-b concept 0", "pin-b concept 1", "pin-b concept 2"]


def test_naming_another_tenant_shows_nothing_of_it(two_tenants: psycopg.Connection) -> None:
    # Row-level security filters by the scope's tenant whatever the statement names.
    with tenant_scope(two_tenants, "pin-a", role="app"):
        assert two_tenants.execute(pinned(LABELS, "pin-b")).fetchall() == []


@pytest.mark.parametrize("tenant", ["x'; drop table tortus.node; --", "Upper", ""])
def test_a_tenant_that_is_not_a_tenant_id_is_refused(tenant: str) -> None:
    with pytest.raises(InvalidInput, match="invalid tenant id"):
        pinned(LABELS, tenant)


def test_without_a_tenant_the_statement_is_as_written() -> None:
    assert pinned(LABELS, None) == LABELS
