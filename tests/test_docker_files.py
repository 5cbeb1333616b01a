"""Static checks of docker/: no Docker engine needed (CI machines have none).

They catch what review misses most often: a renamed path, a dependency that does not wait
for the database, a secret written into the compose file, an unpinned base image.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from string import Template
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed; compose.yaml cannot be parsed")

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"

# ${VAR:?message}: compose refuses to start when VAR is unset or empty.
REQUIRED_VAR = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*:\?[^}]+\}$")
SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY", re.IGNORECASE)
URL_PASSWORD = re.compile(r"://[^:/@\s]+:(?P<password>\$\{[^}]*\}|[^@\s]*)@")
WILDCARD = re.compile(r"[*?\[]")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict), "compose.yaml must be a mapping"
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found = compose["services"]
    assert isinstance(found, dict), "services must be a mapping"
    return found


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _build_paths(service: dict[str, Any]) -> tuple[Path, Path]:
    build = service["build"]
    context = (DOCKER / build.get("context", ".")).resolve()
    return context, (context / build.get("dockerfile", "Dockerfile")).resolve()


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    text = dockerfile.read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def test_compose_has_db_and_api(services: dict[str, Any]) -> None:
    assert {"db", "api"} <= services.keys()


def test_api_waits_for_a_healthy_db(services: dict[str, Any]) -> None:
    depends = services["api"]["depends_on"]
    assert isinstance(depends, dict), "use the long depends_on form to state a condition"
    assert depends["db"]["condition"] == "service_healthy"


def test_db_healthcheck_uses_pg_isready_over_tcp(services: dict[str, Any]) -> None:
    test = services["db"]["healthcheck"]["test"]
    command = " ".join(test) if isinstance(test, list) else test
    assert "pg_isready" in command
    # Over the socket, the server looks ready while the init scripts are still running.
    assert re.search(r"(--host|-h)[ =]127\.0\.0\.1", command)


@pytest.mark.parametrize("name", ["db", "api"])
def test_build_context_and_dockerfile_exist(services: dict[str, Any], name: str) -> None:
    context, dockerfile = _build_paths(services[name])
    assert context.is_dir(), f"{name}: build context {context} does not exist"
    assert dockerfile.is_file(), f"{name}: dockerfile {dockerfile} does not exist"


def test_bind_mounts_exist_and_named_volumes_are_declared(compose: dict[str, Any]) -> None:
    declared = set((compose.get("volumes") or {}).keys())
    for name, service in compose["services"].items():
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume["source"]
            if source.startswith((".", "/")):
                assert (DOCKER / source).exists(), f"{name}: mount source {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"


def test_db_keeps_its_data_in_a_volume(services: dict[str, Any]) -> None:
    targets = [v.split(":")[1] for v in services["db"]["volumes"]]
    assert "/var/lib/postgresql/data" in targets


def _secret_problems(environment: dict[str, str]) -> list[str]:
    problems = []
    for key, value in environment.items():
        if SECRET_NAME.search(key) and not REQUIRED_VAR.match(value):
            problems.append(f"{key} must come from the environment as ${{VAR:?message}}")
        url = URL_PASSWORD.search(value)
        if url and not REQUIRED_VAR.match(url["password"]):
            problems.append(f"{key}: the password in the URL must be ${{VAR:?message}}")
    return problems


def test_secret_check_rejects_literal_passwords() -> None:
    assert _secret_problems({"POSTGRES_PASSWORD": "postgres"})
    assert _secret_problems({"URL": "postgresql://owner:hunter2@db/tortus"})
    assert _secret_problems({"URL": "postgresql://owner:${PW:-hunter2}@db/tortus"})
    assert not _secret_problems({"URL": "postgresql://owner:${PW:?set PW (a password)}@db/x"})


def test_no_secret_is_written_into_compose(services: dict[str, Any]) -> None:
    for name, service in services.items():
        assert _secret_problems(_environment(service)) == [], name


def test_api_points_at_db_as_the_owner_role(services: dict[str, Any]) -> None:
    url = _environment(services["api"])["TORTUS_DATABASE_URL"]
    assert url.startswith("postgresql://tortus_owner:")
    assert url.endswith("@db:5432/tortus")


def _args(instructions: list[tuple[str, str]]) -> dict[str, str]:
    """Build arguments with their defaults."""
    return dict(rest.split("=", 1) for word, rest in instructions if word == "ARG" and "=" in rest)


def test_base_images_are_pinned() -> None:
    for dockerfile in (DOCKER / "postgres.Dockerfile", DOCKER / "app.Dockerfile"):
        instructions = _instructions(dockerfile)
        args = _args(instructions)
        for word, rest in instructions:
            if word == "FROM":
                image = Template(rest.split()[0]).substitute(args)
                assert ":" in image and not image.endswith(":latest"), f"{dockerfile.name}: {image}"


def test_postgres_image_pins_pgvector_08_and_installs_age_as_a_package() -> None:
    instructions = _instructions(DOCKER / "postgres.Dockerfile")
    args = _args(instructions)
    assert re.fullmatch(r"pgvector/pgvector:0\.8\.\d+-pg\d+", args["PGVECTOR_IMAGE"]), args["PGVECTOR_IMAGE"]
    runs = " ".join(rest for word, rest in instructions if word == "RUN")
    # AGE comes from the PostgreSQL apt repository for the image's major, never built here.
    assert '"postgresql-${PG_MAJOR}-age"' in runs
    assert not re.search(r"\b(git clone|make|cmake|gcc)\b", runs)


def _compose_cli() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@pytest.mark.skipif(_compose_cli() is None, reason="neither `docker compose` nor `docker-compose` is installed")
def test_compose_config_validates() -> None:
    cli = _compose_cli()
    assert cli is not None
    env = {"PATH": os.environ["PATH"], "POSTGRES_PASSWORD": "p", "TORTUS_OWNER_PASSWORD": "o"}
    done = subprocess.run([*cli, "-f", str(COMPOSE), "config"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "tortus_owner:o@db:5432/tortus" in done.stdout
    unset = subprocess.run([*cli, "-f", str(COMPOSE), "config"], capture_output=True, text=True,
                           env={"PATH": os.environ["PATH"]})
    assert unset.returncode != 0 and "set POSTGRES_PASSWORD" in unset.stderr


def test_postgres_image_preloads_age() -> None:
    cmd = [rest for word, rest in _instructions(DOCKER / "postgres.Dockerfile") if word == "CMD"]
    assert cmd and "shared_preload_libraries=age" in cmd[-1]


def test_copy_sources_exist_in_the_build_context(services: dict[str, Any]) -> None:
    for name, service in services.items():
        context, dockerfile = _build_paths(service)
        for word, rest in _instructions(dockerfile):
            if word not in ("COPY", "ADD"):
                continue
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            for source in parts[:-1]:
                if WILDCARD.search(source):
                    continue  # an optional file (e.g. README.m[d]) may match nothing
                assert (context / source).exists(), f"{name}: COPY source {source} not in {context}"


def test_app_image_installs_every_package_dir() -> None:
    """The app image copies each directory pyproject maps into the distribution."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    dirs = {d.split("/")[0] for d in pyproject["tool"]["setuptools"]["package-dir"].values()}
    copied = {
        shlex.split(rest)[0].rstrip("/")
        for word, rest in _instructions(DOCKER / "app.Dockerfile")
        if word == "COPY"
    }
    assert dirs <= copied, f"not copied into the app image: {sorted(dirs - copied)}"


