"""Following a bridge: which claim's bridges lead and which of a bridge's chunks it leads to; a
comparison's evidence about each option and the person it names in a role; on corpora written
for them."""

import numpy as np
import psycopg
import pytest

from tortus_pg import bridges, engine
from tortus_pg.bridges import _Bridge, _followed
from tortus_pg.embed import HashEmbedder
from tortus_pg.evidence import Evidence
from tortus_pg.policy import TraversalPolicy

CLAIMS = {
    "vault.md": "# Key Vault\n\nKey Vault stores certificates and signing keys for every service.\n",
    "ledger.md": "# Ledger Service\n\nThe Ledger Service depends on Key Vault for certificates. "
                 "The Ledger Service is owned by the Core Ledger Team.\n",
    "team.md": "# Core Ledger Team\n\nThe Core Ledger Team runs the nightly replay of payments.\n",
}

# Key Vault is a hub: two other documents mention it and match what is still asked ("replay")
# better than its own document does.
HUB = {
    "vault.md": "# Key Vault\n\nKey Vault stores certificates and signing keys for every service.\n",
    "replay.md": "# Replay Runner\n\nThe Replay Runner reads replay keys from Key Vault before each replay.\n",
    "audit.md": "# Audit Trail\n\nThe Audit Trail records each replay that reads Key Vault.\n",
    "ledger.md": "# Ledger Service\n\nThe Ledger Service depends on Key Vault for certificates.\n",
}


def _node(conn: psycopg.Connection, kind: str, label: str) -> int:
    row = conn.execute("select node_id from tortus.node where kind = %s and label = %s", [kind, label]).fetchone()
    assert row is not None, label
    return int(row[0])


def _evidence(node_id: int) -> Evidence:
    return Evidence(node_id, "", "", 0, 0, None, "", 0.0, "seed")


@pytest.mark.parametrize("corpus", [CLAIMS], indirect=True)
def test_the_earliest_claims_bridge_leads_and_a_later_one_only_when_it_leads_nowhere(
        corpus: psycopg.Connection) -> None:
    vault, team = _node(corpus, "entity", "Key Vault"), _node(corpus, "entity", "Core Ledger Team")
    vault_doc = _node(corpus, "chunk", "vault.md > Key Vault")
    team_doc = _node(corpus, "chunk", "team.md > Core Ledger Team")
    ledger_doc = _node(corpus, "chunk", "ledger.md > Ledger Service")
    source = _evidence(ledger_doc)
    # The second claim's bridge matches what is still asked ("replay") far better.
    bridges = [_Bridge(team, "Core Ledger Team", source, 1, None, True),
               _Bridge(vault, "Key Vault", source, 0, None, True)]
    policy = TraversalPolicy()

    first = _followed(corpus, bridges, ["replay"], [source], policy, "english", "t")
    # Key Vault's own document leads; nothing of the later claim's is taken over it.
    assert first == (vault_doc, vault)
    # With every chunk about Key Vault already in the evidence, the later claim's bridge leads.
    taken = [source, _evidence(vault_doc)]
    assert _followed(corpus, bridges, ["replay"], taken, policy, "english", "t") == (team_doc, team)
    assert _followed(corpus, bridges, ["replay"], [*taken, _evidence(team_doc)], policy, "english", "t") is None


