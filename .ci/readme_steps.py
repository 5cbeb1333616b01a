"""The README's two set-up commands, as CI runs them.

The "Set up" section of README.md holds two fenced bash blocks: the first installs the project
and runs the main job, the second runs the tests. CI runs what they say, so the README cannot
drift from what is checked. Usage:

    python3 .ci/readme_steps.py install [VENV]   # the first command's install steps (venv, pip),
                                                 # building the environment at VENV instead of .venv
    python3 .ci/readme_steps.py main      # the first command's other steps (init, ingest, query)
    python3 .ci/readme_steps.py test      # the second command

Each prints its steps joined with " && ", ready for `bash -c`. CI builds the environment in its
cache and links `.venv` to it (venv refuses to create an environment through a link). Standard
library only: CI calls it before any virtual environment exists.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
_FENCE = re.compile(r"^```(?:bash|sh|console)?\n(.*?)^```", re.M | re.S)
# A step that builds the virtual environment rather than using the project.
_INSTALL = re.compile(r"^(?:python3? -m venv |\.venv/bin/pip install )")


class ReadmeError(Exception):
    """The README's set-up section is not two fenced one-line commands."""


def setup_commands(text: str) -> tuple[str, str]:
    """The two fenced commands of the README's "Set up" section: (set-up and main job, tests)."""
    section = re.search(r"^## Set up.*?(?=^## )", text, re.M | re.S)
    if section is None:
        raise ReadmeError("the README has no '## Set up' section")
    blocks = [b.strip() for b in _FENCE.findall(section.group(0))]
    if len(blocks) != 2 or any("\n" in b for b in blocks):
        raise ReadmeError("the README's set-up section must hold exactly two fenced one-line commands")
    return blocks[0], blocks[1]


def steps(command: str) -> list[str]:
    """The steps of a command chained with &&."""
    return [s.strip() for s in command.split("&&") if s.strip()]


def split_setup(command: str) -> tuple[list[str], list[str]]:
    """The set-up command's install steps (venv, pip) and the steps after them (the main job)."""
    parts = steps(command)
    n = 0
    while n < len(parts) and _INSTALL.match(parts[n]):
        n += 1
    if n == 0 or n == len(parts) or any(_INSTALL.match(p) for p in parts[n:]):
        raise ReadmeError("the set-up command must install first, then run the main job")
    return parts[:n], parts[n:]


def relocated(step: str, venv: str) -> str:
    """An install step with the virtual environment `.venv` built at `venv` instead."""
    return re.sub(r"(?<![\w/.-])\.venv(?=/|\s|$)", venv.replace("\\", "\\\\"), step)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("install", "main", "test") or len(argv) > (2 if argv[0] == "install" else 1):
        print(__doc__, file=sys.stderr)
        return 2
    setup, test = setup_commands(README.read_text(encoding="utf-8"))
    install, job = split_setup(setup)
    if len(argv) == 2:
        install = [relocated(s, argv[1]) for s in install]
    chosen = {"install": install, "main": job, "test": steps(test)}[argv[0]]
    print(" && ".join(chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
