"""Settings: CLI flags > TORTUS_* environment > tortus.toml > defaults.

Built once at the edge (CLI, API) and passed down; the core never reads them globally.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tortus_pg.errors import ConfigError

CONFIG_FILE = "tortus.toml"
STATE_DIR = ".tortus"


@dataclass(frozen=True)
class Settings:
    """Everything tortus-pg needs to know to run; see `tortus.toml` for documentation."""

    workspace: Path = field(default_factory=Path.cwd)
    database_url: str | None = None
    tenant: str = "default"
    embedder: str = "minilm"
    embedding_dim: int = 384
    text_search_config: str = "english"
    embed_base_url: str | None = None
    embed_model: str | None = None
    embed_api_key: str | None = field(default=None, repr=False)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    lock_timeout_ms: int = 30_000  # how long a command waits for a lock another session holds
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


def boolean(value: Any) -> bool:
    """A flag from TOML (true/false) or the environment (1/0, true/false, yes/no, on/off)."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in {"1", "true", "yes", "on"}:
        return True
    if word in {"0", "false", "no", "off"}:
        return False
    raise ValueError(value)


_TYPES: dict[str, Any] = {"embedding_dim": int, "lock_timeout_ms": int, "transaction_pooler": boolean}


def _coerce(name: str, value: Any, origin: str) -> Any:
    wanted = _TYPES.get(name, str)
    try:
        return wanted(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{origin}: {name} must be {wanted.__name__}, got {value!r}") from None


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
    """Merge defaults, tortus.toml, TORTUS_* variables and explicit overrides (highest)."""
    env = os.environ if environ is None else environ
    ws = workspace or (Path(env["TORTUS_HOME"]) if env.get("TORTUS_HOME") else Path.cwd())
    ws = ws.expanduser().resolve()
    known = {f.name for f in fields(Settings)} - {"workspace"}
    values: dict[str, Any] = {}
    toml_path = ws / CONFIG_FILE
    for key, value in read_toml(toml_path).items():
        if key not in known:
            raise ConfigError(f"{toml_path}: unknown setting {key!r} (known: {', '.join(sorted(known))})")
        values[key] = _coerce(key, value, str(toml_path))
    for key in known:
        env_value = env.get(f"TORTUS_{key.upper()}")
        if env_value:
            values[key] = _coerce(key, env_value, f"TORTUS_{key.upper()}")
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = _coerce(key, value, f"--{key.replace('_', '-')}")
    settings = replace(Settings(workspace=ws), **values)
    if settings.embedding_dim <= 0 or settings.embedding_dim > 16000:
        raise ConfigError(f"embedding_dim must be between 1 and 16000, got {settings.embedding_dim}")
    return settings


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
