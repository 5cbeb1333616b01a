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


def test_local_density_of_a_large_tenant_without_a_grid_is_estimated_from_a_fixed_sample(
        conn: psycopg.Connection) -> None:
    """Beyond 4,000 chunks, with no torus grid stored, the counts come from a sample of the
    tenant's pages, scaled to the whole: near the exact count, the even spread's expectation for
    all chunks, the same on every call."""
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


def _place(conn: psycopg.Connection, points: list[tuple[float, float]], key: str = "c") -> list[int]:
    """Chunks at `points` (each a BM25 document, so the tenant's chunk count is known)."""
    return [r[0] for r in conn.execute(
        "insert into tortus.node (tenant_id, kind, key, label, theta, phi, tsv) "
        "select tortus.current_tenant(), 'chunk', %s || i, 'c', t, p, to_tsvector('english', 'word') "
        "from unnest(%s::float8[], %s::float8[]) with ordinality as x(t, p, i) returning node_id",
        [key, [t for t, _ in points], [p for _, p in points]],
    ).fetchall()]


def test_local_density_of_a_large_tenant_is_counted_from_its_torus_grid(conn: psycopg.Connection) -> None:
    """With a grid stored, a large tenant's counts are the chunks of the cells whose centres lie
    within the radius: within a few chunks of the exact count, whatever the radius, and the
    expectation is the even spread of every chunk the grid holds."""
    rng = random.Random(11)
    points = [(rng.uniform(0, TAU), rng.uniform(0, TAU)) for _ in range(6_000)]
    points[0] = (TAU - 0.001, 0.002)  # at the wrap on both angles
    tenants.create_tenant(conn, "gridded")
    with tenant_scope(conn, "gridded"):
        ids = _place(conn, points)
        assert conn.execute("select tortus.rebuild_torus_grid()").fetchone() == (len(points),)
        for radius in (0.2, math.pi / 2, 3.0):
            rows = conn.execute("select node_id, neighbours, expected from tortus.local_density(%s, %s)",
                                [ids[:4], radius]).fetchall()
            assert [r[0] for r in sorted(rows)] == sorted(ids[:4])
            for node_id, neighbours, expected in rows:
                i = ids.index(node_id)
                near = sum(1 for j, c in enumerate(points) if j != i and gap_distance(points[i], c) <= radius)
                assert abs(neighbours - near) <= 0.02 * near + 6
                assert expected == pytest.approx((len(points) - 1) * math.pi * radius ** 2 / (4 * math.pi ** 2))


def test_the_torus_grid_counts_each_placed_chunk_of_a_layout_in_its_cell(conn: psycopg.Connection) -> None:
    """Rows of running sums over cells of 2 pi / side: chunks only, placed ones only, angles
    outside [0, 2 pi) brought in; a stored layout gets a grid of its own; rebuilding replaces."""
    tenants.create_tenant(conn, "cells")
    cell = TAU / 8
    with tenant_scope(conn, "cells"):
        _place(conn, [(0.5 * cell, 0.5 * cell), (0.6 * cell, 7.5 * cell), (2.5 * cell, 7.9 * cell)])
        conn.execute("insert into tortus.node (tenant_id, kind, key, label, theta, phi, props) values "
                     "(tortus.current_tenant(), 'entity', 'e', 'E', 0.1, 0.1, '{}'), "
                     "(tortus.current_tenant(), 'chunk', 'unplaced', 'u', null, null, "
                     "'{\"layouts\": {\"alt\": [9.8, -0.1]}}')")
        assert conn.execute("select tortus.rebuild_torus_grid(null, 8)").fetchone() == (3,)
        sums, chunks, side = conn.execute(
            "select sums, chunks, side from tortus.torus_grid where layout = ''").fetchone()
        assert (chunks, side) == (3, 8) and len(sums) == 8 and all(len(row) == 9 and row[0] == 0 for row in sums)
        counts = [[row[j + 1] - row[j] for j in range(8)] for row in sums]
        assert counts[0][0] == 1 and counts[0][7] == 1 and counts[2][7] == 1 and sum(map(sum, counts)) == 3
        assert conn.execute("select tortus.rebuild_torus_grid('alt', 8)").fetchone() == (1,)
        alt = conn.execute("select sums from tortus.torus_grid where layout = 'alt'").fetchone()[0]
        assert alt[4][8] - alt[4][7] == 1  # 9.8 - 2 pi in cell 4 of theta, -0.1 + 2 pi in cell 7 of phi
        _place(conn, [(4.0, 4.0)], key="later")
        assert conn.execute("select tortus.rebuild_torus_grid(null, 8)").fetchone() == (4,)
        assert conn.execute("select layout, chunks from tortus.torus_grid order by layout").fetchall() == \
            [("", 4), ("alt", 1)]
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="side must be between 8 and 1024"), \
                conn.transaction():
            conn.execute("select tortus.rebuild_torus_grid(null, 0)")


@FAST
@given(seed=st.tuples(unit, unit), radius=st.floats(min_value=0.01, max_value=4.0), salt=st.integers(0, 999))
def test_a_grid_count_is_the_chunks_of_the_cells_whose_centres_are_within_the_radius(
        session_conn: psycopg.Connection, seed: tuple[float, float], radius: float, salt: int) -> None:
    side = 16
    cell = TAU / side
    rng = random.Random(salt)
    counts = [[rng.randrange(4) for _ in range(side)] for _ in range(side)]
    sums = [[sum(row[:j]) for j in range(side + 1)] for row in counts]
    centres = [((i + 0.5) * cell, (j + 0.5) * cell) for i in range(side) for j in range(side)]
    assume(all(abs(gap_distance(c, seed) - radius) > 1e-9 for c in centres))  # no centre on the circle
    inside = sum(counts[i][j] for i in range(side) for j in range(side)
                 if gap_distance(((i + 0.5) * cell, (j + 0.5) * cell), seed) <= radius)
    row = session_conn.execute("select tortus.torus_grid_count(%s::integer[], %s, %s, %s)",
                               [sums, seed[0] + TAU, seed[1] - TAU, radius]).fetchone()
    assert row == (inside,)


def gap_distance(a: tuple[float, float], b: tuple[float, float]) -> float:
    def gap(x: float, y: float) -> float:
        d = abs(x - y) % TAU
        return min(d, TAU - d)
    return math.hypot(gap(a[0], b[0]), gap(a[1], b[1]))
