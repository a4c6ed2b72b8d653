"""Tables (pure formatting) and the facts about the machine that every result carries.

Sections hand back JSON-able results; `Table`s are built from those results, so that a saved JSON
file can be rendered again later (`python -m bench --render FILE`) without measuring anything.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

Formatter = Callable[[Any], str]
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    fmt: Formatter = str


@dataclass
class Table:
    title: str
    columns: Sequence[Column]
    rows: Sequence[Mapping[str, Any]]
    notes: list[str] = field(default_factory=list)


# ---- cell formats ------------------------------------------------------------------------------
def seconds(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def number(digits: int = 1) -> Formatter:
    def fmt(value: Any) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    return fmt


def mib(value: Any) -> str:
    return "—" if value is None else f"{value / 2**20:.0f} MiB"


def text(value: Any) -> str:
    return "—" if value is None or value == "" else str(value)


# ---- rendering ---------------------------------------------------------------------------------
def to_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table: printed by the bench and pasted as is into the docs."""
    header = "| " + " | ".join(c.header for c in table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join(_cell(c, row) for c in table.columns) + " |" for row in table.rows]
    lines = [f"### {table.title}", "", header, rule, *body]
    if not table.rows:
        lines.append("| " + " | ".join(["—"] * len(table.columns)) + " |")
    lines += [""] + [f"- {note}" for note in table.notes]
    return "\n".join(lines).rstrip() + "\n"


def _cell(column: Column, row: Mapping[str, Any]) -> str:
    try:
        return column.fmt(row.get(column.key)).replace("|", "\\|")
    except (TypeError, ValueError):
        return str(row.get(column.key))


def describe_meta(meta: Mapping[str, Any]) -> str:
    """One paragraph saying where and when the figures were measured, and how busy the machine was."""
    load = meta.get("load_average_before") or [None]
    busy = " — **contended**: other jobs were running" if meta.get("contended") else ""
    return (
        f"Measured {meta.get('date', '?')} on **{meta.get('machine', '?')}** "
        f"(torch {meta.get('versions', {}).get('torch', '?')}, {meta.get('torch_threads', '?')} threads; "
        f"device {meta.get('device', '?')}); load average at start {_load(load)}{busy}. "
        f"Preset: {meta.get('preset', '?')}; git {meta.get('git', {}).get('commit', '?')[:10]}"
        f"{' (uncommitted changes)' if meta.get('git', {}).get('dirty') else ''}."
    )


def _load(values: Sequence[Any]) -> str:
    return "/".join("?" if v is None else f"{v:.2f}" for v in values)


# ---- facts about the machine --------------------------------------------------------------------
def load_average() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def machine_info(device: str) -> dict[str, Any]:
    import psutil
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = psutil.virtual_memory().total
    label = f"{_cpu_model()}, {cores} cores, {memory / 2**30:.0f} GiB RAM, {gpu or 'no GPU'}"
    loads = load_average()
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": label,
        "cpu": _cpu_model(),
        "cores": cores,
        "memory_bytes": memory,
        "gpu": gpu,
        "device": device,
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "versions": _versions(),
        "git": _git(),
        "load_average_before": loads,
        "contended": bool(loads) and loads[0] > 0.5 * (cores or 1),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "gradio", "gradio_client", "openai", "uvicorn"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _git() -> dict[str, Any]:
    def run(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {
        "commit": run("rev-parse", "HEAD") or "unknown",
        "dirty": bool(run("status", "--porcelain", "--", "webui", "app.py")),
    }
