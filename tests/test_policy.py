"""`make_policy`: loosely typed input validated, clamped to the server's limits, or refused."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from tortus_pg.errors import InvalidInput
from tortus_pg.policy import PORTAL_PREFERENCES, Limits, TraversalPolicy, make_policy

INTEGERS = {"max_hops": 1, "max_ms": 50, "max_tokens": 50, "failover_level": 0}  # field: minimum
CAPPED = ("max_hops", "max_ms", "max_tokens")  # fields lowered to `Limits`
FLAGS = ("local_only", "explain", "no_personalization")


def test_no_input_gives_the_defaults_without_warnings() -> None:
    assert make_policy() == (TraversalPolicy(), [])
    assert make_policy({}) == (TraversalPolicy(), [])
    assert make_policy({name: None for name in INTEGERS}) == (TraversalPolicy(), [])


def test_valid_values_are_taken_as_given() -> None:
    values = {"max_hops": 3, "max_ms": 500, "max_tokens": 400, "failover_level": 2, "local_only": True,
              "explain": True, "no_personalization": True, "semantic_group": "payments", "portal_preference": "avoid",
              "traversal": "age", "min_support": 0.4}
    policy, warnings = make_policy(values)
    assert policy.to_json() == values and warnings == []


def test_traversal_is_sql_or_age() -> None:
    assert make_policy({"traversal": "sql"})[0].traversal == "sql"
    with pytest.raises(InvalidInput, match="^policy traversal must be one of sql, age"):
        make_policy({"traversal": "cypher"})


@pytest.mark.parametrize("name", INTEGERS)
@pytest.mark.parametrize("value", ["3", 2.5, True, [2]])
def test_integer_fields_refuse_other_types(name: str, value: Any) -> None:
    with pytest.raises(InvalidInput, match=f"^policy {name} must be an integer, got "):
        make_policy({name: value})


@pytest.mark.parametrize("name", FLAGS)
@pytest.mark.parametrize("value", [1, 0, "true", "no"])
def test_flags_refuse_anything_but_booleans(name: str, value: Any) -> None:
    with pytest.raises(InvalidInput, match=f"^policy {name} must be true or false, got "):
        make_policy({name: value})


@pytest.mark.parametrize(("name", "minimum"), INTEGERS.items())
def test_integers_below_their_minimum_are_refused(name: str, minimum: int) -> None:
    with pytest.raises(InvalidInput, match=f"^policy {name} must be at least {minimum}, got {minimum - 1}$"):
        make_policy({name: minimum - 1})
    assert getattr(make_policy({name: minimum})[0], name) == minimum


@pytest.mark.parametrize("name", CAPPED)
def test_values_above_the_limits_are_clamped_with_a_warning(name: str) -> None:
    limits = Limits(max_hops=3, max_ms=1_000, max_tokens=500)
    cap = getattr(limits, name)
    policy, warnings = make_policy({name: cap + 1}, limits)
    assert getattr(policy, name) == cap
    assert warnings == [f"{name} {cap + 1} is above the server limit; using {cap}"]
    assert make_policy({name: cap}, limits) == (TraversalPolicy(**{name: cap}), [])


def test_every_clamped_field_gets_its_own_warning() -> None:
    policy, warnings = make_policy({"max_hops": 99, "max_ms": 10**9, "max_tokens": 10**6})
    limits = Limits()
    assert (policy.max_hops, policy.max_ms, policy.max_tokens) == (limits.max_hops, limits.max_ms, limits.max_tokens)
    assert len(warnings) == 3 and all(w.split()[0] in CAPPED for w in warnings)


def test_failover_level_above_two_is_refused_not_clamped() -> None:
    assert make_policy({"failover_level": 2})[0].failover_level == 2
    with pytest.raises(InvalidInput, match="^policy failover_level must be at most 2, got 3$"):
        make_policy({"failover_level": 3})


def test_unknown_fields_are_refused_listing_the_known_ones() -> None:
    with pytest.raises(InvalidInput, match="unknown policy field 'max_depth'") as raised:
        make_policy({"max_hops": 2, "max_depth": 3})
    assert str(raised.value).endswith("known: " + ", ".join(f.name for f in fields(TraversalPolicy)))


@pytest.mark.parametrize("preference", PORTAL_PREFERENCES)
def test_each_portal_preference_is_accepted(preference: str) -> None:
    assert make_policy({"portal_preference": preference})[0].portal_preference == preference


@pytest.mark.parametrize("value", ["sometimes", "AUTO", "", 1, True])
def test_other_portal_preferences_are_refused_naming_the_choices(value: Any) -> None:
    with pytest.raises(InvalidInput, match="^policy portal_preference must be one of auto, prefer, avoid$"):
        make_policy({"portal_preference": value})


@pytest.mark.parametrize("group", ["payments", "g", "x" * 200])
def test_semantic_group_names_are_accepted(group: str) -> None:
    assert make_policy({"semantic_group": group})[0].semantic_group == group


@pytest.mark.parametrize("value", ["", "   ", "x" * 201, 5, ["payments"]])
def test_bad_semantic_groups_are_refused(value: Any) -> None:
    with pytest.raises(InvalidInput, match="^policy semantic_group must be a subgraph name of 1 to 200 characters$"):
        make_policy({"semantic_group": value})


@pytest.mark.parametrize("value", [0, 0.35, 1])
def test_min_support_takes_a_number_from_zero_to_one(value: float) -> None:
    assert make_policy({"min_support": value})[0].min_support == value


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan"), "0.4", True])
def test_other_min_supports_are_refused_naming_the_range(value: Any) -> None:
    with pytest.raises(InvalidInput, match="^policy min_support must be a number from 0 to 1, got "):
        make_policy({"min_support": value})
