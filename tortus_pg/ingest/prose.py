"""Relations ordinary prose states without a cue word between two names.

Handbooks state facts in forms that a "X <cue> Y" pattern misses:

- key–value lines: "Owner: Trade Compliance Engineering", "**Lead:** Harriet Nkemelu",
  "Services owned: Billing, Ledger", and the rows of a two-column table with an empty header or
  one naming a key and a value ("| Field | Value |");
  their subject is the document's title entity, or the one thing the heading above them names;
- table rows: "| kestrel-2 | PostgreSQL 15 | Customs Gateway |", whose subject is the row's first
  cell and whose relation is named by the column's header;
- sentences whose subject refers to the title entity ("It is owned by …", "The team also
  maintains …", "We depend on …"), or whose object does ("Dario Feltham leads the team.").

This module reads those forms from text alone; `extract` turns them into typed edges between
the concepts found in them. Nothing here names a corpus's vocabulary: the keys that map to an
edge type are the generic words for ownership, leadership, dependency, cause, impact and
succession; any other key relates its subject and value as `related_to`, with the key kept in
the rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Span = tuple[int, int]

# "Key: value" at the start of a line, the key 1-4 words, optionally bold or a list item.
_KEY_VALUE = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*|__)?(?P<key>[A-Za-z][A-Za-z /&'-]{0,40}?)[ \t]*(?:\*\*|__)?[ \t]*:"
    r"(?:\*\*|__)?[ \t]+(?=\S)", re.M)
# A table row: "| a | b |"; a separator row holds only dashes, colons and bars.
_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.M)
_SEPARATOR = re.compile(r"^[ \t]*\|(?:[ \t]*:?-+:?[ \t]*\|)+[ \t]*$")
# A subject that refers back to what the document is about: a pronoun, or "the/this <noun>"
# with no name of its own, opening the sentence.
_REFERENCE = re.compile(
    r"^\W*(?:it|this|they|we|our\s+team|(?:the|this|our)\s+(?:[a-z-]+\s+){0,2}"
    r"(?:service|system|team|group|squad|component|application|platform|database|cluster|tool|"
    r"incident|outage|decision|policy|standard|document|page|api))\b",
)
# An object that refers back is a pronoun or a bare noun for a whole ("… leads the team.", "…
# owns it"): "the database cluster" on a service's page is the service's, not the service.
_OBJECT_REFERENCE = re.compile(
    r"(?:it|(?:the|this|our)\s+(?:service|system|team|group|squad|component|application|tool|incident|outage|"
    r"decision|policy|standard|document|page))\b")
_MAX_KEY_WORDS = 4
# What stands between a generic phrase and the name it is given ("the cluster named pg-core",
# "a cluster, kestrel-3", "the warehouse (Harbor)", "the broker `emqx-1`").
_APPOSITION = re.compile(r"\s*(?:,|\(|\s(?:named|called|known\s+as)\b)?\s*[`'\"“‘*_]*")
# What may follow a reference that ends its clause: punctuation, the text's end, or a word
# opening the next clause ("… leads the team that …"); not a name ("the cluster named X").
_CLAUSE_END = re.compile(
    r"\s*(?:[.,;:!?)]|$|(?:that|which|who|and|but|since|until|when|while|in|at|for|from|with|as)\b)")


@dataclass(frozen=True)
class KeyRelation:
    """The edge type a key names, and whether the value is the edge's source ("Services owned:
    X" under a team makes X owned_by the team)."""

    type: str
    value_first: bool


# Keys naming a relation the graph types; a key is read in lowercase with its spaces collapsed.
_KEY_TYPES: tuple[tuple[str, KeyRelation], ...] = (
    (r"(?:owner|owners|owning team|owned by|maintainer|maintainers|maintained by|team|steward)",
     KeyRelation("owned_by", False)),
    (r"(?:\w+ )?(?:owned|maintained|owns|maintains|responsible for)", KeyRelation("owned_by", True)),
    (r"(?:(?:team |squad |group |tech |technical )?(?:lead|leader)|head|(?:engineering )?manager|"
     r"(?:led|headed|run|managed) by)", KeyRelation("led_by", False)),
    (r"(?:depends on|dependencies|dependency|upstream|upstreams|database|databases|storage|datastore|"
     r"backing store|runs on|hosted on|calls|uses)", KeyRelation("depends_on", False)),
    (r"(?:downstream|dependents|used by|called by)", KeyRelation("depends_on", True)),
    (r"(?:system|systems|service|services|affected|affected systems?|affected services?|affects|"
     r"impact|impacted|components?)", KeyRelation("affects", False)),
    (r"(?:caused by|cause|root cause|trigger|triggered by)", KeyRelation("caused_by", False)),
    (r"(?:supersedes|replaces)", KeyRelation("supersedes", False)),
    (r"(?:superseded by|replaced by)", KeyRelation("supersedes", True)),
    (r"(?:part of|parent|belongs to|department|division)", KeyRelation("part_of", False)),
    (r"(?:implements|standards?)", KeyRelation("implements", False)),
    (r"(?:also known as|aka|alias|aliases|known as|short name)", KeyRelation("same_as", False)),
)
_COMPILED = tuple((re.compile(rf"{p}"), r) for p, r in _KEY_TYPES)
RELATED = KeyRelation("related_to", False)


