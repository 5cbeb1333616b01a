"""The scale suite end to end on a real PostgreSQL, at a size a test can afford: tenants built
and measured as the application role, the peers beside them, the report written."""

import json
from pathlib import Path

import pytest
from tortus_pg.cli.bench_scale import parse_sizes

from tortus_pg import migrate, tenants
from tortus_pg.db import connect
from tortus_pg.embed import make_embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.scale.report import ratio, write
from tortus_pg.scale.suite import run_suite
from tortus_pg.scale.timing import Latency

KINDS = {"bm25", "vector", "hybrid", "traverse", "engine"}


def test_the_suite_builds_measures_and_reports(fresh_db, tmp_path: Path) -> None:
    url = fresh_db()
    migrate.upgrade(url)
    report = run_suite(url, [2_000], make_embedder("hash", dim=384), questions=10, clients=(1, 2))
    (size,) = report.sizes
    built = size.built
    assert built.nodes >= 2_000 and built.documents > 0 and built.rows > built.nodes
    assert built.ingest_s and built.rows_per_s and built.size_mb > 0
    assert built.bm25_rebuild_s is not None and built.hnsw_build_s is not None
    assert {(x.kind, x.clients) for x in size.latencies} == {(k, c) for k in KINDS for c in (1, 2)}
    for lat in [*size.latencies, *size.peers, *size.frequent]:
        assert lat.queries == 10 and 0 < lat.p50_ms <= lat.p95_ms <= lat.p99_ms and lat.qps > 0
    assert {"exact vectors (numpy)", "ts_rank_cd", "ts_rank_cd (owner)"} <= {p.kind for p in size.peers}
    assert [h.ef_search for h in size.hnsw] == [10, 20, 40, 100, 200, 400]
    assert all(0 <= h.recall_at_10 <= 1 for h in size.hnsw) and size.hnsw[-1].recall_at_10 > 0.9
    assert report.small_tenant_results == 10

    paths = write(report, tmp_path / "out")
    assert all(p.stat().st_size > 0 for p in paths)
    assert json.loads(paths[0].read_text())["sizes"][0]["built"]["nodes"] == built.nodes
    assert "| engine | 2 |" in paths[1].read_text()

    # Reused, the tenants are not built again: their ingest is not timed, their nodes are the same.
    again = run_suite(url, [2_000], make_embedder("hash", dim=384), questions=10, clients=(1,), reuse=True)
    assert again.sizes[0].built.nodes == built.nodes and again.sizes[0].built.ingest_s is None


def test_a_tenant_the_suite_did_not_make_is_refused_and_kept(fresh_db) -> None:
    url = fresh_db()
    migrate.upgrade(url)
    with connect(url) as conn:
        tenants.create_tenant(conn, "scale-2k")
        conn.commit()
    with pytest.raises(InvalidInput, match="not the scale suite's"):
        run_suite(url, [2_000], make_embedder("hash", dim=384), questions=10)
    with connect(url) as conn:
        assert {t.tenant_id for t in tenants.list_tenants(conn)} == {"scale-2k"}


def test_sizes_read_as_nodes_and_bad_ones_are_named() -> None:
    assert parse_sizes("100k, 10k,1m") == [10_000, 100_000, 1_000_000]
    for bad in ("", "10x", "1k", "-5k", "20m"):
        with pytest.raises(InvalidInput, match="--scale"):
            parse_sizes(bad)


def test_a_ratio_to_a_slower_peer_says_how_many_times_faster() -> None:
    def p50(ms: float) -> Latency:
        return Latency("q", 1, 10, ms, ms, ms, 1.0)
    assert ratio(p50(9.4), p50(2.0)) == "4.7×"
    assert ratio(p50(9.4), p50(215.1)) == "0.04× (23× faster)"
    assert ratio(p50(9.4), p50(0.0)) == "–"
