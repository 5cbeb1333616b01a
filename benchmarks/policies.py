"""The engine under two traversal policies, alternating the two question by question on a scale
tenant, as the application role: the latency each costs and how often their evidence differs.

    python benchmarks/policies.py scale-100k --before failover_level=1 --after failover_level=0

Each side is a list of policy fields (`tortus_pg.policy.TraversalPolicy`) over the default
policy. Run it from the workspace that holds the scale tenants (`tortus-pg bench --scale 100k`
builds them); it uses that workspace's database (the embedded server unless TORTUS_DATABASE_URL
is set). Questions are embedded with `hash`, as the scale suite's are.
"""

from __future__ import annotations

import argparse
import json
from functools import partial

import psycopg
from alternating import compare

from tortus_pg.embed import Embedder
from tortus_pg.engine import Answer, answer
from tortus_pg.policy import TraversalPolicy, make_policy


def policy(fields: list[str]) -> TraversalPolicy:
    """The default policy with `fields` ("name=value", each value read as JSON where it parses:
    1, true, or a bare word such as prefer) set, checked as a request's would be."""
    return make_policy({name: _value(text) for name, text in (f.split("=", 1) for f in fields)})[0]


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tenant", help="a scale tenant (scale-10k, scale-100k, …)")
    parser.add_argument("--before", nargs="*", default=[], help="policy fields of the first side (name=value)")
    parser.add_argument("--after", nargs="*", default=[], help="policy fields of the second side (name=value)")
    parser.add_argument("--questions", type=int, default=50)
    args = parser.parse_args()
    sides = (partial(_ask, policy(args.before)), partial(_ask, policy(args.after)))
    compare(args.tenant, args.questions, sides,
            (f"before {' '.join(args.before) or 'default'}", f"after {' '.join(args.after) or 'default'}"))


def _ask(side: TraversalPolicy, conn: psycopg.Connection, embedder: Embedder, question: str) -> Answer:
    return answer(conn, question, embedder=embedder, store=False, policy=side)


if __name__ == "__main__":
    main()
