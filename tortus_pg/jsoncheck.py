"""A small JSON Schema checker for model output.

It covers what strict structured-output schemas use (type, properties, required,
additionalProperties, items, enum, const, anyOf, local $ref) plus numeric and length
bounds, and ignores other keywords; a full validator would be one more dependency for
schemas this module writes itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()  # JSON Schema counts 2.0 as an integer
    return isinstance(value, _TYPES.get(name, ()))


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    node: Any = root
    for part in ref.removeprefix("#/").split("/") if ref != "#" else []:
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"unresolvable $ref {ref!r}")
        node = node[part]
    if not isinstance(node, Mapping):
        raise ValueError(f"$ref {ref!r} is not a schema")
    return node


def schema_errors(
    value: Any, schema: Mapping[str, Any], *, root: Mapping[str, Any] | None = None,
    path: str = "$",
) -> list[str]:
    """Every way `value` breaks `schema`, as 'path: problem' strings (empty when valid)."""
    root = schema if root is None else root
    if "$ref" in schema:
        return schema_errors(value, _resolve(schema["$ref"], root), root=root, path=path)
    if "anyOf" in schema:
        options = [schema_errors(value, s, root=root, path=path) for s in schema["anyOf"]]
        if all(options):
            return [f"{path}: matches none of the anyOf choices ({options[0][0]})"]
    wanted = schema.get("type")
    if wanted is not None:
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        if not any(_is(value, n) for n in names):
            return [f"{path}: expected {' or '.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} is not one of {schema['enum']!r}"]
    if "const" in schema and value != schema["const"]:
        return [f"{path}: expected {schema['const']!r}"]
    errors: list[str] = []
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        errors += [f"{path}: missing required key {k!r}" for k in schema.get("required", [])
                   if k not in value]
        for key, item in value.items():
            if key in props:
                errors += schema_errors(item, props[key], root=root, path=f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected key {key!r}")
    elif isinstance(value, list):
        errors += _bounds(len(value), schema, "minItems", "maxItems", path, "items")
        if isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(value):
                errors += schema_errors(item, schema["items"], root=root, path=f"{path}[{i}]")
    elif isinstance(value, str):
        errors += _bounds(len(value), schema, "minLength", "maxLength", path, "characters")
    elif _is(value, "number"):
        errors += _bounds(value, schema, "minimum", "maximum", path, "")
    return errors


def _bounds(
    n: float, schema: Mapping[str, Any], lo: str, hi: str, path: str, unit: str
) -> list[str]:
    what = f"{n} {unit}".strip()
    if lo in schema and n < schema[lo]:
        return [f"{path}: {what} is below the {lo} of {schema[lo]}"]
    if hi in schema and n > schema[hi]:
        return [f"{path}: {what} is above the {hi} of {schema[hi]}"]
    return []
