"""Relations stated by ordinary prose without a cue between two names: key–value lines, table
rows, subjects and objects that refer to the document's title, appositions, aliases and lowercase
numbered names. Each fixture is written for its form."""

from __future__ import annotations

import pytest

from tortus_pg.ingest import prose
from tortus_pg.ingest.chunking import chunk_document
from tortus_pg.ingest.extract import extract_concepts
from tortus_pg.ingest.parse import parse_document
from tortus_pg.ingest.types import Document, Extraction


def extract(text: str, title: str, kind: str = "markdown") -> Extraction:
    doc = Document(text, kind, title=title)
    return extract_concepts(doc, chunk_document(doc))


def edges(ex: Extraction) -> dict[tuple[str, str, str], str]:
    """(src, type, dst) -> rule, for every edge but co-occurrences."""
    return {(e.src, e.type, e.dst): e.rule for e in ex.edges if e.rule != "cooccurrence"}


def read_html(page: bytes, name: str) -> tuple[str, dict[tuple[str, str, str], str]]:
    """An HTML page's text as parsed, and the edges extracted from it."""
    doc = parse_document(page, name=name)
    return doc.text, edges(extract_concepts(doc, chunk_document(doc)))


SERVICE_PAGE = """# Parcel Router

Owner: Dispatch Tooling
Database: osprey-4 (PostgreSQL)
On-call rota: Night Desk

Parcel Router assigns each parcel to a van before the morning shift.
"""


def test_key_value_lines_relate_the_title_to_each_value_by_the_keys_meaning():
    found = edges(extract(SERVICE_PAGE, "Parcel Router"))
    assert found[("parcel router", "owned_by", "dispatch tooling")] == "key:owner"
    assert found[("parcel router", "depends_on", "osprey-4")] == "key:database"
    # A key with no generic relation still relates subject to value, under its own name.
    assert found[("parcel router", "related_to", "night desk")] == "key:on-call rota"


def test_a_name_does_not_run_on_into_the_next_lines_key_and_keys_are_not_concepts():
    ex = extract(SERVICE_PAGE, "Parcel Router")
    labels = {c.label for c in ex.concepts}
    assert "Dispatch Tooling" in labels
    assert not any("Database" in label or "Owner" in label for label in labels)


def test_a_key_naming_what_the_subject_owns_points_the_edge_from_the_value():
    page = "# Dispatch Tooling\n\n**Lead:** Imogen Varga\n**Services owned:** Parcel Router, Van Planner\n"
    found = edges(extract(page, "Dispatch Tooling"))
    assert ("parcel router", "owned_by", "dispatch tooling") in found
    assert ("van planner", "owned_by", "dispatch tooling") in found
    assert found[("dispatch tooling", "led_by", "imogen varga")] == "key:lead"


def test_key_value_lines_under_a_heading_naming_one_thing_are_about_that_thing():
    page = "# Clusters\n\n## osprey-4\n\nOwner: Storage Guild\n\n## osprey-5\n\nOwner: Dispatch Tooling\n"
    found = edges(extract(page, "Clusters"))
    assert ("osprey-4", "owned_by", "storage guild") in found
    assert ("osprey-5", "owned_by", "dispatch tooling") in found
    assert ("osprey-4", "owned_by", "dispatch tooling") not in found


def test_table_rows_relate_the_first_cell_to_the_others_by_column_header():
    page = ("# Clusters\n\n| Cluster | Owner | Backup bucket |\n|---|---|---|\n"
            "| osprey-4 | Storage Guild | vault-eu-2 |\n| osprey-5 | Dispatch Tooling | vault-eu-3 |\n")
    found = edges(extract(page, "Clusters"))
    assert found[("osprey-4", "owned_by", "storage guild")] == "key:owner"
    assert found[("osprey-5", "owned_by", "dispatch tooling")] == "key:owner"
    assert found[("osprey-5", "related_to", "vault-eu-3")] == "key:backup bucket"
    assert ("osprey-4", "owned_by", "dispatch tooling") not in found


def test_a_table_without_a_header_states_no_keyed_relation():
    page = "# Clusters\n\n| osprey-4 | Storage Guild |\n| osprey-5 | Dispatch Tooling |\n"
    assert not any(rule.startswith("key:") for rule in edges(extract(page, "Clusters")).values())


def test_a_pronoun_or_definite_subject_refers_to_the_documents_title():
    page = ("# Van Planner\n\nVan Planner builds the route of every van.\n\n"
            "It is owned by Dispatch Tooling.\n\nThe service depends on Map Tiles.\n")
    found = edges(extract(page, "Van Planner"))
    assert ("van planner", "owned_by", "dispatch tooling") in found
    assert ("van planner", "depends_on", "map tiles") in found


