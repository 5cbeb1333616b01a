"""How well the evidence supports an answer: one calibrated score, and the threshold to answer.

Synthesis measures signals of the claims it drafts; a logistic model (`query.logistic`)
combines them into a probability that the question is answerable from this corpus. The weights
are fitted on public multi-hop sets, each question asked twice: over the full corpus
(answerable) and over the corpus without its gold passages (its unanswerable twin, as
MuSiQue-Full builds contrast questions), and on a handbook by another author with its
unanswerable questions. `benchmarks/calibrate.py` fits them from `tortus-pg
eval SET --twins --json-out …` files and prints the curves the threshold is chosen from
(docs/evaluation.md); nothing in them is keyed to a corpus's wording. Twins that keep what the
question names (`--twin-gap answer`) are told apart far less well, by this model and by every
signal measured (docs/benchmarks.md).
"""

from __future__ import annotations

import psycopg

from tortus_pg.query.logistic import Model

# The share of the question's weight the best evidence chain covers, the best claim's dense
# similarity to the question, and whether the question names something the corpus has a
# document about (a concept some chunk defines). Richer sets (the claims' and all the
# evidence's coverage, the named things found or heading an evidence item, the old rule
# checks) fitted no better on the development sets (docs/benchmarks.md).
FEATURES = ("coverage", "dense", "named")

# Fitted by `python benchmarks/calibrate.py --fit hotpotqa musique aldermoor` (multi-hop sets
# with their unanswerable twins, and a handbook with its negatives, each weighing alike);
# checked on 2wiki-train500 and quillon (docs/evaluation.md has the command and the curves).
MODEL = Model(-3.372, {"coverage": 1.84, "dense": 3.448, "named": 1.46}, "minilm:all-MiniLM-L6-v2")
# The same fit without the dense signal: for another embedder (its similarities have another
# scale) or none.
LEXICAL = Model(-1.961, {"coverage": 2.549, "named": 1.561})
THRESHOLD = 0.5  # answer when support is at least this


def model_for(embedder: str | None) -> Model:
    """The support model for the signals at hand: with the dense signal only for the embedder
    it was fitted on."""
    return MODEL if embedder is not None and embedder == MODEL.embedder else LEXICAL


_TENANT = "select (settings->>'min_support')::float8 from tortus.tenant where tenant_id = tortus.current_tenant()"


def tenant_threshold(conn: psycopg.Connection) -> float:
    """The support the current tenant's answers need: its own setting (`tortus-pg tenant
    min-support`, chosen on its golden set's abstention curve), else THRESHOLD."""
    row = conn.execute(_TENANT).fetchone()
    return THRESHOLD if row is None or row[0] is None else float(row[0])
