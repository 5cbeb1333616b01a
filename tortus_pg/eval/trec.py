"""An evaluation run as TREC files, so trec_eval, ir-measures and ranx users can score tortus-pg's
strategies beside their own systems.

`<dataset>.qrels` holds every judged question's gold ids with their grades (`qid 0 docid
grade`); `<dataset>.<strategy>.run` holds each strategy's ranking (`qid Q0 docid rank score
tag`, the score falling with the rank, so tools that sort by score keep the order). Questions
with no gold (negatives, twins) are left out of both: nothing can score them.
"""

from __future__ import annotations

import re
from pathlib import Path

from tortus_pg.errors import InvalidInput
from tortus_pg.eval.summary import EvalRun

_SPACE = re.compile(r"\s")


def _field(value: str, what: str) -> str:
    if not value or _SPACE.search(value):
        raise InvalidInput(f"{what} {value!r} cannot be written to a TREC file (it is empty or holds white space)")
    return value


def write(run: EvalRun, out_dir: Path) -> list[Path]:
    """Write the run's qrels and one run file per strategy into `out_dir`; return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    judged = {q.id: q for q in run.dataset.questions if q.gold}
    name = _field(run.dataset.name, "dataset name")
    qrels = out_dir / f"{name}.qrels"
    qrels.write_text("".join(f"{_field(qid, 'question id')} 0 {_field(doc, 'id')} {int(grade)}\n"
                             for qid, q in judged.items() for doc, grade in q.gold.items()), encoding="utf-8")
    written = [qrels]
    for strategy in run.strategies:
        ranked = [r for r in run.results if r.strategy == strategy and r.question_id in judged]
        lines = [f"{r.question_id} Q0 {_field(doc, 'id')} {rank} {len(r.retrieved) - rank + 1} {strategy}\n"
                 for r in ranked for rank, doc in enumerate(r.retrieved, 1)]
        path = out_dir / f"{name}.{strategy}.run"
        path.write_text("".join(lines), encoding="utf-8")
        written.append(path)
    return written