def test_a_team_page_in_the_first_person_owns_what_it_maintains():
    page = "# Dispatch Tooling\n\nWe build tools for the depots. It also maintains Parcel Router.\n"
    assert ("parcel router", "owned_by", "dispatch tooling") in edges(extract(page, "Dispatch Tooling"))


def test_a_sentence_naming_its_own_subject_is_not_given_the_title():
    page = "# Van Planner\n\nVan Planner is fast. Map Tiles is owned by Geo Team.\n"
    found = edges(extract(page, "Van Planner"))
    assert ("map tiles", "owned_by", "geo team") in found
    assert ("van planner", "owned_by", "geo team") not in found


def test_aliases_become_same_as_edges():
    page = ("# Van Planner\n\nVan Planner, known internally as Wayfinder, plans routes. "
            "The Parcel Router — everyone calls it PR — assigns parcels.\n")
    found = edges(extract(page, "Van Planner"))
    assert ("van planner", "same_as", "wayfinder") in found
    assert ("parcel router", "same_as", "pr") in found or ("pr", "same_as", "parcel router") in found


def test_lowercase_names_with_a_number_are_concepts_but_plain_hyphenated_words_are_not():
    ex = extract("# Hosts\n\nThe nightly job copies osprey-4 to vault-eu-2 in a well-known order.\n", "Hosts")
    labels = {c.label for c in ex.concepts}
    assert {"osprey-4", "vault-eu-2"} <= labels
    assert "well-known" not in labels


def test_a_key_value_lines_edge_quotes_its_line():
    ex = extract(SERVICE_PAGE, "Parcel Router")
    edge = next(e for e in ex.edges if e.rule == "key:database")
    assert SERVICE_PAGE[edge.evidence.start:edge.evidence.end] == "Database: osprey-4 (PostgreSQL)"


def test_key_value_parsing():
    text = "Owner: A Team\n- **Runs on:** osprey-4\nhttps://example.com/x\n06:05 first alert\n"
    found = prose.key_values(text, 0, len(text))
    assert [(kv.key, text[kv.value[0]:kv.value[1]]) for kv in found] == [("Owner", "A Team"), ("Runs on", "osprey-4")]
    assert prose.key_relation("Runs on") == prose.KeyRelation("depends_on", False)
    assert prose.key_relation("Systems maintained") == prose.KeyRelation("owned_by", True)
    assert prose.key_relation("Favourite colour") == prose.RELATED


def test_a_two_column_table_with_an_empty_header_is_a_list_of_key_value_lines():
    page = "# Van Planner\n\n| | |\n|---|---|\n| Owner | Dispatch Tooling |\n| Runs on | osprey-4 |\n"
    found = edges(extract(page, "Van Planner"))
    assert found[("van planner", "owned_by", "dispatch tooling")] == "key:owner"
    assert found[("van planner", "depends_on", "osprey-4")] == "key:runs on"


def test_a_two_column_table_headed_key_and_value_is_a_list_of_key_value_lines():
    page = ("# Van Planner\n\n| Field | Value |\n|---|---|\n| Owner | Dispatch Tooling |\n| Runs on | osprey-4 |\n\n"
            "## People\n\n| Name | Role |\n|---|---|\n| Imogen Varga | Dispatch Tooling |\n")
    found = edges(extract(page, "Van Planner"))
    assert found[("van planner", "owned_by", "dispatch tooling")] == "key:owner"
    assert found[("van planner", "depends_on", "osprey-4")] == "key:runs on"
    # Columns headed otherwise are a table whose rows are about their first cell.
    assert found[("imogen varga", "related_to", "dispatch tooling")] == "key:role"
    assert prose.lists_key_values(["Key", "Value"]) and prose.lists_key_values(["", ""])
    assert not prose.lists_key_values(["Name", "Role"]) and not prose.lists_key_values(["", "Value"])


def test_who_runs_or_leads_a_thing_is_a_led_by_relation():
    page = "# Dispatch Tooling\n\nDispatch Tooling is led by Imogen Varga and plans the vans.\n"
    found = edges(extract(page, "Dispatch Tooling"))
    assert found[("dispatch tooling", "led_by", "imogen varga")] == "cue:is led by"


