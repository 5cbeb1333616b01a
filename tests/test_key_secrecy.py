"""An API key never crosses the wire to the server, where a statement log could keep it: keys
are created and checked by their SHA-256 (the protocol traced with libpq's own tracing)."""

from __future__ import annotations

from pathlib import Path

import psycopg

from tortus_pg import tenants
from tortus_pg.db import APP_ROLE


def test_creating_and_checking_a_key_sends_only_its_hash(conn: psycopg.Connection, tmp_path: Path) -> None:
    tenants.create_tenant(conn, "wire")
    trace = tmp_path / "protocol.trace"
    with trace.open("w") as out:
        conn.pgconn.trace(out.fileno())
        try:
            new = tenants.create_key(conn, "wire", ["query"])
            conn.execute(f"set local role {APP_ROLE}")
            found = tenants.authenticate(conn, new.key)
            missing = tenants.authenticate(conn, new.key + "x")
        finally:
            conn.pgconn.untrace()
    sent = trace.read_text(errors="replace")
    assert found == ("wire", ["query"]) and missing is None
    assert tenants.key_hash(new.key) in sent  # the trace holds what was sent …
    assert new.key not in sent  # … and the key is not part of it
