"""Properties of tortus.torus_distance, tortus.shard_of and tortus.local_density, checked in PostgreSQL."""

import math
import random

import psycopg
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tortus_pg import tenants
from tortus_pg.db import tenant_scope

TAU = 2 * math.pi
angle = st.floats(min_value=-50.0, max_value=50.0, allow_nan=False)
unit = st.floats(min_value=0.0, max_value=TAU, allow_nan=False, exclude_max=True)
FAST = settings(max_examples=60, deadline=None)


def dist(conn: psycopg.Connection, a: tuple[float, float], b: tuple[float, float]) -> float:
    row = conn.execute("select tortus.torus_distance(%s, %s, %s, %s)", [*a, *b]).fetchone()
    assert row is not None
    return float(row[0])


def shard(conn: psycopg.Connection, theta: float, phi: float, n: int) -> int:
    row = conn.execute("select tortus.shard_of(%s, %s, %s)", [theta, phi, n]).fetchone()
    assert row is not None
    return int(row[0])


@FAST
@given(angle, angle, angle, angle)
def test_distance_is_symmetric_and_in_range(
    session_conn: psycopg.Connection, t1: float, p1: float, t2: float, p2: float
) -> None:
    d = dist(session_conn, (t1, p1), (t2, p2))
    assert d == pytest.approx(dist(session_conn, (t2, p2), (t1, p1)), abs=1e-9)
    assert -1e-12 <= d <= math.pi * math.sqrt(2) + 1e-9


@FAST
@given(angle, angle, angle, angle, st.integers(-3, 3), st.integers(-3, 3))
def test_distance_is_wrap_invariant(
    session_conn: psycopg.Connection, t1: float, p1: float, t2: float, p2: float, k: int, m: int
) -> None:
    shifted = dist(session_conn, (t1 + k * TAU, p1 + m * TAU), (t2, p2))
    assert shifted == pytest.approx(dist(session_conn, (t1, p1), (t2, p2)), abs=1e-7)


@FAST
@given(angle, angle, angle, angle, angle, angle)
def test_distance_obeys_triangle_inequality(
    session_conn: psycopg.Connection, a1: float, a2: float, b1: float, b2: float, c1: float, c2: float
) -> None:
    a, b, c = (a1, a2), (b1, b2), (c1, c2)
    assert dist(session_conn, a, c) <= dist(session_conn, a, b) + dist(session_conn, b, c) + 1e-9


def test_distance_known_values(session_conn: psycopg.Connection) -> None:
    assert dist(session_conn, (0.1, 0.0), (TAU - 0.1, 0.0)) == pytest.approx(0.2)
    assert dist(session_conn, (0.0, 0.0), (math.pi, math.pi)) == pytest.approx(math.pi * math.sqrt(2))
    assert dist(session_conn, (1.0, 2.0), (1.0, 2.0)) == 0


def grid(n: int) -> tuple[int, int]:
    """The rows x cols grid shard_of uses: as square as n allows."""
    rows = max(r for r in range(1, math.isqrt(n) + 1) if n % r == 0)
    return rows, n // rows


def near_cell_edge(x: float, cells: int) -> bool:
    pos = (x % TAU) / TAU * cells
    return min(pos - math.floor(pos), math.ceil(pos) - pos) < 1e-6


@FAST
@given(angle, angle, st.integers(1, 64))
def test_shard_in_range_and_wrap_invariant(session_conn: psycopg.Connection, theta: float, phi: float, n: int) -> None:
    rows, cols = grid(n)
    # Adding 2*pi moves a point by one ulp or so; only a point on a cell edge may flip.
    assume(not near_cell_edge(theta, cols) and not near_cell_edge(phi, rows))
    s = shard(session_conn, theta, phi, n)
    assert 0 <= s < n
    assert shard(session_conn, theta + TAU, phi - TAU, n) == s


@FAST
@given(unit, unit, st.sampled_from([4, 6, 9, 16]))
def test_nearby_points_usually_share_a_shard(
    session_conn: psycopg.Connection, theta: float, phi: float, n: int
) -> None:
    # Locality: within one grid cell the shard cannot change, so a tiny step from a point
    # well inside its cell stays in the same shard.
    rows, cols = grid(n)
    cell_t, cell_p = TAU / cols, TAU / rows
    inside_t = cell_t * (math.floor(theta / cell_t) + 0.5)
    inside_p = cell_p * (math.floor(phi / cell_p) + 0.5)
    assert shard(session_conn, inside_t, inside_p, n) == shard(
        session_conn, inside_t + cell_t / 4, inside_p - cell_p / 4, n
    )