def test_a_lead_named_by_a_key_by_a_passive_or_by_an_active_sentence_leads_the_page_subject():
    keyed = "# Dispatch Tooling\n\n**Team lead:** Imogen Varga\nProduct manager: Olu Bakare\n"
    found = edges(extract(keyed, "Dispatch Tooling"))
    assert found[("dispatch tooling", "led_by", "imogen varga")] == "key:team lead"
    assert ("dispatch tooling", "led_by", "olu bakare") not in found  # a product manager leads no team
    passive = "# Dispatch Tooling\n\nThe team is headed by Imogen Varga, who set it up in 2019.\n"
    assert ("dispatch tooling", "led_by", "imogen varga") in edges(extract(passive, "Dispatch Tooling"))
    elided = "# Dispatch Tooling\n\nHeaded by Imogen Varga. The squad plans the vans.\n"
    assert ("dispatch tooling", "led_by", "imogen varga") in edges(extract(elided, "Dispatch Tooling"))
    active = "# Dispatch Tooling\n\nImogen Varga leads the team. She joined from the depots.\n"
    assert ("dispatch tooling", "led_by", "imogen varga") in edges(extract(active, "Dispatch Tooling"))
    named = "# Dispatch Tooling\n\nImogen Varga leads Route Desk, the squad beside us.\n"
    assert ("route desk", "led_by", "imogen varga") in edges(extract(named, "Dispatch Tooling"))
    noun = "# Review Policy\n\nThe Security Office hands squad leads the Quarterly Review.\n"
    assert not [e for e in edges(extract(noun, "Review Policy")) if e[1] == "led_by"]


@pytest.mark.parametrize(("sentence", "named"), [
    ("Van Planner depends on the database cluster named osprey-4.", "osprey-4"),
    ("Van Planner depends on a cluster, kestrel-3, for its orders.", "kestrel-3"),
    ("Van Planner depends on the PostgreSQL cluster kestrel-3.", "kestrel-3"),
    ("Van Planner depends on the warehouse (Harbor) for its history.", "harbor"),
    # No apposition: the phrase itself, or the name that comes first.
    ("Van Planner depends on the database cluster and Map Tiles.", "database cluster"),
    ("Van Planner depends on Map Tiles data for its tiles.", "map tiles"),
])
def test_an_object_given_a_name_by_an_apposition_is_the_named_thing(sentence: str, named: str):
    found = edges(extract(f"# Van Planner\n\n{sentence}\n", "Van Planner"))
    assert [dst for src, type_, dst in found if src == "van planner" and type_ == "depends_on"] == [named]


def test_an_html_table_of_header_and_value_rows_reads_as_key_value_lines():
    # Markdown has no table whose rows each open with a header cell: converted as it stands, its
    # first pair would become the column header and state nothing.
    page = (b"<html><head><title>Van Planner</title></head><body><article><h1>Van Planner</h1>"
            b"<p>Van Planner assigns each parcel to a van before the morning shift starts.</p>"
            b"<table><tr><th>Owner</th><td>Dispatch Tooling</td></tr>"
            b"<tr><th>Runs on</th><td><code>osprey-4</code>, a replica</td></tr></table>"
            b"<h2>Routes</h2><table><tr><th>Route</th><th>Depot</th></tr><tr><td>R1</td><td>Leeds</td></tr>"
            b"<tr><td>R2</td><td>York</td></tr></table></article></body></html>")
    text, found = read_html(page, "van-planner.html")
    assert "- Owner: Dispatch Tooling\n- Runs on: osprey-4, a replica" in text
    assert "| Route | Depot |" in text  # a table with a header row stays a table
    assert found[("van planner", "owned_by", "dispatch tooling")] == "key:owner"
    assert found[("van planner", "depends_on", "osprey-4")] == "key:runs on"


def test_an_html_definition_list_reads_as_key_value_lines():
    # The main-content extractor drops a <dl>, or puts each term on a line apart from its
    # definition: either way the pair it states would be lost.
    page = (b"<html><head><title>OUT-12</title></head><body><article><h1>OUT-12: Parcel labels not printing</h1>"
            b"<dl class='meta'><dt>Severity</dt><dd>Sev3</dd><dt>Affected system</dt><dd>Label Printer</dd>"
            b"<dt>Owner</dt><dd>Depot Tooling</dd><dd>Print Desk</dd></dl>"
            b"<h2>Summary</h2><p>For an hour the depots in the north printed no parcel labels at all. "
            b"Drivers left late and the evening collections were moved to the next morning.</p>"
            b"<dl><dt>Glossary</dt><dd><dl><dt>Label</dt><dd>The sticker on a parcel</dd></dl></dd></dl>"
            b"</article></body></html>")
    text, found = read_html(page, "out-12.html")
    assert "- Severity: Sev3\n- Affected system: Label Printer\n- Owner: Depot Tooling; Print Desk" in text
    # A list inside a definition is part of that definition's text, not pairs of the outer list.
    assert "- Glossary: Label The sticker on a parcel" in text and "- Label:" not in text
    assert found[("out-12", "affects", "label printer")] == "key:affected system"
    assert found[("out-12", "owned_by", "depot tooling")] == "key:owner"
