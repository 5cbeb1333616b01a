"""BEIR retrieval quality and latency of the SQL search functions, next to in-process bm25s.

    python benchmarks/beir.py PATH/TO/beir/scifact [--limit-queries N] [--json-out F] [--reuse] [--baseline F]

The folder holds corpus.jsonl[.gz], queries.test.jsonl (or queries.jsonl) and qrels/test.tsv.
The corpus goes into the throw-away tenant `beir-<dataset>` of the workspace's database (the
embedded server unless TORTUS_DATABASE_URL is set) with the minilm embedder; --reuse keeps a
tenant that already holds it. Every test query with qrels runs through tortus.bm25_search,
tortus.vector_search and tortus.hybrid_search (top 100 chunks, deduplicated to passages in rank
order), a plain ts_rank_cd query and bm25s. Reports nDCG@10 (graded gains, log2 discount, bootstrap
95% CI over queries), recall@100 and per-query latency (median, p95) after 10 warm-up queries;
--baseline pairs each mode's per-query nDCG@10 with an earlier run's (e.g. before a change to ingest).
Needs `pip install bm25s PyStemmer` (without PyStemmer, bm25s runs unstemmed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import bm25s
import numpy as np

from tortus_pg import tenants
from tortus_pg.config import load_settings
from tortus_pg.db import connect, database_url, tenant_scope
from tortus_pg.embed import make_embedder
from tortus_pg.errors import TenantNotFound
from tortus_pg.eval.datasets import load_dataset
from tortus_pg.eval.metrics import bootstrap_ci, ndcg_at_k, paired_bootstrap_diff, recall_at_k
from tortus_pg.ingest.corpus import Passage, ingest_passages, read_passages
from tortus_pg.migrate import upgrade

K = 100
WARMUP = 10
BOOTSTRAP = 1000
SEED = 20240601
BM25_K1, BM25_B = 1.2, 0.75  # tortus.bm25_search's defaults, used for bm25s too
PUBLISHED_BM25 = {"scifact": 0.665}  # BEIR paper (Thakur et al., 2021), BM25 via Elasticsearch
PAIRS = (("hybrid_search", "bm25_search"), ("hybrid_search", "vector_search"), ("bm25_search", "bm25s"))
TS_QUERY = "OR of the query's english lexemes: to_tsvector('english', q) joined by ' | ' as a tsquery"

SQL = {
    "bm25_search": "select node_id from tortus.bm25_search(%(q)s, %(k)s) order by rank",
    "vector_search": "select node_id from tortus.vector_search(%(v)s, %(k)s) order by rank",
    "hybrid_search": "select node_id from tortus.hybrid_search(%(q)s, %(v)s, %(k)s) order by rank",
    # Lexemes are quoted (backslash and quote escaped) and cast, so they are not stemmed twice.
    "ts_rank_cd (OR)": """
        with q as (
            select coalesce(string_agg('''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''', ' | '),
                            '')::tsquery as q
            from unnest(tsvector_to_array(to_tsvector('english', %(q)s))) as l
        )
        select n.node_id from tortus.node n, q
        where n.tenant_id = tortus.current_tenant() and n.kind = 'chunk' and n.tsv @@ q.q
        order by ts_rank_cd(n.tsv, q.q) desc limit %(k)s""",
}


@dataclass
class Bench:
    name: str
    passages: list[Passage]
    queries: dict[str, str]  # test queries with a relevant passage, in file order
    gold: dict[str, dict[str, float]]  # query id -> {passage id: grade > 0}


@dataclass
class ModeResult:
    ndcg10: float
    ndcg10_ci95: tuple[float, float]
    recall100: float
    p50_ms: float | None
    p95_ms: float | None
    mean_passages: float  # distinct passages in the top 100 results
    per_query_ndcg10: list[float]


def load_bench(folder: Path, limit: int | None) -> Bench:
    ds = load_dataset(folder)
    if ds.kind != "beir" or ds.corpus_path is None:
        raise SystemExit(f"{folder}: not a BEIR dataset with a corpus.jsonl[.gz]")
    questions = ds.questions[:limit]
    return Bench(
        ds.name,
        list(read_passages(ds.corpus_path)),
        {q.id: q.text for q in questions},
        {q.id: q.gold for q in questions},
    )


def evaluate(ds: Bench, runs: dict[str, list[str]], latencies: list[float]) -> ModeResult:
    ndcg = [ndcg_at_k(runs[q], ds.gold[q], 10) or 0.0 for q in ds.queries]
    recall = [recall_at_k(runs[q], ds.gold[q], K) or 0.0 for q in ds.queries]
    p50, p95 = (float(v) for v in np.percentile(latencies, [50, 95]))
    return ModeResult(
        float(np.mean(ndcg)),
        bootstrap_ci(ndcg, resamples=BOOTSTRAP, seed=SEED),
        float(np.mean(recall)),
        None if p50 is None else 1000 * p50,
        None if p95 is None else 1000 * p95,
        float(np.mean([len(runs[q]) for q in ds.queries])),
        ndcg,
    )


def timed_runs(
    queries: dict[str, str], search: Callable[[str, str], list[str]]
) -> tuple[dict[str, list[str]], list[float]]:
    """Warm up on the first queries, then time one call per query."""
    for qid in list(queries)[:WARMUP]:
        search(qid, queries[qid])
    runs: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid, text in queries.items():
        start = time.perf_counter()
        runs[qid] = search(qid, text)
        latencies.append(time.perf_counter() - start)
    return runs, latencies


def ensure_corpus(url: str, tenant: str, ds: Bench, reuse: bool) -> float | None:
    """Ingest the corpus into `tenant`; the ingest time, or None when a complete copy was reused."""
    prefix = f"beir/{ds.name}/"
    with connect(url) as conn:
        if reuse:
            try:
                with tenant_scope(conn, tenant):
                    row = conn.execute(
                        "select count(*) from tortus.source where starts_with(uri, %s)", [prefix]
                    ).fetchone()
                if row is not None and row[0] == len(ds.passages):
                    return None
            except TenantNotFound:
                pass
        else:
            with contextlib.suppress(TenantNotFound):
                tenants.delete_tenant(conn, tenant)
        tenants.create_tenant(conn, tenant)
        conn.commit()
        start = time.perf_counter()
        ingest_passages(conn, tenant, ds.passages, make_embedder("minilm"), uri_prefix=prefix, subgraph="beir")
        return time.perf_counter() - start


def sql_modes(url: str, tenant: str, ds: Bench, qvecs: dict[str, np.ndarray]) -> dict[str, ModeResult]:
    results: dict[str, ModeResult] = {}
    with connect(url) as conn, tenant_scope(conn, tenant):
        passage_of: dict[int, str] = dict(
            conn.execute(
                "select n.node_id, s.metadata->>'passage_id' from tortus.node n "
                "join tortus.source s on s.tenant_id = n.tenant_id and s.source_id = n.source_id "
                "where n.kind = 'chunk'"
            ).fetchall()
        )
        print(f"{len(passage_of)} chunks in the tenant; top {K} chunks are deduplicated to passages")
        for mode, query in SQL.items():

            def search(qid: str, text: str, query: str = query) -> list[str]:
                rows = conn.execute(query, {"q": text, "v": qvecs[qid], "k": K}).fetchall()
                return list(dict.fromkeys(passage_of[r[0]] for r in rows))  # each passage at its best chunk

            runs, latencies = timed_runs(ds.queries, search)
            results[mode] = evaluate(ds, runs, latencies)
    return results


def bm25s_mode(ds: Bench) -> tuple[ModeResult, str]:
    try:
        import Stemmer  # PyStemmer

        stemmer, stemmer_name = Stemmer.Stemmer("english"), "PyStemmer english (Snowball)"
    except ImportError:
        stemmer, stemmer_name = None, "no stemmer"

    def tokenize(texts: list[str]) -> list[list[str]]:
        tokens: list[list[str]] = bm25s.tokenize(
            texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )
        return tokens

    retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
    retriever.index(tokenize([f"{p.title} {p.text}" for p in ds.passages]), show_progress=False)
    ids = [p.id for p in ds.passages]

    def search(qid: str, text: str) -> list[str]:
        docs, scores = retriever.retrieve(tokenize([text]), k=K, show_progress=False, n_threads=0)
        return [ids[i] for i, score in zip(docs[0], scores[0], strict=True) if score > 0]  # only matches

    runs, latencies = timed_runs(ds.queries, search)
    desc = f"bm25s {bm25s.__version__}, stopwords en, {stemmer_name}, k1={BM25_K1}, b={BM25_B}"
    return evaluate(ds, runs, latencies), desc


def table(results: dict[str, ModeResult], published: float | None, name: str) -> str:
    def ms(x: float | None) -> str:
        return f"{x:.1f}" if x is not None else "–"

    lines = ["| mode | nDCG@10 [95% CI] | recall@100 | p50 ms | p95 ms |", "| --- | --- | --- | --- | --- |"]
    for mode, r in results.items():
        lo, hi = r.ndcg10_ci95
        lines.append(
            f"| {mode} | {r.ndcg10:.3f} [{lo:.3f}, {hi:.3f}] | {r.recall100:.3f} | {ms(r.p50_ms)} | {ms(r.p95_ms)} |"
        )
    if published is not None:
        lines.append(f"| BM25, published (BEIR paper, {name}) | {published:.3f} | – | – | – |")
    return "\n".join(lines)


def paired(
    results: dict[str, ModeResult], baseline: Path | None
) -> tuple[dict[str, tuple[float, float, float]], dict[str, tuple[float, float, float]]]:
    """Paired nDCG@10 differences between modes, and of each mode against an earlier run's."""
    ndcg = {mode: r.per_query_ndcg10 for mode, r in results.items()}
    diffs = {f"{a} - {b}": paired_bootstrap_diff(ndcg[a], ndcg[b], resamples=BOOTSTRAP, seed=SEED) for a, b in PAIRS}
    before = json.loads(baseline.read_text(encoding="utf-8"))["modes"] if baseline is not None else {}
    changes = {
        mode: paired_bootstrap_diff(ndcg[mode], before[mode]["per_query_ndcg10"], resamples=BOOTSTRAP, seed=SEED)
        for mode in ndcg
        if mode in before
    }
    return diffs, changes


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path, help="a BEIR dataset folder")
    parser.add_argument("--limit-queries", type=int, default=None)
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--reuse", action="store_true", help="keep a tenant that already holds the corpus")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="the --json-out of an earlier run on the same queries, to pair each mode with")
    return parser.parse_args()


