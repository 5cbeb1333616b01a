"""Finding what to ingest: files, directories, URLs and sources.toml manifests."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any

from tortus_pg.db import check_groups
from tortus_pg.errors import InvalidInput

EXTENSIONS = (".md", ".mdx", ".txt", ".html", ".htm", ".pdf")
MAX_MANIFEST_SOURCES = 100_000


@dataclass(frozen=True)
class SourceSpec:
    """One thing to ingest: a file path or a URL, with its subgraphs and metadata."""

    location: str
    is_url: bool = False
    uri: str = ""
    subgraphs: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    readers: tuple[str, ...] | None = None  # the groups that may read it; (): everyone; None: as stored
    # Why this source is refused before it is read (a link out of its tree, a link loop): it
    # fails on its own, with this message, and the rest of the batch carries on.
    problem: str = ""


def is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def demo_manifest() -> Path:
    """The manifest of the demo corpus shipped with the package."""
    return Path(str(files("tortus_pg"))) / "demo" / "sources.toml"


def from_directory(
    root: Path, subgraphs: tuple[str, ...], include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()
) -> list[SourceSpec]:
    """Supported files under `root`, recursively, filtered by glob patterns on relative paths. A
    symbolic link that leaves the tree, loops or points at nothing is refused, as a source
    that fails with the reason (a directory is not a way to reach files outside it)."""
    found = []
    base = root.resolve()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.suffix.lower() not in EXTENSIONS:
            continue
        if include and not any(fnmatch.fnmatch(rel, p) for p in include):
            continue
        if any(fnmatch.fnmatch(rel, p) for p in exclude) or any(part.startswith(".") for part in Path(rel).parts):
            continue
        if problem := _link_problem(path, base):
            found.append(SourceSpec(str(path), uri=str(path), subgraphs=subgraphs or (root.name,), problem=problem))
        elif path.is_file():
            found.append(SourceSpec(str(path), uri=str(path.resolve()), subgraphs=subgraphs or (root.name,)))
    return found


def _link_problem(path: Path, base: Path | None) -> str:
    """Why a symbolic link may not be ingested: it loops or points at nothing, or (with a
    `base`) its target lies outside that tree. Empty for anything else."""
    if not path.is_symlink():
        return ""
    try:
        target = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return f"{path}: a symbolic link that loops or points at nothing; refused"
    if base is not None and not target.is_relative_to(base):
        return f"{path}: a symbolic link to {target}, outside {base}; refused (copy the file into the tree)"
    return ""


def from_manifest(manifest: Path, uri_base: str | None = None) -> list[SourceSpec]:
    """Sources listed in a TOML manifest; paths may not leave the manifest's directory."""
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"{manifest}: cannot read manifest ({exc})") from None
    entries = data.get("source", [])
    if not isinstance(entries, list) or len(entries) > MAX_MANIFEST_SOURCES:
        raise InvalidInput(f"{manifest}: expected up to {MAX_MANIFEST_SOURCES} [[source]] tables")
    base = manifest.parent.resolve()
    specs = []
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise InvalidInput(f"{manifest}: source #{n} is not a table")
        subgraph = entry.get("subgraph")
        subgraphs = (str(subgraph),) if subgraph else ()
        metadata = entry.get("metadata", {})
        readers = entry.get("readers")
        if "url" in entry:
            url = str(entry["url"])
            if not is_url(url):
                raise InvalidInput(f"{manifest}: source #{n}: url must start with http:// or https://")
            spec = SourceSpec(url, True, url, subgraphs)
        elif "path" not in entry:
            raise InvalidInput(f"{manifest}: source #{n} needs a path or a url")
        else:
            path = (base / str(entry["path"])).resolve()
            if not path.is_relative_to(base):
                raise InvalidInput(f"{manifest}: source #{n} path {entry['path']!r} leaves the manifest's directory")
            uri = f"{uri_base}/{path.relative_to(base).as_posix()}" if uri_base else str(path)
            spec = SourceSpec(str(path), False, uri, subgraphs)
        problem = _metadata_problem(metadata) or _readers_problem(readers)
        if not problem and readers is not None:
            spec = replace(spec, readers=tuple(readers))
        problem = problem or spec_problem(spec)
        specs.append(replace(spec, metadata=metadata if not problem else {},
                             problem=f"{manifest}: source #{n}: {problem}" if problem else ""))
    return specs


MAX_SUBGRAPH_CHARS = 200  # the subgraph table's limit


def spec_problem(spec: SourceSpec) -> str:
    """Why a source cannot be stored as given (it then fails on its own, the batch carries on):
    a subgraph name the graph cannot hold, a location that is not valid UTF-8."""
    for name in spec.subgraphs:
        if not 1 <= len(name) <= MAX_SUBGRAPH_CHARS:
            return f"subgraph names have 1 to {MAX_SUBGRAPH_CHARS} characters; {name[:40]!r}… has {len(name)}"
    try:
        spec.location.encode("utf-8")
        spec.uri.encode("utf-8")
    except UnicodeEncodeError:
        return f"the name {spec.location.encode('utf-8', 'replace').decode()!r} is not valid UTF-8; rename the file"
    return ""


def _readers_problem(readers: Any) -> str:
    """A manifest's `readers` must be a list of group names ([]: everyone in the tenant)."""
    if readers is None:
        return ""
    if not isinstance(readers, list):
        return f"readers must be a list of group names, not {type(readers).__name__}"
    try:
        check_groups(readers)
    except InvalidInput as exc:
        return f"readers: {exc}"
    return ""


def _metadata_problem(metadata: Any) -> str:
    """Metadata must be a table of plain values (text, numbers, true/false); a title, text."""
    if not isinstance(metadata, dict):
        return f"metadata must be a table, not {type(metadata).__name__}"
    for key, value in metadata.items():
        if not isinstance(value, str | int | float | bool):
            return f"metadata {key!r} must be text, a number or true/false, not {type(value).__name__}"
    if "title" in metadata and not isinstance(metadata["title"], str):
        return "metadata title must be text"
    return ""


def resolve(
    targets: list[str], subgraph: str | None, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()
) -> list[SourceSpec]:
    """Turn command-line targets (files, directories, URLs) into source specs."""
    forced = (subgraph,) if subgraph else ()
    specs: list[SourceSpec] = []
    for target in targets:
        if is_url(target):
            specs.append(SourceSpec(target, True, target, forced))
            continue
        path = Path(target)
        if problem := _link_problem(path, None):
            specs.append(SourceSpec(target, uri=target, subgraphs=forced, problem=problem))
        elif path.is_dir():
            specs.extend(from_directory(path, forced, include, exclude))
        elif path.is_file():
            specs.append(SourceSpec(str(path), uri=str(path.resolve()), subgraphs=forced or (path.parent.name,)))
        else:
            raise InvalidInput(f"{target}: no such file, directory or URL")
    return [spec if spec.problem else replace(spec, problem=spec_problem(spec)) for spec in specs]
