"""docs/security.md names tests that exist: every file it cites, and every test by name."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
DOC = (TESTS.parent / "docs" / "security.md").read_text(encoding="utf-8")


def test_every_cited_test_exists() -> None:
    cited = re.findall(r"`((?:api/|ingest/)?test_\w+\.py)(?:::(\w+))?", DOC)
    assert len(cited) >= 15
    for path, name in cited:
        source = (TESTS / path).read_text(encoding="utf-8")
        assert not name or f"def {name}(" in source, f"docs/security.md cites {path}::{name}"
