"""The scale suite's report: JSON, a markdown table with each figure's ratio to its peer, and
plots (latency against corpus size on log-log axes; HNSW recall against latency)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tortus_pg.scale.suite import ScaleReport, SizeReport  # noqa: E402
from tortus_pg.scale.timing import Latency  # noqa: E402
from tortus_pg.scale.workloads import K  # noqa: E402


def write(report: ScaleReport, out: Path) -> list[Path]:
    """scale.json, scale.md, scale-latency.png and scale-hnsw.png in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "scale.json", out / "scale.md", out / "scale-latency.png", out / "scale-hnsw.png"]
    paths[0].write_text(json.dumps(dataclasses.asdict(report), indent=1))
    paths[1].write_text(markdown(report))
    _latency_plot(report, paths[2])
    _hnsw_plot(report, paths[3])
    return paths


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _find(latencies: list[Latency], kind: str, clients: int = 1) -> Latency | None:
    return next((x for x in latencies if x.kind == kind and x.clients == clients), None)


def ratio(mine: Latency | None, peer: Latency | None) -> str:
    """`mine`'s p50 as a multiple of `peer`'s; under 1, also how many times faster (a one-decimal
    0.0× would hide it)."""
    if not (mine and peer and peer.p50_ms and mine.p50_ms):
        return "–"
    times = mine.p50_ms / peer.p50_ms
    return f"{times:.1f}×" if times >= 1 else f"{times:.2f}× ({1 / times:.0f}× faster)"


def markdown(report: ScaleReport) -> str:
    """The figures as markdown tables, one section per tenant size."""
    lines = [f"Machine: {report.machine}; {report.questions} questions per kind, as the application role.", ""]
    lines += [_row(["nodes", "documents", "graph rows", "ingest rows/s", "BM25 rebuild s", "HNSW build s",
                    "layout + portals s", "size MB"]), _row(["---"] * 8)]
    for s in report.sizes:
        b = s.built
        lines.append(_row([f"{b.nodes:,}", f"{b.documents:,}", f"{b.rows:,}", _num(b.rows_per_s, 0),
                           _num(b.bm25_rebuild_s, 1), _num(b.hnsw_build_s, 1), _num(b.layout_s, 1),
                           f"{b.size_mb:.0f}"]))
    lines.append("")
    for s in report.sizes:
        lines += _size_section(s)
    lines.append(f"Small tenant `{report.small_tenant}` among the large ones: {report.small_tenant_results} of "
                 f"{K} vector results for k = {K}.")
    if report.slopes:
        lines.append("Log-log slope of p50 latency against nodes (1 client): "
                     + ", ".join(f"{k} {v:.2f}" for k, v in report.slopes.items()) + ".")
    return "\n".join(lines) + "\n"


def _size_section(s: SizeReport) -> list[str]:
    lines = [f"**{s.built.nodes:,} nodes** (query embedding p50 {s.embed_p50_ms:.2f} ms, not counted below)", "",
             _row(["query", "clients", "p50 ms", "p95 ms", "p99 ms", "queries/s", "p50 ÷ peer's p50"]),
             _row(["---"] * 7)]
    peer_of = {"bm25": _find(s.peers, "bm25s"), "vector": _find(s.peers, "exact vectors (numpy)")}
    for lat in [*s.latencies, *s.peers, *s.frequent]:
        peer = peer_of.get(lat.kind) if lat.clients == 1 else None
        if lat.kind == "bm25 (frequent terms)":
            peer = _find(s.frequent, "ts_rank_cd")
        lines.append(_row([lat.kind, str(lat.clients), f"{lat.p50_ms:.1f}", f"{lat.p95_ms:.1f}", f"{lat.p99_ms:.1f}",
                           f"{lat.qps:.0f}", ratio(lat, peer) if peer else ""]))
    lines += ["", "HNSW: " + ", ".join(f"ef_search {h.ef_search}: recall@10 {h.recall_at_10:.3f} at "
                                       f"{h.p50_ms:.1f} ms" for h in s.hnsw), ""]
    return lines


def _num(value: float | None, digits: int) -> str:
    return "reused" if value is None else f"{value:,.{digits}f}"


def _latency_plot(report: ScaleReport, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    kinds = dict.fromkeys(lat.kind for s in report.sizes for lat in s.latencies)
    for kind in kinds:
        points = [(s.built.nodes, lat.p50_ms) for s in report.sizes for lat in s.latencies
                  if lat.kind == kind and lat.clients == 1]
        ax.plot(*zip(*sorted(points), strict=True), marker="o", label=kind)
    ax.set(xscale="log", yscale="log", xlabel="nodes in the tenant", ylabel="p50 latency (ms), 1 client",
           title="Latency against corpus size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _hnsw_plot(report: ScaleReport, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for s in report.sizes:
        ax.plot([h.p50_ms for h in s.hnsw], [h.recall_at_10 for h in s.hnsw], marker="o",
                label=f"{s.built.nodes:,} nodes")
        for h in s.hnsw:
            ax.annotate(str(h.ef_search), (h.p50_ms, h.recall_at_10), fontsize=7)
    ax.set(xlabel="p50 latency (ms)", ylabel="recall@10 against exact search", title="HNSW: recall per ef_search")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
