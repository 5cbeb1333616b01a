from pathlib import Path

import pytest
from pydantic import SecretStr

from tortus_pg.config import DEFAULT_TOML, load_settings
from tortus_pg.errors import ConfigError


def test_defaults_without_file_or_env(tmp_path: Path) -> None:
    s = load_settings(tmp_path, environ={})
    assert (s.workspace, s.database_url, s.tenant, s.embedder) == (tmp_path.resolve(), None, "default", "minilm")
    assert s.pgdata == tmp_path.resolve() / ".tortus" / "pgdata"
    assert s.embedded


def test_flags_beat_env_beat_toml(tmp_path: Path) -> None:
    (tmp_path / "tortus.toml").write_text('[tortus]\ntenant = "from-toml"\nembedder = "hash"\nembedding_dim = 64\n')
    env = {"TORTUS_TENANT": "from-env"}
    assert load_settings(tmp_path, environ=env).tenant == "from-env"
    assert load_settings(tmp_path, {"tenant": "from-flag"}, environ=env).tenant == "from-flag"
    s = load_settings(tmp_path, environ=env)
    assert (s.embedder, s.embedding_dim) == ("hash", 64)


def test_each_source_beats_the_next_for_one_setting(tmp_path: Path) -> None:
    """flag > TORTUS_* > tortus.toml > default, taking the sources away from the top."""
    toml = tmp_path / "tortus.toml"
    toml.write_text("[tortus]\nlock_timeout_ms = 3\n")
    env = {"TORTUS_LOCK_TIMEOUT_MS": "2"}
    assert load_settings(tmp_path, {"lock_timeout_ms": 1}, environ=env).lock_timeout_ms == 1
    assert load_settings(tmp_path, {"lock_timeout_ms": None}, environ=env).lock_timeout_ms == 2
    assert load_settings(tmp_path, environ={"TORTUS_LOCK_TIMEOUT_MS": ""}).lock_timeout_ms == 3  # empty: not set
    toml.unlink()
    assert load_settings(tmp_path, environ={}).lock_timeout_ms == 30_000


def test_tortus_home_sets_workspace(tmp_path: Path) -> None:
    assert load_settings(environ={"TORTUS_HOME": str(tmp_path)}).workspace == tmp_path.resolve()


def test_api_keys_are_secret_in_repr_and_str(tmp_path: Path) -> None:
    (tmp_path / "tortus.toml").write_text('[tortus]\nllm_api_key = "sk-from-toml"\n')
    s = load_settings(tmp_path, environ={"TORTUS_EMBED_API_KEY": "sk-from-env",
                                         "TORTUS_DATABASE_URL": "postgresql://u:pw-secret@db/tortus"})
    assert isinstance(s.embed_api_key, SecretStr) and isinstance(s.llm_api_key, SecretStr)
    assert (s.embed_api_key.get_secret_value(), s.llm_api_key.get_secret_value()) == ("sk-from-env", "sk-from-toml")
    for shown in (repr(s), str(s)):
        assert "sk-from" not in shown and "pw-secret" not in shown and "**********" in shown
    assert load_settings(tmp_path / "none", environ={}).embed_api_key is None


def test_default_toml_is_valid_and_all_commented(tmp_path: Path) -> None:
    (tmp_path / "tortus.toml").write_text(DEFAULT_TOML)
    commented, empty = load_settings(tmp_path, environ={}), load_settings(tmp_path / "none", environ={})
    assert commented.model_dump(exclude={"workspace"}) == empty.model_dump(exclude={"workspace"})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[tortus\n", "not valid TOML"),
        ("tortus = 1\n", r"\[tortus\] must be a table"),
        ('[tortus]\ncolour = "blue"\n', "unknown setting 'colour' \\(known: database_url, embed_api_key, "),
        ('[tortus]\nworkspace = "elsewhere"\n', "unknown setting 'workspace'"),
        ('[tortus]\nembedding_dim = "many"\n', "embedding_dim should be a valid integer.*got 'many'"),
        ("[tortus]\nembedding_dim = 0\n", "embedding_dim should be greater than or equal to 1, got 0"),
        ("[tortus]\nembedding_dim = 16001\n", "embedding_dim should be less than or equal to 16000"),
    ],
)
def test_bad_toml_names_the_problem(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "tortus.toml").write_text(content)
    with pytest.raises(ConfigError, match=message) as raised:
        load_settings(tmp_path, environ={})
    assert str(raised.value).startswith(str(tmp_path / "tortus.toml"))


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    (tmp_path / "tortus.toml").write_text("[tortus]\nembedding_dim = 64\n")
    with pytest.raises(ConfigError, match="^TORTUS_EMBEDDING_DIM: embedding_dim should be a valid integer.*got 'x'$"):
        load_settings(tmp_path, environ={"TORTUS_EMBEDDING_DIM": "x"})


def test_bad_flag_names_the_flag_and_a_bad_key_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^--lock-timeout-ms: lock_timeout_ms should be greater than or equal to 0"):
        load_settings(tmp_path, {"lock_timeout_ms": -1}, environ={"TORTUS_LOCK_TIMEOUT_MS": "5"})
    (tmp_path / "tortus.toml").write_text("[tortus]\nllm_api_key = 12345\n")
    with pytest.raises(ConfigError, match="llm_api_key should be a valid string$"):
        load_settings(tmp_path, environ={})
