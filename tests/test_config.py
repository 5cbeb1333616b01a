from pathlib import Path

import pytest

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


def test_tortus_home_sets_workspace(tmp_path: Path) -> None:
    assert load_settings(environ={"TORTUS_HOME": str(tmp_path)}).workspace == tmp_path.resolve()


def test_default_toml_is_valid_and_all_commented(tmp_path: Path) -> None:
    (tmp_path / "tortus.toml").write_text(DEFAULT_TOML)
    assert load_settings(tmp_path, environ={}) == load_settings(tmp_path / "none", environ={}).__class__(
        workspace=tmp_path.resolve()
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[tortus\n", "not valid TOML"),
        ('[tortus]\ncolour = "blue"\n', "unknown setting 'colour'"),
        ('[tortus]\nembedding_dim = "many"\n', "embedding_dim must be int"),
        ("[tortus]\nembedding_dim = 0\n", "between 1 and 16000"),
    ],
)
def test_bad_toml_names_the_problem(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "tortus.toml").write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_settings(tmp_path, environ={})


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TORTUS_EMBEDDING_DIM"):
        load_settings(tmp_path, environ={"TORTUS_EMBEDDING_DIM": "x"})
