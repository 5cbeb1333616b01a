"""Paired differences between strategies of one `tortus-pg eval --json-out` file, or between two
runs of the same dataset.

    python benchmarks/paired.py run.json --strategy tortus --against hybrid,vector,bm25 [--metric recall@5]
    python benchmarks/paired.py run.json --baseline before.json --strategy tortus,hybrid

Prints, for each other strategy, the mean per-question difference of the metric and its
paired-bootstrap 95% interval (the same questions resampled together), and the p95 latency
ratio. With --baseline, each strategy of --strategy is compared with itself in the baseline run,
question by question (the questions both runs scored). A difference whose interval excludes
zero is a win (or a loss) at that level.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tortus_pg.eval.metrics import paired_bootstrap_diff


def scores(run: dict[str, Any], strategy: str, metric: str) -> dict[str, float]:
    """Question id -> the strategy's metric, for the questions it scored."""
    out: dict[str, float] = {}
    for q in run["questions"]:
        value = q["results"].get(strategy, {}).get("metrics", {}).get(metric)
        if value is not None:
            out[q["id"]] = value
    return out


def compare(mine: dict[str, float], other: dict[str, float]) -> tuple[float, float, float, int, str]:
    """(mean difference, its 95% interval, questions, verdict) over the questions both scored."""
    both = [q for q in mine if q in other]
    diff, lo, hi = paired_bootstrap_diff([mine[q] for q in both], [other[q] for q in both])
    verdict = "win" if lo > 0 else "loss" if hi < 0 else "no difference"
    return diff, lo, hi, len(both), verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="JSON written by tortus-pg eval --json-out")
    parser.add_argument("--strategy", default="tortus", help="a strategy; with --baseline, a comma-separated list")
    parser.add_argument("--against", default="hybrid,vector,bm25")
    parser.add_argument("--baseline", type=Path, help="another run of the same dataset to compare with")
    parser.add_argument("--metric", default="recall@5")
    args = parser.parse_args()
    run = json.loads(args.run.read_text())
    if args.baseline is not None:
        before = json.loads(args.baseline.read_text())
        print(f"{run['dataset']}: {args.run.name} against {args.baseline.name} on {args.metric} "
              "(paired bootstrap, 95%)")
        for name in [s.strip() for s in args.strategy.split(",") if s.strip()]:
            diff, lo, hi, n, verdict = compare(scores(run, name, args.metric), scores(before, name, args.metric))
            print(f"  {name:10s} {diff:+.3f} [{lo:+.3f}, {hi:+.3f}]  n={n:4d}  {verdict}")
        return
    mine = args.strategy
    p95 = {name: s.get("latency_p95_ms") for name, s in run["strategies"].items()}
    print(f"{run['dataset']}: {mine} against others on {args.metric} (paired bootstrap, 95%)")
    for other in [o.strip() for o in args.against.split(",") if o.strip()]:
        diff, lo, hi, n, verdict = compare(scores(run, mine, args.metric), scores(run, other, args.metric))
        ratio = p95[mine] / p95[other] if p95.get(mine) and p95.get(other) else float("nan")
        print(f"  vs {other:10s} {diff:+.3f} [{lo:+.3f}, {hi:+.3f}]  n={n:4d}  {verdict:13s}"
              f"  p95 {p95.get(mine, 0):.0f} ms vs {p95.get(other, 0):.0f} ms ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