def test_every_shard_is_used(session_conn: psycopg.Connection) -> None:
    n = 12
    steps = [i * TAU / 48 for i in range(48)]
    used = {shard(session_conn, t, p, n) for t in steps for p in steps}
    assert used == set(range(n))


def test_shard_rejects_nonpositive_count(conn: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="n_shards must be at least 1"):
        conn.execute("select tortus.shard_of(0, 0, 0)")


def test_local_density_counts_the_chunks_within_the_radius(conn: psycopg.Connection) -> None:
    """Against a count in Python, with a seed near the wrap and a stored alternative layout whose
    angles lie outside [0, 2 pi)."""
    rng = random.Random(5)
    points = [(rng.uniform(0, TAU), rng.uniform(0, TAU)) for _ in range(300)]
    points[0] = (0.01, TAU - 0.01)
    other = [(rng.uniform(-TAU, 2 * TAU), rng.uniform(-TAU, 2 * TAU)) for _ in points]
    tenants.create_tenant(conn, "dens")
    with tenant_scope(conn, "dens"):
        ids = [r[0] for r in conn.execute(
            "insert into tortus.node (tenant_id, kind, key, label, theta, phi, props) "
            "select 'dens', 'chunk', 'c' || i, 'c', t, p, jsonb_build_object('layouts', jsonb_build_object("
            "'other', jsonb_build_array(ot, op))) "
            "from unnest(%s::float8[], %s::float8[], %s::float8[], %s::float8[]) with ordinality as x(t, p, ot, op, i) "
            "returning node_id",
            [[t for t, _ in points], [p for _, p in points], [t for t, _ in other], [p for _, p in other]],
        ).fetchall()]
        seeds = ids[:6]
        for layout, coords in ((None, points), ("other", other)):
            for radius in (0.3, math.pi / 2, 2.5):
                rows = conn.execute("select node_id, neighbours, expected from tortus.local_density(%s, %s, %s)",
                                    [seeds, radius, layout]).fetchall()
                got = {r[0]: (r[1], r[2]) for r in rows}
                even = (len(coords) - 1) * math.pi * radius ** 2 / (4 * math.pi ** 2)
                for i, seed in enumerate(seeds):
                    near = sum(1 for j, c in enumerate(coords) if j != i and gap_distance(coords[i], c) <= radius)
                    assert got[seed] == (near, pytest.approx(even))
                assert sum(n for n, _ in got.values()) > 0


def test_local_density_of_a_large_tenant_is_estimated_from_a_fixed_sample(conn: psycopg.Connection) -> None:
    """Beyond 4,000 chunks the counts come from a sample of the tenant's pages, scaled to the
    whole: near the exact count, the even spread's expectation for all chunks, the same on
    every call."""
    rng = random.Random(9)
    points = [(rng.uniform(0, TAU), rng.uniform(0, TAU)) for _ in range(16_000)]
    tenants.create_tenant(conn, "dense")
    with tenant_scope(conn, "dense"):
        ids = [r[0] for r in conn.execute(
            "insert into tortus.node (tenant_id, kind, key, label, theta, phi, tsv) "
            "select 'dense', 'chunk', 'c' || i, 'c', t, p, to_tsvector('english', 'word') "
            "from unnest(%s::float8[], %s::float8[]) with ordinality as x(t, p, i) returning node_id",
            [[t for t, _ in points], [p for _, p in points]],
        ).fetchall()]
        seeds, radius = ids[:5], math.pi / 2
        query = "select node_id, neighbours, expected from tortus.local_density(%s, %s) order by node_id"
        rows = conn.execute(query, [seeds, radius]).fetchall()
        assert rows == conn.execute(query, [seeds, radius]).fetchall()
        for (node_id, neighbours, expected), i in zip(rows, range(5), strict=True):
            near = sum(1 for j, c in enumerate(points) if j != i and gap_distance(points[i], c) <= radius)
            assert node_id == seeds[i] and abs(neighbours - near) <= 0.15 * near
            assert expected == pytest.approx((len(points) - 1) * math.pi * radius ** 2 / (4 * math.pi ** 2))


def gap_distance(a: tuple[float, float], b: tuple[float, float]) -> float:
    def gap(x: float, y: float) -> float:
        d = abs(x - y) % TAU
        return min(d, TAU - d)
    return math.hypot(gap(a[0], b[0]), gap(a[1], b[1]))
