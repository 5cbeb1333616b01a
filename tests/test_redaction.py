"""Passwords never reach a message: every form a connection string takes, and what the driver
echoes back when one is malformed or refused (real connection attempts to a closed port)."""

from __future__ import annotations

import pytest

from tortus_pg.db import connect, redact
from tortus_pg.errors import DatabaseUnavailable

SECRET = "S3cr3tPw"
URLS = [
    f"postgresql://app:{SECRET}@127.0.0.1:1/tortus",
    f"postgresql://app:p@ss{SECRET}@127.0.0.1:1/tortus",  # a password holding '@'
    f"postgresql://app@127.0.0.1:1/tortus?password={SECRET}&sslmode=disable",
    f"host=127.0.0.1 port=1 dbname=tortus user=app password={SECRET}",
    f"host=127.0.0.1 port=1 dbname=tortus password='{SECRET} with spaces'",
    f"postgresql://app:{SECRET}@127.0.0.1:notaport/tortus",  # malformed: the driver quotes it
    f"host=127.0.0.1 password={SECRET} dbname",  # malformed key/value string
    f"postgresql://app:{SECRET}@[::1/tortus",
]


@pytest.mark.parametrize("url", URLS)
def test_a_failed_connection_names_no_password(url: str) -> None:
    with pytest.raises(DatabaseUnavailable) as failed:
        connect(url)
    assert SECRET not in str(failed.value) and SECRET not in repr(failed.value)
    assert "***" in str(failed.value)


@pytest.mark.parametrize("url", URLS)
def test_redact_replaces_the_password_in_every_form(url: str) -> None:
    assert SECRET not in redact(url) and "***" in redact(url)


def test_redact_leaves_text_without_a_password_alone() -> None:
    text = "postgresql://app@db.internal:5432/tortus?sslmode=require host=x dbname=y"
    assert redact(text) == text
