"""`tortus-pg bench --scale`: the scale suite from the command line, with progress and a table."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import Progress

from tortus_pg.db import database_url
from tortus_pg.embed import make_embedder
from tortus_pg.errors import InvalidInput
from tortus_pg.scale.report import write
from tortus_pg.scale.suite import run_suite

from .context import console, err_console, owner_connection, settings
from .eval import COLUMNS

MAX_NODES = 10_000_000


def parse_sizes(text: str) -> list[int]:
    """"10k,100k" -> [10000, 100000]; sizes in nodes, each at least 2,000 (above the small tenant)."""
    sizes = []
    for part in (p.strip().lower() for p in text.split(",") if p.strip()):
        scale = {"k": 1_000, "m": 1_000_000}.get(part[-1], 1)
        digits = part[:-1] if scale > 1 else part
        if not digits.isdigit() or not 2_000 <= int(digits) * scale <= MAX_NODES:
            raise InvalidInput(f"--scale: {part!r} is not a size between 2k and 10m nodes (e.g. --scale 10k,100k)")
        sizes.append(int(digits) * scale)
    if not sizes:
        raise InvalidInput("--scale needs at least one size, e.g. --scale 10k,100k")
    return sorted(set(sizes))


def scale(ctx: typer.Context, sizes: str, questions: int, clients: str, out: Path, reuse: bool) -> None:
    """Build the scale tenants (hash embedder, 384 dimensions) and time every query kind."""
    s = settings(ctx)
    counts = sorted({int(c) for c in clients.split(",") if c.strip().isdigit() and 1 <= int(c) <= 64})
    if not counts:
        raise InvalidInput("--clients: give client counts between 1 and 64, e.g. --clients 1,4")
    if not 10 <= questions <= 10_000:
        raise InvalidInput("--questions must be between 10 and 10000")
    with owner_connection(ctx):  # the schema must be current before anything is built
        pass
    with Progress(*COLUMNS, console=err_console, transient=True) as bar:
        task = bar.add_task("starting", total=1)

        def step(what: str, done: int, total: int) -> None:
            bar.update(task, description=what, completed=done, total=total)

        report = run_suite(database_url(s), parse_sizes(sizes), make_embedder("hash", dim=384), questions=questions,
                           clients=counts, reuse=reuse, on_step=step)
    paths = write(report, out)
    console.print((out / "scale.md").read_text(), markup=False)
    console.print("wrote " + ", ".join(str(p) for p in paths))