def key_relation(key: str) -> KeyRelation:
    """The relation a key names: a typed one for the generic words above, else `related_to`."""
    folded = " ".join(key.casefold().replace("_", " ").split())
    return next((r for pattern, r in _COMPILED if pattern.fullmatch(folded)), RELATED)


@dataclass(frozen=True)
class KeyValue:
    """A "key: value" line: the key's text, its span and the span of the value."""

    key: str
    key_span: Span
    value: Span


def key_values(text: str, start: int, end: int) -> list[KeyValue]:
    """The key–value lines within `text[start:end]`, each value running to its line's end."""
    found = []
    for m in _KEY_VALUE.finditer(text, start, end):
        key = m.group("key").strip()
        if not key or len(key.split()) > _MAX_KEY_WORDS or m.start() < start:
            continue
        line_end = text.find("\n", m.end(), end)
        found.append(KeyValue(key, m.span("key"), (m.end(), end if line_end < 0 else line_end)))
    return found


def is_key_line(text: str, line_start: int) -> bool:
    """Whether the line starting at `line_start` is a "key: value" line."""
    line_end = text.find("\n", line_start)
    return bool(key_values(text, line_start, len(text) if line_end < 0 else line_end))


# Headers of a two-column table that is a list of key–value pairs ("| Field | Value |").
_KEY_HEADERS = frozenset({"", "key", "field", "property", "attribute", "setting", "parameter", "fact"})
_VALUE_HEADERS = frozenset({"", "value", "values", "detail", "details"})


def lists_key_values(header: list[str]) -> bool:
    """Whether a table with this header row is a list of "key | value" lines: two columns
    headed by nothing or by the words for a key and a value ("| Field | Value |")."""
    return (len(header) == 2 and header[0].casefold() in _KEY_HEADERS and header[1].casefold() in _VALUE_HEADERS
            and (header[0] == "") == (header[1] == ""))


def table_row(text: str, start: int, end: int) -> list[Span] | None:
    """The cells of a table row spanning `text[start:end]` (trimmed spans), or None when it is
    not one row of a table, or is a separator row."""
    row = _ROW.fullmatch(text, start, end)
    if row is None or _SEPARATOR.fullmatch(text[start:end]):
        return None
    cells, pos = [], text.index("|", start) + 1
    while (bar := text.find("|", pos, end)) >= 0:
        cell = text[pos:bar]
        lead = len(cell) - len(cell.lstrip())
        cells.append((pos + lead, pos + len(cell.rstrip())))
        pos = bar + 1
    return cells


def table_header(text: str, row_start: int) -> list[str] | None:
    """The header cells of the table whose row starts at `row_start`: the table's first row
    when a separator row follows it (markdown's form), else None."""
    lines: list[Span] = []
    pos = row_start
    while pos > 0:
        prev_end = pos - 1
        prev_start = text.rfind("\n", 0, prev_end) + 1
        if _ROW.fullmatch(text, prev_start, prev_end) is None:
            break
        lines.append((prev_start, prev_end))
        pos = prev_start
    if len(lines) < 2 or not _SEPARATOR.fullmatch(text[lines[-2][0]:lines[-2][1]]):
        return None
    header = table_row(text, *lines[-1])
    return [text[s:e].strip("*_ `") for s, e in header] if header else None


def reference_end(text: str, start: int) -> int:
    """Where the sentence at `start` ends its opening reference to what its document is about
    (a pronoun, or "the service"/"this team"), or -1 when it opens otherwise."""
    found = _REFERENCE.match(text[start: start + 60].casefold())
    return -1 if found is None else start + found.end()


def object_reference_end(text: str, start: int) -> int:
    """Where the object after a cue ending at `start` ends, when it is a reference to what its
    document is about that ends its clause ("… leads the team.", "… owns it, and …"); -1 when
    the object is anything else, or the reference goes on ("the service named Van Planner")."""
    found = re.match(r"[ \t]+", text[start: start + 10])
    reference = None if found is None else _OBJECT_REFERENCE.match(text[start + found.end(): start + 40].casefold())
    if found is None or reference is None:
        return -1
    end = start + found.end() + reference.end()
    return end if _CLAUSE_END.match(text, end) else -1


def is_apposition(gap: str) -> bool:
    """Whether `gap`, the text between a generic phrase and a name after it, makes the name what
    the phrase is: nothing, a comma, an opening parenthesis, "named", "called" or "known as"."""
    return _APPOSITION.fullmatch(gap) is not None
