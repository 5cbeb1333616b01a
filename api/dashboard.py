"""The diagnostic dashboard at `/`: a plain HTML page that asks `POST /api/query` and shows the
answer, its path on the torus, the hops, the pruned candidates, the evidence and the budget.

The page's files and Plotly's JavaScript (from the installed `plotly` package) are served by the
app itself, so the browser needs nothing beyond it. `POST /api/map` gives the page the torus
coordinates of the nodes it shows, and of their direct neighbours.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse
from pydantic import BaseModel, ConfigDict, Field

from .auth import Principal, Scope, require, service
from .errors import ApiError
from .service import Service

router = APIRouter()

MAX_MAP_IDS = 300
NEIGHBOURS_PER_NODE = 8
MAX_NEIGHBOURS = 600

_STATIC = Path(__file__).parent / "static"
# The page loads nothing from elsewhere; Plotly sets inline styles on the elements it draws.
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
_MEDIA = {".js": "text/javascript", ".css": "text/css"}

# The asked nodes and, for each, its strongest few edge or portal neighbours. RLS scopes every
# table to the tenant; the explicit tenant filter lets the planner use the tenant-led indexes.
_MAP = """
with asked as (
    select node_id from tortus.node
    where tenant_id = tortus.current_tenant() and node_id = any(%(ids)s::bigint[])
), near as (
    select distinct nb.id from asked a
    cross join lateral (
        select id from (
            select dst as id, weight from tortus.edge where tenant_id = tortus.current_tenant() and src = a.node_id
            union all
            select src, weight from tortus.edge where tenant_id = tortus.current_tenant() and dst = a.node_id
            union all
            select dst, weight from tortus.portal where tenant_id = tortus.current_tenant() and src = a.node_id
            union all
            select src, weight from tortus.portal where tenant_id = tortus.current_tenant() and dst = a.node_id
        ) linked
        order by weight desc, id
        limit %(per_node)s
    ) nb
    where nb.id <> all(%(ids)s::bigint[])
    order by nb.id
    limit %(max_neighbours)s
)
select n.node_id, n.kind, n.label, n.theta, n.phi, n.node_id in (select id from near) as neighbour
from tortus.node n
where n.tenant_id = tortus.current_tenant()
  and (n.node_id in (select node_id from asked) or n.node_id in (select id from near))
order by n.node_id
"""


class MapRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node_ids: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(min_length=1, max_length=MAX_MAP_IDS)


class MapNode(BaseModel):
    node_id: int
    kind: str
    label: str
    theta: float | None = Field(description="torus angle in radians, [0, 2*pi); null when not placed")
    phi: float | None
    neighbour: bool = Field(description="not asked for: a direct neighbour of an asked node")


class MapResponse(BaseModel):
    nodes: list[MapNode]


@router.post("/api/map", tags=["dashboard"], response_model=MapResponse,
             summary="Torus coordinates of nodes and of their direct neighbours")
def torus_map(body: MapRequest, caller: Principal = Depends(require(Scope.QUERY)),
              svc: Service = Depends(service)) -> MapResponse:
    params = {"ids": sorted(set(body.node_ids)), "per_node": NEIGHBOURS_PER_NODE, "max_neighbours": MAX_NEIGHBOURS}
    with svc.scoped(caller) as conn:
        rows = conn.execute(_MAP, params).fetchall()
    return MapResponse(nodes=[MapNode(node_id=r[0], kind=r[1], label=r[2], theta=r[3], phi=r[4], neighbour=r[5])
                              for r in rows])


@router.get("/", include_in_schema=False)
def page() -> FileResponse:
    return FileResponse(_STATIC / "index.html", media_type="text/html",
                        headers={"Content-Security-Policy": _CSP, "Cache-Control": "no-cache"})


@router.get("/static/plotly.min.js", include_in_schema=False)
def plotly_js() -> FileResponse:
    bundled = resources.files("plotly").joinpath("package_data", "plotly.min.js")
    # It changes only with the installed plotly, so browsers may keep it for a day.
    return FileResponse(str(bundled), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})


@router.get("/static/{name}", include_in_schema=False)
def static_file(name: str) -> FileResponse:
    path = _STATIC / name
    # Only the page's own scripts and styles, never a path elsewhere in the package.
    if path.name != name or path.suffix not in _MEDIA or not path.is_file():
        raise ApiError(404, "not_found", f"no file {name[:100]!r}")
    return FileResponse(path, media_type=_MEDIA[path.suffix], headers={"Cache-Control": "no-cache"})
