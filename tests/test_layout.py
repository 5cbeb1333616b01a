"""Torus layout (Python) and the SQL that places concepts and builds portals."""

import math

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tortus_pg.errors import InvalidInput
from tortus_pg.layout import LAYOUTS, coordinates

TAU = 2 * math.pi


@settings(max_examples=40, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 30), st.integers(1, 12)), elements=st.floats(-10, 10)),
    st.sampled_from(LAYOUTS),
)
def test_coordinates_are_angles_for_every_point(x: np.ndarray, layout: str) -> None:
    c = coordinates(x, layout)
    assert c.shape == (len(x), 2)
    assert np.all(c >= 0) and np.all(c < TAU)


def test_torus_layout_keeps_clusters_together() -> None:
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(4, 16)) * 5
    points = np.vstack([c + rng.normal(scale=0.1, size=(25, 16)) for c in centers])
    c = coordinates(points, "torus")

    def gap(a: np.ndarray, b: np.ndarray) -> float:
        d = np.abs(a - b) % TAU
        return float(np.hypot(*np.minimum(d, TAU - d)))

    within = np.mean([
        gap(c[i], c[j])
        for k in range(4)
        for i in range(k * 25, k * 25 + 5)
        for j in range(k * 25 + 5, k * 25 + 10)
    ])
    between = np.mean([gap(c[i], c[j]) for i in range(0, 5) for j in range(25, 100, 7)])
    assert within < between / 3


def test_random_layout_is_seeded_and_ignores_embeddings() -> None:
    x = np.eye(5)
    assert np.array_equal(coordinates(x, "random", seed=3), coordinates(x * 7, "random", seed=3))
    assert not np.array_equal(coordinates(x, "random", seed=3), coordinates(x, "random", seed=4))


def test_unknown_layout_is_named() -> None:
    with pytest.raises(InvalidInput, match="unknown layout 'spiral'"):
        coordinates(np.eye(3), "spiral")


SEED = """
insert into tortus.subgraph (tenant_id, name) values ('t', 'pay'), ('t', 'ops');
insert into tortus.node (tenant_id, kind, key, label, theta, phi) values
    ('t', 'chunk', 'c1', 'c1', 0.1, 0.2), ('t', 'chunk', 'c2', 'c2', 6.2, 0.4), ('t', 'chunk', 'c3', 'c3', 3.0, 3.0),
    ('t', 'entity', 'vault', 'Key Vault', null, null), ('t', 'entity', 'hub', 'Hub', null, null);
insert into tortus.membership (tenant_id, node_id, subgraph)
    select 't', node_id, case when key = 'c1' then 'pay' else 'ops' end from tortus.node where kind = 'chunk';
insert into tortus.edge (tenant_id, src, dst, type)
    select 't', c.node_id, e.node_id, 'mentions' from tortus.node c, tortus.node e
    where c.kind = 'chunk' and ((e.key = 'vault' and c.key in ('c1', 'c2')) or e.key = 'hub');
"""


def test_concepts_sit_at_the_circular_mean_and_portals_link_subgraphs(conn: psycopg.Connection) -> None:
    from tortus_pg import tenants
    from tortus_pg.db import tenant_scope

    tenants.create_tenant(conn, "t")
    with tenant_scope(conn, "t"):
        conn.execute(SEED)
        assert conn.execute("select tortus.place_concepts()").fetchone() == (2,)
        theta, phi = conn.execute("select theta, phi from tortus.node where key = 'vault'").fetchone()  # type: ignore[misc]
        # c1 (0.1) and c2 (6.2) straddle 0: the circular mean is near 0, not near pi.
        assert min(theta, TAU - theta) < 0.1 and phi == pytest.approx(0.3, abs=1e-6)
        assert conn.execute("select tortus.rebuild_portals(max_df => 2)").fetchone() == (2,)
        portals = conn.execute("select src_subgraph, dst_subgraph, reason from tortus.portal order by 1").fetchall()
        assert portals == [
            ("ops", "pay", "both mention Key Vault (2 chunks mention it)"),
            ("pay", "ops", "both mention Key Vault (2 chunks mention it)"),
        ]


def test_shard_crossings_are_read_in_the_coordinates_the_walk_used(conn: psycopg.Connection) -> None:
    """Two chunks in one torus cell live, in two cells under a stored layout: a hop between them
    crosses shards only when the walk used that layout."""
    from tortus_pg import tenants
    from tortus_pg.db import tenant_scope
    from tortus_pg.query import paths
    from tortus_pg.query.results import PathHop

    tenants.create_tenant(conn, "sh")
    with tenant_scope(conn, "sh"):
        a, b = (r[0] for r in conn.execute(
            "insert into tortus.node (tenant_id, kind, key, label, theta, phi, props) values "
            "('sh', 'chunk', 'a', 'a', 0.1, 0.1, '{\"layouts\": {\"random\": [0.1, 0.1]}}'), "
            "('sh', 'chunk', 'b', 'b', 0.2, 0.2, '{\"layouts\": {\"random\": [3.5, 3.5]}}') returning node_id"))
        hop = PathHop("a", a, "b", b, "mentions", 1.0, None, ())
        assert [h.shard_crossing for h in paths._mark_shard_crossings(conn, [hop], None)] == [False]
        assert [h.shard_crossing for h in paths._mark_shard_crossings(conn, [hop], "random")] == [True]
        assert [h.shard_crossing for h in paths._mark_shard_crossings(conn, [hop], "euclidean")] == [False]
