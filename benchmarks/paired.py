"""Paired differences between strategies of one `tortus-pg eval --json-out` file.

    python benchmarks/paired.py run.json --strategy tortus --against hybrid,vector,bm25 [--metric recall@5]

Prints, for each other strategy, the mean per-question difference of the metric and its
paired-bootstrap 95% interval (the same questions resampled together), and the p95 latency
ratio. A difference whose interval excludes zero is a win (or a loss) at that level.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tortus_pg.eval.metrics import paired_bootstrap_diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="JSON written by tortus-pg eval --json-out")
    parser.add_argument("--strategy", default="tortus")
    parser.add_argument("--against", default="hybrid,vector,bm25")
    parser.add_argument("--metric", default="recall@5")
    args = parser.parse_args()
    run = json.loads(args.run.read_text())
    mine = args.strategy
    p95 = {name: s.get("latency_p95_ms") for name, s in run["strategies"].items()}
    print(f"{run['dataset']}: {mine} against others on {args.metric} (paired bootstrap, 95%)")
    for other in [o.strip() for o in args.against.split(",") if o.strip()]:
        pairs = [
            (q["results"][mine]["metrics"][args.metric], q["results"][other]["metrics"][args.metric])
            for q in run["questions"]
            if mine in q["results"] and other in q["results"]
            and q["results"][mine]["metrics"].get(args.metric) is not None
            and q["results"][other]["metrics"].get(args.metric) is not None
        ]
        diff, lo, hi = paired_bootstrap_diff([a for a, _ in pairs], [b for _, b in pairs])
        verdict = "win" if lo > 0 else "loss" if hi < 0 else "no difference"
        ratio = p95[mine] / p95[other] if p95.get(mine) and p95.get(other) else float("nan")
        print(f"  vs {other:10s} {diff:+.3f} [{lo:+.3f}, {hi:+.3f}]  n={len(pairs):4d}  {verdict:13s}"
              f"  p95 {p95.get(mine, 0):.0f} ms vs {p95.get(other, 0):.0f} ms ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
