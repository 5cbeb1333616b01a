"""The walk over typed edges: from the seeds and the concepts the question names, within a torus
radius the density around the seeds sets (SQL `tortus.supported_traverse`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tortus_pg.evidence import Reached
from tortus_pg.policy import TraversalPolicy
from tortus_pg.query.state import State

# The walk's bounds: edges followed per node, frontier kept per hop, nodes kept in all (300 and
# 600 gave the same recall@5 on 100-200 questions of each multi-hop set; the smaller walk is faster).
FAN_OUT, BEAM_WIDTH, MAX_NODES = 30, 60, 300
# The walk's depth, within the hop budget: chunk -> concept -> chunk. A third hop cost 70 ms a
# question on musique for the same recall@5; longer budgets go to relation chains and bridges.
WALK_HOPS = 2
BASE_RADIUS = math.pi / 2  # radians on the torus, before the density adjustment (0.5x to 2x)

_DENSITY = "select node_id, neighbours, expected from tortus.local_density(%s::bigint[], %s, %s)"
_WALK = """
select t.node_id, t.hop, t.path, t.edge_types, t.directions, t.hop_scores, t.reasons, t.score,
       t.torus_distance, t.pruned, t.prune_reason, t.kind, t.label, t.min_confidence, t.spans
from tortus.supported_traverse(%(seeds)s::bigint[], %(v)s, %(policy)s) t
"""
_SUBGRAPHS = """
select count(distinct m.subgraph) from tortus.membership m
where m.tenant_id = tortus.current_tenant() and m.node_id = any(%s::bigint[])
"""


def walk(conn: psycopg.Connection, state: State) -> None:
    """Stage: the walk from the seeds and the walk's roots within the radius (stage `density`),
    with a portal hop allowed when the seeds span several subgraphs (stage `domains`) or the
    policy prefers portals; when it reaches fewer than k chunks and the failover level allows,
    walked again over the whole torus (stage `walk_wide`)."""
    options, policy, clock = state.options, state.options.policy, state.clock
    no_density: tuple[float | None, list[dict[str, Any]]] = (None, [])
    state.radius, state.density = clock.attempt(
        "density", lambda: walk_radius(conn, state.walk_seeds, options.layout), no_density)
    domains = clock.attempt("domains", lambda: _subgraphs(conn, state.walk_seeds), 0)
    portals = 1 if policy.portal_preference == "prefer" or (policy.portal_preference == "auto" and domains > 1) else 0
    state.walk_policy = walk_policy(policy, state.radius, portals, options.layout)
    no_walk: tuple[list[Reached], list[dict[str, Any]]] = ([], [])
    state.reached, state.pruned = clock.attempt("walk", lambda: walked(conn, state), no_walk)
    state.portals = [{"stage": "walk", "allowed": state.walk_policy["max_portal_hops"] > 0,
                      "why": f"seeds span {domains} subgraph(s); portal_preference {policy.portal_preference}"}]
    beyond_seeds = len([r for r in state.reached if r.hop > 0])
    if policy.failover_level >= 1 and state.radius is not None and beyond_seeds < options.k:
        # Too little inside the radius: widen to the whole torus once.
        state.walk_policy = {**state.walk_policy, "torus_radius": None}
        again = clock.attempt("walk_wide", lambda: walked(conn, state), None)
        if again is not None:
            state.reached, state.pruned = again
            state.notes.append("the walk found too little within the torus radius and was widened")


def walk_radius(
    conn: psycopg.Connection, seeds: Sequence[int], layout: str | None = None
) -> tuple[float | None, list[dict[str, Any]]]:
    """The torus radius of the walk: BASE_RADIUS scaled by sqrt(expected / neighbours) around each
    seed (narrower where chunks crowd, wider where they are sparse), the widest seed's; None when
    no seed has coordinates."""
    rows = conn.execute(_DENSITY, [list(seeds), BASE_RADIUS, layout]).fetchall()
    radii = []
    detail = []
    for node_id, neighbours, expected in rows:
        scale = math.sqrt(max(expected, 1.0) / max(neighbours, 1))
        radius = BASE_RADIUS * min(max(scale, 0.5), 2.0)
        radii.append(radius)
        detail.append({"node_id": node_id, "neighbours": neighbours, "expected": round(expected, 2),
                       "radius": round(radius, 3)})
    return (max(radii) if radii else None), detail


def _subgraphs(conn: psycopg.Connection, seeds: Sequence[int]) -> int:
    row = conn.execute(_SUBGRAPHS, [list(seeds)]).fetchone()
    return int(row[0]) if row else 0


def walk_policy(policy: TraversalPolicy, radius: float | None, portals: int, layout: str | None) -> dict[str, Any]:
    """The `tortus.traverse` policy of the engine's walk: its bounds within `policy`, the torus
    `radius`, `portals` hops allowed and the coordinates of `layout`."""
    return {
        "layout": layout,
        "max_hops": min(policy.max_hops, WALK_HOPS), "fan_out": FAN_OUT, "beam_width": BEAM_WIDTH,
        "max_nodes": MAX_NODES,
        "max_portal_hops": 0 if policy.local_only else portals, "local_only": policy.local_only,
        "subgraphs": [policy.semantic_group] if policy.semantic_group else None, "torus_radius": radius,
        # Co-occurrence links are too many and too weak to walk (nor worth reading to report);
        # reading order stays.
        "edge_types_deny": ["related_to"], "report_blocked": False,
        "traversal": policy.traversal,
    }


def walked(conn: psycopg.Connection, state: State) -> tuple[list[Reached], list[dict[str, Any]]]:
    """The chunks a walk under `state.walk_policy` reaches from the seeds and the roots, and the
    candidates it pruned."""
    reached: list[Reached] = []
    pruned: list[dict[str, Any]] = []
    rows = conn.execute(_WALK, {"seeds": [*state.walk_seeds, *state.roots], "v": state.question.vector,
                                "policy": Jsonb(state.walk_policy)}).fetchall()
    for (node_id, hop, path, types, dirs, _scores, reasons, score, dist, is_pruned, why, kind, label,
         min_conf, spans) in rows:
        if is_pruned:
            pruned.append({"node_id": node_id, "label": label, "kind": kind, "hop": hop, "reason": why})
        elif kind == "chunk":
            reached.append(Reached(node_id, hop, list(path), list(types or []), list(dirs or []),
                                   list(reasons or []), float(score), dist, float(min_conf), int(spans)))
    return reached, pruned
