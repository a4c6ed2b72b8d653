"""A replay end to end with the demo models: `python -m bench.serving.replay`.

    python -m bench.serving.replay                                   # 200 prompts, as issue 32's goal asks
    python -m bench.serving.replay --prompts 20 --out bench/results/replay-cpu.json
    python -m bench.serving.replay --prompts 20 --max-tokens 128 --judge-max-tokens 16
    python -m bench.serving.replay --prompts 20 --backend transformers --dtype bf16 --slots 32
    python -m bench.serving.replay --prompt-mix distinct-short --backend transformers --dtype bf16 --slots 32

Simulates a vote log (webui.leaderboard.simulate, `--battles`) in a temporary folder, writes a
models file with the demo's two models (assets/models.yaml) and a judge: block naming one of them
(`--judge`, its prompt `--judge-prompt`, its cap `--judge-max-tokens`), then times `python -m
webui.replay LOGDIR --model NEW --baseline OLD --prompts N` as a user runs it, in a process of its
own: loading the engines, indexing the log, generating, judging and writing the report. The
simulated log's models are not the live ones (their fingerprints differ), so every baseline
reply is generated: the slowest case. From the report: prompts and judge answers (both orders
of each prompt) per minute, how many answers held a verdict, and where the time went (the
seconds each request took, summed per kind: with requests in parallel they add up to more than
the run). `--backend transformers [--dtype bf16] [--slots N]` serves all three on transformers'
continuous batching in the replay's own process instead of the demo file's llama.cpp servers (a
judge reads far more than it writes; docs/performance.md, "Replay speed"). Prints one table;
`--out FILE` writes it as JSON too. Figures, never asserts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.report import ROOT, load_average
from webui.leaderboard.simulate import simulate
from webui.leaderboard.votes.rows import vote_features

DEMO = ROOT / "assets" / "models.yaml"
SMOL, GEMMA = "SmolLM2-135M-Instruct", "Gemma-3-270M (base)"
LONG_PROMPT = 1000  # characters: the simulated log's "Summarise this text" prompts (450 words) and longer
_READY = re.compile(r"webui\.engine\.registry:\s?(.+ ready on \S+ in [\d.]+ s.*)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.serving.replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=200, help="prompts replayed; default 200 (the goal's)")
    p.add_argument("--battles", type=int, default=8000, help="simulated battle votes to draw them from")
    p.add_argument(
        "--prompt-mix",
        choices=("simulated", "distinct-short"),
        default="simulated",
        help="the simulator's prompts (few distinct short ones: 200 distinct are mostly its 450-word texts), "
        "or every conversation's first message one of 320 distinct one-line questions; default simulated",
    )
    p.add_argument("--model", default=SMOL, help=f"the new model; default {SMOL}")
    p.add_argument("--baseline", default=GEMMA, help=f"the baseline; default {GEMMA}")
    p.add_argument("--judge", default=SMOL, help=f"the judge; default {SMOL}")
    p.add_argument("--judge-prompt", type=Path, default=None, help="the judge's prompt file; default ours")
    p.add_argument("--judge-max-tokens", type=int, default=None, help="the judge: block's max_tokens; default none")
    p.add_argument("--max-tokens", type=int, default=None, help="the replay's --max-tokens; default none")
    p.add_argument(
        "--backend",
        choices=("demo", "transformers"),
        default="demo",
        help="the demo file's engines (llama.cpp where built), or every model on transformers' continuous "
        "batching; default demo",
    )
    p.add_argument("--dtype", choices=("auto", "bf16", "fp32"), default=None, help="the models' dtype; default theirs")
    p.add_argument("--slots", type=int, default=None, help="requests at once per model (--batch-slots)")
    p.add_argument(
        "--kv-cache-tokens",
        type=int,
        default=None,
        help="with --backend transformers: each model's paged cache in tokens; default the app's",
    )
    p.add_argument(
        "--code", type=Path, default=ROOT, help="the checkout whose webui.replay is timed (an A/B); default this one"
    )
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds before the replay is stopped")
    p.add_argument("--out", type=Path, default=None, help="also write the figures here as JSON")
    return p.parse_args(argv)


TEMPLATES = (
    "Explain {} to a twelve-year-old.",
    "What are the pros and cons of {}?",
    "Write a short poem about {}.",
    "Give me three surprising facts about {}.",
    "How does {} work, in a few sentences?",
    "What is a common mistake people make with {}?",
    "Suggest a weekend project involving {}.",
    "Compare {} with something from everyday life.",
)
TOPICS = (
    "photosynthesis", "compound interest", "black holes", "sourdough bread", "electric cars", "the immune system",
    "public transport", "chess openings", "volcanoes", "solar panels", "coffee roasting", "the printing press",
    "rainbows", "vaccines", "bicycles", "jazz", "tides", "recycling", "honeybees", "the stock market",
    "glaciers", "3D printing", "meditation", "the Roman Empire", "wind turbines", "bird migration", "origami",
    "earthquakes", "spreadsheets", "the water cycle", "container gardening", "password managers", "lighthouses",
    "sleep", "fermentation", "satellites", "board games", "coral reefs", "typography", "marathon training",
)  # fmt: skip


def distinct_short_prompts(folder: Path) -> None:
    """Every conversation's first user message becomes one of len(TEMPLATES) x len(TOPICS) one-line
    questions (chosen by its conv_id, so that both sides and every vote of it agree), its features
    computed again: a log of the kind a team's arena has, where almost every prompt is its own."""
    questions = [template.format(topic) for template in TEMPLATES for topic in TOPICS]
    for path in sorted(folder.glob("*-conv.json")):
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for record in records:
            states = record.get("states") or []
            if not states or not states[0].get("messages"):
                continue
            key = hashlib.sha256(str(states[0].get("conv_id", "")).encode()).digest()
            question = questions[int.from_bytes(key[:4], "big") % len(questions)]
            for state in states:
                if state["messages"] and state["messages"][0][0] == "user":
                    state["messages"][0][1] = question
            if "features" in record:
                record["features"] = vote_features(record)
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def models_file(folder: Path, args: argparse.Namespace) -> Path:
    """The demo's models with a judge: block (the demo file's sources are packages: no paths)."""
    data = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    block: dict[str, Any] = {"model": args.judge}
    if args.judge_prompt is not None:
        block["prompt"] = str(args.judge_prompt.resolve())
    if args.judge_max_tokens is not None:
        block["max_tokens"] = args.judge_max_tokens
    data["judge"] = block
    for entry in data["models"]:
        if args.backend == "transformers":
            entry["backend"] = "transformers"
            if args.kv_cache_tokens is not None:
                entry["transformers"] = {"kv_cache_tokens": args.kv_cache_tokens}
        if args.dtype is not None:
            entry["dtype"] = args.dtype
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def run_replay(folder: Path, models: Path, args: argparse.Namespace) -> tuple[float, dict[str, Any], str]:
    """(wall seconds, the report, the command's stderr) of one replay as a user runs it."""
    command = [sys.executable, "-m", "webui.replay", str(folder), "--models", str(models), "--verbose"]
    command += ["--model", args.model, "--baseline", args.baseline, "--prompts", str(args.prompts)]
    if args.max_tokens is not None:
        command += ["--max-tokens", str(args.max_tokens)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(args.code.resolve())}
    if args.backend == "transformers":
        env["ARENA_TRANSFORMERS_BATCHING"] = "on"
    if args.slots is not None:
        # The old name too, for a --code checkout from before --batch-slots; where both are read, the new one wins.
        env["ARENA_BATCH_SLOTS"] = env["ARENA_VLLM_CONCURRENCY"] = str(args.slots)
    start = time.monotonic()
    # Run from the checkout: `python -m` puts the working folder first on the path.
    try:
        done = subprocess.run(
            command, cwd=args.code, env=env, capture_output=True, text=True, timeout=args.timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:  # what it had logged says how far it got
        logged = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        raise SystemExit(
            f"the replay did not finish within {args.timeout:.0f} s; it had logged:\n{logged[-3000:]}"
        ) from None
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"the replay failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    (report,) = [json.loads(p.read_text(encoding="utf-8")) for p in (folder / "replays").glob("replay-*.json")]
    return seconds, report, done.stderr


def figures(seconds: float, report: dict[str, Any]) -> dict[str, Any]:
    results = report["results"]
    answers = [a for r in results for a in r["judge_answers"]]
    parsed = [v for r in results for v in r["verdicts"] if v is not None]
    minutes = seconds / 60
    return {
        "prompts": report["prompts"],
        "left_out": len(report["failed"]),
        "seconds": round(seconds, 1),
        "replay_seconds": report.get("seconds"),  # the command's own count, from start to the report
        "prompts_per_min": round(report["prompts"] / minutes, 2),
        "verdicts_per_min": round(len(answers) / minutes, 2),  # judge answers, both orders of each prompt
        "answers": len(answers),
        "answers_with_a_verdict": len(parsed),
        "baseline_logged": report["baseline_logged"],
        "request_seconds": {  # none from a checkout older than the report's timings
            kind: round(sum(_seconds(r, kind) for r in results), 1) for kind in ("new", "baseline", "judge")
        },
        "reply_chars": {
            "new": sum(len(r["new"]) for r in results),
            "baseline": sum(len(r["baseline"]) for r in results),
            "judge": sum(len(a) for a in answers),
        },
        "prompt_chars_median": sorted(len(r["prompt"]) for r in results)[len(results) // 2] if results else 0,
        "long_prompts": sum(len(r["prompt"]) > LONG_PROMPT for r in results),
        "win_rate": report["win_rate"]["text"],
        "judge_max_tokens": report.get("judge_max_tokens"),
        "max_tokens": report.get("max_tokens"),
    }


def _seconds(result: dict[str, Any], kind: str) -> float:
    value = result.get("seconds", {}).get(kind, 0.0)
    return float(sum(value) if isinstance(value, list) else value)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        folder = Path(tmp)
        simulate(folder, battles=args.battles)
        if args.prompt_mix == "distinct-short":
            distinct_short_prompts(folder)
        models = models_file(folder, args)
        before = load_average()
        seconds, report, stderr = run_replay(folder, models, args)
        result = figures(seconds, report) | {"load_average": [before, load_average()]}
    result["setup"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "out"}
    result["engines"] = [m.group(1) for m in _READY.finditer(stderr)]
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {json.dumps(value, ensure_ascii=False)}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
