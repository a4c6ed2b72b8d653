"""The engine alone, without a second copy of it: the app's own vLLM servers.

The raw and engine paths run in the bench process. For a model on transformers they load the weights
here; for a model the app serves with vLLM they used to start a vLLM server of their own beside the
app's, and on 2 cores four engines (two per model) then competed for the cores whenever one of them
worked (docs/performance.md: the app's first text came ~1 s late at 1-4 chats in every such run).
Now they ask the app's own server, found among the app's child processes by the model name it
serves (`--served-model-name NAME ... --port P` on its command line), through the same prompt
builder and HTTP client the app uses (`webui.engine.vllm.attach`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from webui.models.specs import loader_for

Loader = Callable[[Any, Any], Any]


def vllm_servers(root_pid: int, proc: Path = Path("/proc")) -> dict[str, str]:
    """{served model name: base URL} for the vLLM servers among the descendants of `root_pid`
    (empty where there is no /proc)."""
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except (OSError, IndexError, ValueError):
            continue  # the process ended meanwhile
        children.setdefault(parent, []).append((int(entry.name), argv))
    found: dict[str, str] = {}
    todo = [root_pid]
    while todo:
        for pid, argv in children.get(todo.pop(), []):
            name, port, host = _option(argv, "--served-model-name"), _option(argv, "--port"), _option(argv, "--host")
            if name and port and name not in found:
                found[name] = f"http://{host or '127.0.0.1'}:{port}"
            todo.append(pid)
    return found


def _option(argv: list[str], flag: str) -> str | None:
    try:
        return argv[argv.index(flag) + 1]
    except (ValueError, IndexError):
        return None


def loaders(servers: Mapping[str, str], engines: Mapping[str, str]) -> dict[str, Loader]:
    """Registry loaders for the bench process: an entry the app serves with vLLM is attached to
    that server; any other loads as the app would load it."""
    from webui.engine.vllm import attach

    def for_backend(backend: str) -> Loader:
        def load(spec: Any, settings: Any) -> Any:
            url = servers.get(spec.name)
            if url is not None:
                return attach(spec, settings, url, engine=f"{engines.get(spec.name) or 'vLLM'} (the app's own server)")
            return loader_for(backend)(spec, settings)

        return load

    return {backend: for_backend(backend) for backend in ("auto", "vllm")}
