"""Settings: CLI flags > TORTUS_* environment > tortus.toml > defaults.

Built once at the edge (CLI, API) and passed down; the core never reads them globally.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, get_args

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.sources.utils import parse_env_vars

from tortus_pg.errors import ConfigError

CONFIG_FILE = "tortus.toml"
STATE_DIR = ".tortus"

# The environment handed to load_settings (None: os.environ). settings_customise_sources is a
# classmethod called inside the model's constructor, so it cannot be given one as an argument.
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("tortus_environ", default=None)


class Settings(BaseSettings):
    """Everything tortus-pg needs to know to run; see `tortus.toml` for documentation."""

    model_config = SettingsConfigDict(env_prefix="TORTUS_", env_ignore_empty=True, frozen=True, extra="forbid")

    workspace: Path = Field(default_factory=Path.cwd)
    database_url: str | None = Field(default=None, repr=False)  # may carry a password
    tenant: str = "default"
    embedder: str = "minilm"
    embedding_dim: int = Field(default=384, ge=1, le=16000)
    text_search_config: str = "english"
    embed_base_url: str | None = None
    embed_model: str | None = None
    embed_api_key: SecretStr | None = None
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    # How long a command waits for a lock another session holds (0: forever, as in PostgreSQL).
    lock_timeout_ms: int = Field(default=30_000, ge=0)
    # The database URL leads through a pooler in transaction mode (PgBouncer, Supavisor), where
    # consecutive transactions may run on different server connections: no prepared statements.
    transaction_pooler: bool = False

    @property
    def state_dir(self) -> Path:
        return self.workspace / STATE_DIR

    @property
    def pgdata(self) -> Path:
        return self.state_dir / "pgdata"

    @property
    def embedded(self) -> bool:
        return self.database_url is None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments (the flags) > TORTUS_* variables > the workspace's tortus.toml."""
        assert isinstance(init_settings, InitSettingsSource)
        workspace = Path(init_settings.init_kwargs.get("workspace") or Path.cwd())
        environ = _ENVIRON.get()
        env = env_settings if environ is None else _EnvironSource(settings_cls, environ)
        return init_settings, env, _TomlSource(settings_cls, workspace / CONFIG_FILE)


class _EnvironSource(EnvSettingsSource):
    """TORTUS_* variables read from a given mapping instead of os.environ."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)


class _TomlSource(InitSettingsSource):
    """The [tortus] table of a tortus.toml; a key that names no setting is an error."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        table = read_toml(path)
        known = sorted(set(settings_cls.model_fields) - {"workspace"})
        for key in table:
            if key not in known:
                raise ConfigError(f"{path}: unknown setting {key!r} (known: {', '.join(known)})")
        super().__init__(settings_cls, table)


def reveal(secret: SecretStr | None) -> str | None:
    """A key itself, for the call that hands it to a client."""
    return None if secret is None else secret.get_secret_value()


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (mode 0600): tortus.toml may hold a database URL with
    a password, or API keys."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    path.chmod(0o600)  # the mode of a file that existed before is narrowed too


def exposure(path: Path) -> str | None:
    """A warning when a tortus.toml is readable or writable by others than its owner."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        return None
    if mode & 0o077:
        return (f"{path} has mode {mode:o}: others may read settings that can hold passwords and keys; "
                f"run `chmod 600 {path}`")
    return None


def read_toml(path: Path) -> dict[str, Any]:
    """Read the [tortus] table of a tortus.toml (missing file: empty)."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    table = data.get("tortus", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tortus] must be a table")
    return table


def load_settings(
    workspace: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Merge defaults, tortus.toml, TORTUS_* variables and explicit overrides (highest; None: not given)."""
    env = os.environ if environ is None else environ
    ws = workspace or (Path(env["TORTUS_HOME"]) if env.get("TORTUS_HOME") else Path.cwd())
    ws = ws.expanduser().resolve()
    flags = {key: value for key, value in (overrides or {}).items() if value is not None}
    token = _ENVIRON.set(env)
    try:
        return Settings(workspace=ws, **flags)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, flags, env, ws / CONFIG_FILE)) from None
    finally:
        _ENVIRON.reset(token)


def _explain(exc: ValidationError, flags: Mapping[str, Any], environ: Mapping[str, str], toml_path: Path) -> str:
    """Each invalid setting with the origin of its value: the first source, in precedence, that has it."""
    problems = []
    for error in exc.errors():
        name = str(error["loc"][0])
        variable = f"TORTUS_{name.upper()}"
        if name in flags:
            origin = f"--{name.replace('_', '-')}"
        elif any(key.upper() == variable and value for key, value in environ.items()):
            origin = variable
        else:
            origin = str(toml_path)
        field = Settings.model_fields.get(name)
        secret = field is not None and SecretStr in get_args(field.annotation)
        got = "" if secret else f", got {error['input']!r}"
        problems.append(f"{origin}: {name} {error['msg'].removeprefix('Input ')}{got}")
    return "; ".join(problems)


DEFAULT_TOML = """\
# tortus-pg workspace settings. Precedence: CLI flags > TORTUS_* environment > this file.
[tortus]
# PostgreSQL to use. Leave unset to run the embedded server in .tortus/pgdata.
# database_url = "postgresql://tortus_owner@db.example.com/tortus"

# Tenant used by commands that do not pass --tenant.
# tenant = "default"

# Embedding provider: minilm (local all-MiniLM-L6-v2), openai, hash (tests).
# embedder = "minilm"
# embedding_dim = 384

# PostgreSQL text search configuration used for BM25 tokenization.
# text_search_config = "english"

# How long a command waits for a lock another session holds before it stops with an error.
# lock_timeout_ms = 30000

# true when database_url leads through a pooler in transaction mode (PgBouncer, Supavisor).
# transaction_pooler = false

# OpenAI-compatible endpoints (OpenAI, Azure, Ollama, vLLM) for embedder = "openai" and for
# optional LLM extraction. Put keys in TORTUS_EMBED_API_KEY / TORTUS_LLM_API_KEY, not here.
# embed_base_url = "http://localhost:11434/v1"
# embed_model = "nomic-embed-text"
# llm_base_url = "http://localhost:11434/v1"
# llm_model = "llama3.1"
"""
