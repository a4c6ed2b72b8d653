"""Models files for the bench: copies of the user's file with the device forced, a subset of the
entries, or two variants of one set of weights. Written to a temporary folder, so relative paths
(./dir, jinja:./file) are made absolute against the original file's folder first."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from webui.models.specs import load_specs


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The raw entries, validated once by the app's own parser so that a typo fails here, early."""
    load_specs(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [_absolute(entry, path.parent) for entry in data["models"]]


def _absolute(entry: dict[str, Any], base: Path) -> dict[str, Any]:
    entry = copy.deepcopy(entry)
    source = entry.get("source")
    if isinstance(source, str) and source.startswith(("./", "../")):
        entry["source"] = str((base / source).resolve())
    template = entry.get("template")
    if isinstance(template, str) and template.startswith(("jinja:./", "jinja:../")):
        entry["template"] = "jinja:" + str((base / template[len("jinja:") :]).resolve())
    return entry


def with_device(entries: Sequence[dict[str, Any]], device: str) -> list[dict[str, Any]]:
    """Force every local entry onto `device` (remote entries have none); 'auto' changes nothing."""
    if device == "auto":
        return [dict(e) for e in entries]
    return [{**e, "device": device} if e.get("backend", "transformers") == "transformers" else dict(e) for e in entries]


def select(entries: Sequence[dict[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    if not names:
        return list(entries)
    known = {e["name"]: e for e in entries}
    missing = [n for n in names if n not in known]
    if missing:
        raise SystemExit(f"--model: no entry named {', '.join(map(repr, missing))}; known: {', '.join(known)}")
    return [known[n] for n in names]


def variants(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Two entries with one source: the registry must load the weights once for both."""
    other = {**entry, "name": f"{entry['name']} (variant)", "system_prompt": "Answer in one sentence."}
    return [dict(entry), other]


def greedy_defaults(entries: Sequence[dict[str, Any]], max_new_tokens: int) -> list[dict[str, Any]]:
    """Every entry's sampling defaults made greedy with a fixed length: the settings the paths pass
    explicitly, here for the page (bench/serving/browser.py), which loads them into the controls."""
    greedy = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "repetition_penalty": 1.0, "max_new_tokens": max_new_tokens}
    return [{**e, "sampling": {**(e.get("sampling") or {}), **greedy}} for e in entries]


def local_entries(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries whose weights load in this process (remote entries have nothing to measure here)."""
    return [e for e in entries if e.get("backend", "transformers") == "transformers"]


def write(entries: Sequence[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"models": list(entries)}, sort_keys=False, allow_unicode=True), encoding="utf-8")
    load_specs(path)  # the copy must still be a valid models file
    return path