def test_app_image_installs_cpu_torch_before_the_default_embedder() -> None:
    """minilm, the default embedder, is installed with a CPU build of torch put in first (else
    sentence-transformers pulls the CUDA one), and its model is read offline from its package."""
    runs = " && ".join(rest for word, rest in _instructions(DOCKER / "app.Dockerfile") if word == "RUN")
    torch = runs.index("download.pytorch.org/whl/cpu")
    extras = re.search(r"pip install \"?\.\[([a-z,]+)\]", runs)
    assert extras is not None and "minilm" in extras.group(1).split(",") and torch < extras.start()
    envs = " ".join(rest for word, rest in _instructions(DOCKER / "app.Dockerfile") if word == "ENV")
    assert "HF_HUB_OFFLINE=1" in envs
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert set(extras.group(1).split(",")) <= set(pyproject["project"]["optional-dependencies"])


def test_app_image_migrates_then_serves_the_api() -> None:
    cmd = [rest for word, rest in _instructions(DOCKER / "app.Dockerfile") if word == "CMD"][-1]
    upgrade, serve = cmd.index("tortus-pg db upgrade"), cmd.index("tortus-pg serve")
    assert upgrade < serve
    assert "--host 0.0.0.0 --port 8000" in cmd
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "tortus-pg" in pyproject["project"]["scripts"]
    assert any(dep.startswith("uvicorn") for dep in pyproject["project"]["dependencies"])


def test_the_api_service_is_healthy_when_ready(services: dict[str, Any]) -> None:
    check = " ".join(services["api"]["healthcheck"]["test"])
    assert "/readyz" in check and ":8000" in check


def test_init_scripts_create_owner_database_and_extensions() -> None:
    init = DOCKER / "initdb"
    shell = (init / "01-init.sh").read_text(encoding="utf-8")
    sql = (init / "02-extensions.sql").read_text(encoding="utf-8")
    assert re.search(r"create role tortus_owner login createrole\b", shell)
    assert "create database tortus owner tortus_owner" in shell
    assert "${TORTUS_OWNER_PASSWORD:?" in shell
    assert "\\connect tortus" in sql
    assert "create extension if not exists vector" in sql
    assert "create extension if not exists age" in sql


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_init_shell_script_parses() -> None:
    result = subprocess.run(
        ["bash", "-n", str(DOCKER / "initdb" / "01-init.sh")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