@pytest.mark.parametrize("corpus", [HUB], indirect=True)
def test_a_bridges_own_document_leads_however_many_others_mention_it(
        corpus: psycopg.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fewer candidates than the chunks mentioning the hub: its own document is not among the
    # best-matching two, and still leads.
    monkeypatch.setattr(bridges, "FOLLOW_CANDIDATES", 2)
    vault = _node(corpus, "entity", "Key Vault")
    vault_doc = _node(corpus, "chunk", "vault.md > Key Vault")
    replay_doc = _node(corpus, "chunk", "replay.md > Replay Runner")
    source = _evidence(_node(corpus, "chunk", "ledger.md > Ledger Service"))
    hub = [_Bridge(vault, "Key Vault", source, 0, None, True)]
    policy = TraversalPolicy()

    assert _followed(corpus, hub, ["replay"], [source], policy, "english", "t") == (vault_doc, vault)
    # Its own document already in the evidence, the best-matching other mention leads.
    taken = [source, _evidence(vault_doc)]
    assert _followed(corpus, hub, ["replay"], taken, policy, "english", "t") == (replay_doc, vault)


# Two films, each naming its director among other people; each director has a document of their own,
# and a festival programme mentions one of them.
FILMS = {
    "dust.md": "# Red Dust\n\nRed Dust is a 1990 film produced by Ida Marsh and directed by Ona Vale.\n",
    "hour.md": "# Blue Hour\n\nBlue Hour is a 1950 film directed by Ada Quill.\n",
    "vale.md": "# Ona Vale\n\nOna Vale (born 1931) is a Brevanian film director.\n",
    "quill.md": "# Ada Quill\n\nAda Quill (born 1944) is an Ostrian film director.\n",
    "marsh.md": "# Ida Marsh\n\nIda Marsh (born 1920) is an Ostrian producer.\n",
    "festival.md": "# Harbour Festival\n\nThe Harbour Festival showed the nationality of every film by Ona Vale.\n",
}


def _chunk(conn: psycopg.Connection, label: str) -> Evidence:
    row = conn.execute("select n.node_id, n.text, sp.start_char, sp.end_char, s.uri from tortus.node n "
                       "join tortus.source s on s.tenant_id = n.tenant_id and s.source_id = n.source_id "
                       "join tortus.evidence_span sp on sp.tenant_id = n.tenant_id and sp.node_id = n.node_id "
                       "where n.kind = 'chunk' and n.label = %s", [label]).fetchone()
    assert row is not None, label
    return Evidence(row[0], label, row[4], row[2], row[3], None, row[1], 0.0, "seed")


@pytest.mark.parametrize("corpus", [FILMS], indirect=True)
def test_a_named_entity_is_followed_to_its_own_document_only(corpus: psycopg.Connection) -> None:
    film = _chunk(corpus, "dust.md > Red Dust")
    said = film.text.index("Red Dust is")
    span = (film.start + said, film.start + len(film.text))
    vector = np.asarray(HashEmbedder(384).embed(["nationality"])[0], dtype=np.float32)

    def followed(names: list[str], evidence: list[Evidence]) -> str | None:
        hop = bridges.follow_named(corpus, names, film, span, ["nation"], evidence, {}, {}, vector, TraversalPolicy(),
                                   "english", "t")
        return hop[0].label if hop else None

    assert followed(["Ona Vale", "Ida Marsh"], [film]) == "vale.md > Ona Vale"
    assert followed(["Nobody Named", "Ida Marsh"], [film]) == "marsh.md > Ida Marsh"
    # With Ona Vale's own document taken, the festival's mention of her is not where the hop goes.
    assert followed(["Ona Vale"], [film, _chunk(corpus, "vale.md > Ona Vale")]) is None
    # A hop is two edges: a one-hop budget takes none.
    assert bridges.follow_named(corpus, ["Ona Vale"], film, span, ["nation"], [film], {}, {}, vector,
                                TraversalPolicy(max_hops=1), "english", "t") is None


@pytest.mark.parametrize("corpus", [FILMS], indirect=True)
def test_a_comparison_through_a_role_follows_each_option_to_its_person(corpus: psycopg.Connection) -> None:
    question = "Are the directors of films Red Dust and Blue Hour from the same country?"
    out = engine.answer(corpus, question, embedder=HashEmbedder(384), k=3, store=False)
    # Ada Quill's page is reached from Blue Hour's sentence naming her, not by the search.
    followed = [hop.target for hop in out.path if hop.reason and hop.reason.startswith("follows ")]
    assert "quill.md > Ada Quill" in followed
    assert (out.answer or "").startswith("No. Ona Vale (born 1931) is a Brevanian film director. [1] "
                                         "Ada Quill (born 1944) is an Ostrian film director. [2]")


@pytest.mark.parametrize("corpus", [FILMS], indirect=True)
def test_each_option_of_a_comparison_has_its_document_in_the_evidence(corpus: psycopg.Connection) -> None:
    question = "Which film came out first, Red Dust or Blue Hour?"
    # One evidence chunk: the search's best. Blue Hour's document joins it, so both years are read.
    out = engine.answer(corpus, question, embedder=HashEmbedder(384), k=1, store=False)
    assert {"dust.md > Red Dust", "hour.md > Blue Hour"} <= {e.label for e in out.evidence}
    assert out.short_answer == "Blue Hour"
    assert (out.answer or "").startswith("Blue Hour. ")
