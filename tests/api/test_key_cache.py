"""Keys the server has checked are remembered by their hash for a few seconds, no longer."""

from __future__ import annotations

import time

from tortus_pg.api.auth import Principal
from tortus_pg.api.service import KeyCache


def test_a_checked_key_is_remembered_until_its_time_runs_out() -> None:
    cache = KeyCache(ttl_s=0.2)
    caller = Principal("t", frozenset({"query"}))
    cache.put("digest", caller)
    assert cache.get("digest") == caller and cache.get("other") is None
    time.sleep(0.25)
    assert cache.get("digest") is None  # a revoked key stops working once this has passed


def test_the_cache_keeps_only_the_most_recent_keys() -> None:
    cache = KeyCache(ttl_s=60, size=2)
    for n in range(3):
        cache.put(f"d{n}", Principal(f"t{n}", frozenset()))
    assert cache.get("d0") is None and cache.get("d1") is not None and cache.get("d2") is not None
