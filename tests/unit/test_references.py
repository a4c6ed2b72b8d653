"""The docs point at real things: every source file, test file and test function that the README,
the docs and the Dockerfile name exists (modules move; a doc that names the old place misleads)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "Dockerfile", *sorted((ROOT / "docs").glob("*.md"))]
# webui/a/b.py, webui/a/ (a folder), tests/x/test_y.py::test_name, bench/z.py, scripts/s.sh
REFERENCE = re.compile(r"\b((?:webui|tests|bench|scripts|assets)/[\w./-]*\w/?)(?:::(\w+))?")


def references() -> list[tuple[str, str, str | None]]:
    found = []
    for document in DOCUMENTS:
        for match in REFERENCE.finditer(document.read_text(encoding="utf-8")):
            found.append((document.name, match.group(1), match.group(2)))
    return found


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_the_documents_name_files() -> None:
    assert len(references()) > 30, "the pattern finds the references the docs make"


@pytest.mark.parametrize(("document", "target", "function"), references())
def test_a_reference_points_at_something_real(document: str, target: str, function: str | None) -> None:
    if "*" in target or "results/" in target:  # globs, and outputs a run writes
        return
    path = ROOT / target
    # "webui/engine" names a folder, "webui.engine.vllm" style names are not matched
    assert path.exists() or path.with_suffix(".py").exists(), f"{document} names {target}, which does not exist"
    if function is not None:
        assert function in _functions(path), f"{document} names {target}::{function}, which does not exist"
