"""`tortus-pg golden-set` and `tortus-pg audit`: check a golden question set and review it by hand."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from tortus_pg.eval import golden

from .context import console

audit_app = typer.Typer(
    help="Review a golden set by hand: export a CSV sheet, fill in verdicts, import them back.",
    no_args_is_help=True,
)

GOLDEN_HELP = "Golden-set .jsonl file (default: the packaged demo set)."


def golden_set(
    golden_file: Path = typer.Argument(None, help=GOLDEN_HELP, show_default=False),
    out: Path = typer.Option(None, "--out", help="Write a copy here (a .jsonl file) to start your own reviewed set."),
    force: bool = typer.Option(False, "--force", help="Replace the --out file if it exists."),
) -> None:
    """Validate a golden set and summarize it by type, hops, negatives and review status."""
    path, dataset = golden.load_golden(golden_file)
    if out is not None:
        golden.copy_golden(path, out, force=force)
    summary = golden.summarize(dataset.questions)
    console.print(
        f"{path}: {summary.questions} questions, {summary.negatives} negative, "
        f"{summary.approved} of {summary.questions} approved"
    )
    table = Table("by", "value", "questions")
    for group, counts in (("type", summary.by_type), ("hops", summary.by_hops), ("status", summary.by_status)):
        for i, (value, n) in enumerate(counts.items()):
            table.add_row(group if i == 0 else "", value, str(n))
        table.add_section()
    console.print(table)
    if out is not None:
        console.print(f"wrote {out}; review it with `tortus-pg audit export {out} --out review.csv`")


@audit_app.command("export")
def export(
    golden_file: Path = typer.Argument(None, help=GOLDEN_HELP, show_default=False),
    out: Path = typer.Option(..., "--out", help="The CSV review sheet to write."),
    force: bool = typer.Option(False, "--force", help="Replace the --out file if it exists."),
) -> None:
    """Write a CSV sheet with one row per question and empty review_status, reviewer and comment columns."""
    rows = golden.export_csv(golden_file, out, force=force)
    console.print(f"wrote {out}: {rows} questions; fill review_status with {', '.join(golden.REVIEW_STATUSES)}")


@audit_app.command("import")
def import_(
    csv_file: Path = typer.Argument(..., help="A review sheet written by `tortus-pg audit export`, filled in."),
    golden_file: Path = typer.Argument(None, help="Your golden-set .jsonl file to update.", show_default=False),
    reviewer: str = typer.Option(None, "--reviewer", help="Reviewer for rows whose reviewer cell is empty."),
) -> None:
    """Record the sheet's verdicts (status, reviewer, time, comment) in the golden set; all rows or nothing."""
    result = golden.import_csv(csv_file, golden_file, reviewer=reviewer)
    counts = ", ".join(f"{n} {status}" for status, n in result.reviewed.items())
    console.print(
        f"recorded {sum(result.reviewed.values())} reviews ({counts}); {result.untouched} questions untouched"
    )
