"""What was actually served, as a short stable id: a model's fingerprint.

A name in the models file can come to mean other weights (a new download, another quantisation),
another engine or another prompt template; the leaderboard must not pool the votes of the two. A
fingerprint is a hash of the components that decide what a reply is made of:

- `weights`: the weights' identity (`weights_identity`): the GGUF file, or the folder's weight
  files, each by name, size and a hash of its first and last MiB; never the whole file (a big
  model is gigabytes, and this runs at every load);
- `revision`: the Hugging Face hub commit, where the source is a hub snapshot;
- `dtype`, `engine` (name and version);
- `template`, `system_prompt`: hashes of the template text (the chat template's Jinja source, or
  the fschat template's name) and of the entry's system prompt;
- remote models: `upstream` (the host) and `model` (the id the server reports) instead of weights.

Records keep the components beside the id, so a person can see which one changed. Pure apart
from reading the weight files' ends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ID_CHARS = 12  # hex characters of sha256: short enough to read, enough that two models never collide
PART_CHARS = 16  # each component's own hash
EDGE_BYTES = 1 << 20  # read from each end of a weight file
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class Fingerprint:
    """A fingerprint's id and what it was computed from (component name -> short value)."""

    id: str
    components: Mapping[str, str]

    def as_dict(self) -> dict[str, str]:
        return dict(self.components)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:PART_CHARS]


def fingerprint(components: Mapping[str, str]) -> Fingerprint:
    """The id of `components` (empty values are left out, so a component added later does not change
    the id of models that lack it)."""
    kept = {k: str(v) for k, v in sorted(components.items()) if v}
    digest = hashlib.sha256(json.dumps(kept, sort_keys=True).encode("utf-8")).hexdigest()
    return Fingerprint(digest[:ID_CHARS], kept)


def file_identity(path: Path) -> str:
    """A weight file by its size and the sha256 of its first and last MiB: a new download or another
    quantisation changes the header, the first tensors or the size; only a sliver of the file is read."""
    size = path.stat().st_size
    digest = hashlib.sha256(f"{size}|".encode())
    with path.open("rb") as handle:
        digest.update(handle.read(EDGE_BYTES))
        if size > EDGE_BYTES:
            handle.seek(max(EDGE_BYTES, size - EDGE_BYTES))
            digest.update(handle.read(EDGE_BYTES))
    return digest.hexdigest()[:PART_CHARS]


def weights_identity(folder: Path, gguf_file: str | None = None) -> str:
    """The GGUF file's identity, or the folder's weight files' (names and `file_identity`s, in name
    order). Names count (not paths): the same files copied elsewhere are the same weights."""
    if gguf_file:
        return file_identity(folder / gguf_file)
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    joined = ";".join(f"{p.name}={file_identity(p)}" for p in files)
    return text_hash(joined)


def hub_revision(folder: Path) -> str:
    """The commit of a Hugging Face cache snapshot (`.../snapshots/<commit>`), else ""."""
    return folder.name if folder.parent.name == "snapshots" else ""


def local_components(folder: Path, gguf_file: str | None, dtype: str, engine: str) -> dict[str, str]:
    """The components shared by every variant of one set of local weights."""
    return {
        "weights": weights_identity(folder, gguf_file),
        "revision": hub_revision(folder),
        "dtype": dtype,
        "engine": engine,
    }


def source_components(source: str, dtype: str, engine: str) -> dict[str, str]:
    """`local_components` of a models-file `source` (webui.models.sources)."""
    from webui.models.sources import resolve_source

    resolved = resolve_source(source)
    return local_components(resolved.folder, resolved.gguf_file, dtype, engine)


def remote_components(base_url: str, model_id: str) -> dict[str, str]:
    """A remote model: the upstream host (not the path or the key) and the model id it reports."""
    parts = urlsplit(base_url)
    return {"upstream": parts.netloc or base_url, "model": model_id, "engine": "openai-remote"}


def variant_fingerprint(shared: Mapping[str, str], template: str | None, system_prompt: str | None) -> Fingerprint:
    """One models-file entry's fingerprint: its weights' components, its template and system prompt."""
    return fingerprint(
        {
            **shared,
            "template": text_hash(template) if template else "",
            "system_prompt": text_hash(system_prompt) if system_prompt else "",
        }
    )