def main() -> None:
    args = parse_args()

    ds = load_bench(args.dataset, args.limit_queries)
    tenant = "beir-" + re.sub(r"[^a-z0-9_-]+", "-", ds.name.lower())[:58]
    print(f"{ds.name}: {len(ds.passages)} passages, {len(ds.queries)} test queries with qrels; tenant {tenant}")
    url = database_url(load_settings())
    upgrade(url)
    ingest_s = ensure_corpus(url, tenant, ds, args.reuse)
    print("ingest: reused the existing tenant" if ingest_s is None else f"ingest: {ingest_s:.1f} s (minilm)")

    embedder = make_embedder("minilm")
    embedder.embed(["warm-up"])  # load the model outside the timing
    start = time.perf_counter()
    vectors = embedder.embed(list(ds.queries.values()))
    embed_s = time.perf_counter() - start
    qvecs = {q: np.asarray(v, dtype=np.float32) for q, v in zip(ds.queries, vectors, strict=True)}
    print(f"query embedding: {embed_s:.2f} s for {len(qvecs)} queries ({1000 * embed_s / len(qvecs):.1f} ms each)")

    results = sql_modes(url, tenant, ds, qvecs)
    results["bm25s"], bm25s_desc = bm25s_mode(ds)
    published = PUBLISHED_BM25.get(ds.name.lower())
    print(f"\nbm25s: {bm25s_desc}; ts_rank_cd: {TS_QUERY}\n")
    print(table(results, published, ds.name))
    diffs, changes = paired(results, args.baseline)
    for title, found in (("paired nDCG@10 differences", diffs), (f"against {args.baseline}", changes)):
        if found:
            print(f"\n{title} (mean [95% CI]):")
        for pair, (mean, lo, hi) in found.items():
            print(f"  {pair}: {mean:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    if args.json_out is not None:
        report = {
            "dataset": ds.name,
            "passages": len(ds.passages),
            "queries": len(ds.queries),
            "k": K,
            "tenant": tenant,
            "ingest_s": ingest_s,
            "query_embed_s": embed_s,
            "embedder": embedder.name,
            "bm25s": bm25s_desc,
            "ts_rank_cd_query": TS_QUERY,
            "warmup_queries": WARMUP,
            "bootstrap": {"resamples": BOOTSTRAP, "seed": SEED},
            "published_bm25_ndcg10": published,
            "modes": {mode: asdict(r) for mode, r in results.items()},
            "paired_ndcg10_diff": {pair: dict(zip(("mean", "lo", "hi"), d, strict=True)) for pair, d in diffs.items()},
            "ndcg10_diff_vs_baseline": {mode: dict(zip(("mean", "lo", "hi"), d, strict=True))
                                        for mode, d in changes.items()},
        }
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json_out}")


if __name__ == "__main__":
    main()
