"""`python -m bench` (`make bench`): measure, print the tables, write the JSON.

python -m bench                      # everything, full preset (~15 min on 2 CPU cores)
python -m bench --quick              # the same sections, small counts (~4 min): checks the harness
python -m bench --only overhead,ttft # some sections
python -m bench --models my.yaml --device cuda --out bench/results/h100.json
python -m bench --render bench/results/cpu-full.json   # tables of a saved run, nothing measured
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from bench.report import ROOT, describe_meta, load_average, machine_info, to_markdown
from bench.serving import browser, coldstart, engines, memory, overhead, panes, ttft, users
from bench.serving.config import RUN_ORDER, SECTIONS, BenchConfig

MODULES = {
    "overhead": overhead,
    "ttft": ttft,
    "panes": panes,
    "users": users,
    "coldstart": coldstart,
    "memory": memory,
    "browser": browser,
    "engines": engines,
}
log = logging.getLogger("bench")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="Pairwise Arena benchmarks (docs/performance.md)."
    )
    add = parser.add_argument
    add(
        "--quick",
        action="store_true",
        help="small token counts and few repeats (checks the harness; figures are rough)",
    )
    add("--models", type=Path, help="models file (default: the demo, assets/models.yaml)")
    add("--model", action="append", default=[], metavar="NAME", help="only this entry of the models file (repeatable)")
    add("--device", default="auto", help="auto, cpu, cuda or cuda:N: forced onto every local entry (default auto)")
    add("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    add(
        "--threads",
        type=int,
        help="torch CPU threads, for this process and the servers it starts "
        "(sets OMP_NUM_THREADS; default: torch's own choice, as the app ships)",
    )
    add("--users-path", choices=("api", "gradio", "engine"), help="how the many-users chats are sent (default api)")
    add("--out", type=Path, help="JSON results (default bench/results/<device>-<preset>.json; a .md beside it)")
    add("--render", type=Path, metavar="JSON", help="print the tables of a saved run and exit")
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> BenchConfig:
    sections = tuple(s.strip() for s in args.only.split(",") if s.strip()) if args.only else SECTIONS
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise SystemExit(f"--only: unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    changes: dict[str, Any] = {"sections": sections, "device": args.device, "only_models": tuple(args.model)}
    if args.models is not None:
        changes["models_file"] = args.models.resolve()
    if args.users_path:
        changes["users_path"] = args.users_path
    return BenchConfig.quick(**changes) if args.quick else BenchConfig(**changes)


def run_sections(config: BenchConfig, meta: dict[str, Any], out: Path) -> dict[str, Any]:
    from bench.serving.context import BenchContext

    results: dict[str, Any] = {"meta": meta, "config": _jsonable(asdict(config)), "sections": {}}
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        ctx = BenchContext(config, Path(tmp))
        try:
            for name in (n for n in RUN_ORDER if n in config.sections):
                results["sections"][name] = _run_one(name, ctx)
                write_json(results, out)  # after every section: an interrupted run keeps what it measured
        finally:
            ctx.close()
    return results


def _run_one(name: str, ctx: Any) -> dict[str, Any]:
    print(f"== {name} ...", file=sys.stderr, flush=True)
    started, load = time.perf_counter(), load_average()
    try:
        section = MODULES[name].run(ctx)
    except Exception as exc:  # one broken section must not lose the others
        traceback.print_exc()
        section = {"failed": f"{type(exc).__name__}: {exc}"}
    section["_run"] = {
        "seconds": round(time.perf_counter() - started, 1),
        "load_average_before": load,
        "load_average_after": load_average(),
    }
    print(f"   {name}: {section['_run']['seconds']} s", file=sys.stderr, flush=True)
    return section


def render(results: dict[str, Any]) -> str:
    """Markdown for a whole run: where it was measured, then one table per section, in issue order."""
    parts = [describe_meta(results["meta"]), ""]
    for name in SECTIONS:
        section = results["sections"].get(name)
        if section is None:
            continue
        if "failed" in section:
            parts.append(f"### {name}\n\nfailed: {section['failed']}\n")
            continue
        for table in MODULES[name].tables(section):
            run = section.get("_run", {})
            table.notes.append(
                f"Section took {run.get('seconds', '?')} s; load average "
                f"{_loads(run.get('load_average_before'))} before, {_loads(run.get('load_average_after'))} after."
            )
            parts.append(to_markdown(table))
    return "\n".join(parts)


def _loads(values: Any) -> str:
    return "/".join(f"{v:.2f}" for v in values) if values else "?"


def write_json(results: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_suffix(out.suffix + ".tmp")
    staging.write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(staging, out)


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(data, default=str))


def _device_label(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device.replace(":", "")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text(encoding="utf-8"))))
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.threads is not None:
        if args.threads < 1:
            raise SystemExit("--threads: must be at least 1")
        # Before torch is imported here, and inherited by every server and child process.
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    config = build_config(args)
    meta = {**machine_info(config.device), "preset": config.preset}
    meta["device"] = _device_label(config.device)
    out = args.out or ROOT / "bench" / "results" / f"{meta['device']}-{config.preset}.json"
    if meta["contended"]:
        print(
            f"warning: load average {meta['load_average_before']} on {meta['cores']} cores: other jobs are "
            "running, and the figures will show it",
            file=sys.stderr,
        )
    started = time.perf_counter()
    results = run_sections(config, meta, out)
    meta.update(load_average_after=load_average(), duration_s=round(time.perf_counter() - started, 1))
    write_json(results, out)
    markdown = render(results)
    out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"results: {out} (and {out.with_suffix('.md').name})", file=sys.stderr)
    return 1 if any("failed" in s for s in results["sections"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
