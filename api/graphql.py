"""GraphQL at `POST /graphql` (`graphql_schema` holds the schema).

Before any resolver runs, a request is parsed with a token cap and validated with the depth,
alias and (in production settings) introspection rules; a document over a limit gets errors and
no data. A request runs in one transaction of the caller's tenant, committed only when no
field failed, so a mutation never leaves part of its work behind.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from graphql import (
    ASTValidationRule,
    ExecutionResult,
    FieldNode,
    GraphQLError,
    OperationDefinitionNode,
    OperationType,
    execute,
    parse,
    specified_rules,
    validate,
)
from graphql.language import DocumentNode, Node

from .auth import Principal, principal, service
from .errors import ApiError
from .graphql_schema import SCHEMA, Context
from .service import ApiLimits, Service


class _Rollback(Exception):
    """A field failed: undo the request's writes."""


def _depth(node: Node, fragments: dict[str, Any], seen: frozenset[str] = frozenset()) -> int:
    """The deepest field nesting under `node`, through fragments (each at most once per path)."""
    selection_set = getattr(node, "selection_set", None)
    if selection_set is None:
        return 0
    deepest = 0
    for child in selection_set.selections:
        if isinstance(child, FieldNode):
            deepest = max(deepest, 1 + _depth(child, fragments, seen))
        elif (name := getattr(getattr(child, "name", None), "value", None)) is not None:
            if name not in seen and name in fragments:  # a fragment spread
                deepest = max(deepest, _depth(fragments[name], fragments, seen | {name}))
        else:  # an inline fragment
            deepest = max(deepest, _depth(child, fragments, seen))
    return deepest


def _limit_rules(limits: ApiLimits) -> list[type[ASTValidationRule]]:
    """Validation rules for the depth and alias caps, and against introspection when it is off."""

    class Limits(ASTValidationRule):
        def enter_document(self, node: DocumentNode, *_: Any) -> None:
            fragments = {d.name.value: d for d in node.definitions if not isinstance(d, OperationDefinitionNode)}
            for operation in (d for d in node.definitions if isinstance(d, OperationDefinitionNode)):
                if (depth := _depth(operation, fragments)) > limits.graphql_depth:
                    self.report_error(GraphQLError(f"the query is {depth} levels deep; at most "
                                                   f"{limits.graphql_depth} are allowed"))
            aliases = sum(1 for _ in _aliased(node))
            if aliases > limits.graphql_aliases:
                self.report_error(GraphQLError(f"the query uses {aliases} aliases; at most "
                                               f"{limits.graphql_aliases} are allowed"))

        def enter_field(self, node: FieldNode, *_: Any) -> None:
            if not limits.introspection and node.name.value in ("__schema", "__type"):
                self.report_error(GraphQLError("introspection is turned off on this server", node))

    return [Limits]


def _aliased(node: Node) -> Any:
    """Every aliased field of a document."""
    for key in node.keys:
        value = getattr(node, key, None)
        for child in value if isinstance(value, tuple) else (value,):
            if isinstance(child, Node):
                if isinstance(child, FieldNode) and child.alias is not None:
                    yield child
                yield from _aliased(child)


def _errors(*messages: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"errors": [{"message": m} for m in messages]}, status_code=status)


def _run(svc: Service, caller: Principal, document: DocumentNode, variables: dict[str, Any] | None,
         operation: str | None) -> ExecutionResult:
    result: ExecutionResult | None = None
    try:
        with svc.scoped(caller) as conn:
            result = execute(SCHEMA.graphql_schema, document, context_value=Context(svc, caller, conn),
                             variable_values=variables, operation_name=operation)
            if result.errors and _is_mutation(document, operation):
                raise _Rollback
    except _Rollback:
        pass
    assert result is not None
    return result


def _is_mutation(document: DocumentNode, operation: str | None) -> bool:
    return any(isinstance(d, OperationDefinitionNode) and d.operation == OperationType.MUTATION
               and (operation is None or (d.name is not None and d.name.value == operation))
               for d in document.definitions)


def _request(body: bytes) -> tuple[str, dict[str, Any] | None, str | None]:
    """The query, variables and operation name of a GraphQL-over-HTTP JSON body."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_request", "the body is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("query"), str):
        raise ApiError(400, "invalid_request", "send a JSON object with a 'query' string")
    variables, operation = data.get("variables"), data.get("operationName")
    if variables is not None and not isinstance(variables, dict):
        raise ApiError(400, "invalid_request", "'variables' must be an object")
    if operation is not None and not isinstance(operation, str):
        raise ApiError(400, "invalid_request", "'operationName' must be a string")
    return data["query"], variables, operation


def mount(app: FastAPI, limits: ApiLimits) -> None:
    """Add `POST /graphql` to `app`."""
    rules = [*specified_rules, *_limit_rules(limits)]

    @app.post("/graphql", tags=["graphql"], summary="GraphQL: ask, search, concept, trace, sources; ingest")
    async def graphql(request: Request, caller: Principal = Depends(principal),
                      svc: Service = Depends(service)) -> JSONResponse:
        query, variables, operation = _request(await request.body())
        try:
            document = parse(query, max_tokens=limits.graphql_tokens)
        except GraphQLError as exc:
            return _errors(exc.message)
        if problems := validate(SCHEMA.graphql_schema, document, rules):
            return _errors(*(p.message for p in problems))
        result = await run_in_threadpool(_run, svc, caller, document, variables, operation)
        return JSONResponse(result.formatted)
