"""Fit the answer-support model on development sets and check it on others.

Each input is a JSON file written by `tortus-pg eval SET --strategies tortus --json-out F`:
with `--twins` for a multi-hop set (answerable questions and their unanswerable twins), or a
golden set whose negatives are the unanswerable side. The model is fitted on the --fit files
(each weighing alike) and every file gets its abstention curve and the figures at the chosen
threshold: answered when answerable, answered with the expected text, withheld when
unanswerable.

    python benchmarks/calibrate.py --fit hotpotqa.json musique.json --check 2wiki.json aldermoor.json \
        --plots docs/img
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tortus_pg.eval import abstention
from tortus_pg.query import logistic, support

Sides = tuple[list[dict[str, float]], list[bool], list[dict[str, float]]]


def _signals(metrics: dict[str, Any]) -> dict[str, float]:
    return {k.removeprefix("signal_"): float(v) for k, v in metrics.items() if k.startswith("signal_")}


def sides(path: Path) -> Sides:
    """(signals of the answerable questions, whether each reply holds the expected text,
    signals of the unanswerable ones) of one evaluation file."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    answerable, matched, unanswerable = [], [], []
    for q in doc["questions"]:
        metrics = q["results"]["tortus"]["metrics"]
        if q["negative"]:
            unanswerable.append(_signals(metrics))
        else:
            answerable.append(_signals(metrics))
            matched.append(bool(metrics.get("reply_match")))
    unanswerable += [_signals(t["metrics"]) for t in doc.get("twins", {}).get("questions", [])
                     if t["strategy"] == "tortus"]
    if not answerable or not unanswerable:
        raise SystemExit(f"{path}: needs answerable and unanswerable questions (run the eval with --twins)")
    return answerable, matched, unanswerable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", nargs="+", type=Path, required=True, help="evaluation files to fit on")
    parser.add_argument("--check", nargs="*", type=Path, default=[], help="evaluation files to check on")
    parser.add_argument("--threshold", type=float, default=support.THRESHOLD)
    parser.add_argument("--features", default=",".join(support.FEATURES), help="signals to fit on (comma-separated)")
    parser.add_argument("--plots", type=Path, help="write an abstention curve PNG per file here")
    args = parser.parse_args()
    data = {p: sides(p) for p in [*args.fit, *args.check]}
    sets = [(data[p][0], data[p][2]) for p in args.fit]
    features = args.features.split(",")
    model = logistic.fit(sets, features)
    lexical = logistic.fit(sets, [f for f in features if f != "dense"])
    embedders = {json.loads(p.read_text(encoding="utf-8"))["embedder"] for p in args.fit}
    if len(embedders) != 1:
        raise SystemExit(f"the --fit files were evaluated with different embedders: {sorted(embedders)}")
    print(f"MODEL = Model({model.bias}, {dict(model.weights)}, {embedders.pop()!r})")
    print(f"LEXICAL = Model({lexical.bias}, {dict(lexical.weights)})  # without dense similarity")
    for path, (answerable, matched, unanswerable) in data.items():
        points = abstention.curve([(model.probability(s), m) for s, m in zip(answerable, matched, strict=True)],
                                  [model.probability(s) for s in unanswerable], [args.threshold])
        p = points[0]
        role = "fit" if path in args.fit else "check"
        print(f"{role:5s} {path.stem}: answered when answerable {p.answered_when_answerable:.3f}, with the expected "
              f"text {p.answer_match:.3f}, withheld when unanswerable {p.withheld_when_unanswerable:.3f} "
              f"({len(answerable)} answerable, {len(unanswerable)} unanswerable)")
        if args.plots is not None:
            args.plots.mkdir(parents=True, exist_ok=True)
            curve = abstention.curve([(model.probability(s), m) for s, m in zip(answerable, matched, strict=True)],
                                     [model.probability(s) for s in unanswerable])
            abstention.plot(curve, f"{path.stem} ({role})", args.plots / f"abstention-{path.stem}.png",
                            args.threshold)


if __name__ == "__main__":
    main()
