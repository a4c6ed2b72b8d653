"""`python -m webui.replay LOGDIR --model NEW --baseline OLD --prompts N`: the team's own logged
prompts answered again by a new checkpoint and the model it would replace, judged in both orders.

    python -m webui.replay logs --model my-model-v2 --baseline my-model-v1 --prompts 200 --judge judge-70b
    python -m webui.replay logs --model NEW --baseline OLD --prompts 50 --models models.yaml --out reports/
    python -m webui.replay logs --model NEW --baseline OLD --prompts 200 --queue 40
    python -m webui.replay logs --agreement            # the people's votes on queued pairs vs the judge
    python -m webui.replay logs --agreement logs/replays/replay-20261128T141500Z.json

The judge is --judge NAME or the models file's judge: block. The report goes to
LOGDIR/replays/replay-<UTC time>.md and .json (or --out DIR): the new model's paired win rate
with its 95% interval, per category, both fingerprints, and the prompts where the two differ
most. With --agreement (no model is loaded, nothing generated), the people's votes on the pairs
that replays queued are set beside the judge's verdicts on the same pairs. The baseline's reply is read from a logged battle where the model that wrote it is the one
serving now (same fingerprint); --generate-baseline asks it every time. Nothing is written to the
vote logs. Bad input exits 2 with one line and writes nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import math
import random
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from webui.config import DEFAULT_MODELS_FILE, Settings
from webui.engine.base import Backend
from webui.engine.registry import Registry, build_registry
from webui.errors import ArenaError
from webui.judge.prompt import JudgePrompt, choose_judge
from webui.judge.run import Judge, slots_of
from webui.leaderboard.votes.index import VoteIndex
from webui.progress import Progress, size
from webui.records.prepared import PreparedPair, write_pairs
from webui.records.storage import log_files
from webui.replay.agreement import NoQueuedPairs, queued_agreement, queued_reports, report_lines
from webui.replay.prompts import Prompt, pick_prompts
from webui.replay.run import Replayed, WinRate, replay, summary
from webui.replay.verdicts import FOLDER

SHOWN_PROMPTS = 10  # the prompts where the two differ most, in the report


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m webui.replay", description=__doc__.split("\n\n")[0].strip("`"))
    p.add_argument("log_dir", type=Path, help="folder holding YYYY-MM-DD-conv.json files")
    p.add_argument("--model", metavar="NEW", help="the new checkpoint: a model of the models file (required)")
    p.add_argument("--baseline", metavar="OLD", help="what it would replace: a model of the file (required)")
    p.add_argument("--prompts", type=int, default=50, metavar="N", help="how many logged prompts; default 50")
    p.add_argument("--judge", metavar="NAME", help="the judge; default the models file's judge: block")
    p.add_argument("--judge-prompt", type=Path, default=None, metavar="FILE", help="the judge's prompt; default ours")
    p.add_argument("--models", type=Path, default=None, help=f"models file; default {DEFAULT_MODELS_FILE}")
    p.add_argument("--seed", type=int, default=0, help="which prompts are drawn; default 0")
    p.add_argument(
        "--generate-baseline",
        action="store_true",
        help="generate every baseline reply, even where a logged battle holds one by the same fingerprint",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        metavar="N",
        help="cap both models' replies at N tokens (baseline replies are then all generated); "
        "default each model's own max_new_tokens, as visitors get",
    )
    p.add_argument("--out", type=Path, default=None, help="folder for the report; default LOG_DIR/replays")
    p.add_argument(
        "--queue",
        type=int,
        default=0,
        metavar="K",
        help="put K of the judged pairs in the Battle tab as blind battles for people to vote on; default 0",
    )
    p.add_argument(
        "--agreement",
        nargs="?",
        const="",
        default=None,
        metavar="REPORT",
        help="replay nothing: how far the judge agrees with people's votes on the pairs a replay queued "
        "(REPORT: its .json; default every report with queued pairs in LOG_DIR/replays, or --out)",
    )
    p.add_argument("--rounds", type=int, default=200, help="bootstrap rounds for --agreement's kappa; default 200")
    p.add_argument("--verbose", "-v", action="store_true")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    if args.agreement is not None:
        return _agreement(args)
    if args.model is None or args.baseline is None:
        return _refuse("--model and --baseline are required (but with --agreement)")
    if args.prompts < 1:
        return _refuse(f"--prompts: a whole number of 1 or more, got {args.prompts}")
    if not args.log_dir.is_dir() or not log_files(args.log_dir):
        return _refuse(f"{args.log_dir} holds no vote logs (YYYY-MM-DD-conv.json): no prompts to replay")
    if args.model == args.baseline:
        return _refuse("--model and --baseline name the same model: nothing to compare")
    if args.queue < 0:
        return _refuse(f"--queue: a whole number of 0 or more, got {args.queue}")
    if args.max_tokens is not None and args.max_tokens < 1:
        return _refuse(f"--max-tokens: a whole number of 1 or more, got {args.max_tokens}")
    try:
        settings = Settings.from_env(models_file=args.models, log_dir=args.log_dir)
        choice = choose_judge(settings.models_file, args.judge, args.judge_prompt)
        args.judge, prompt, args.judge_max_tokens = choice.name, choice.prompt, choice.max_tokens
        registry = build_registry(settings)
    except ArenaError as exc:
        return _refuse(str(exc))
    try:
        return _replay(args, prompt, registry)
    finally:
        registry.close()


def _replay(args: argparse.Namespace, prompt: JudgePrompt, registry: Registry) -> int:
    for role, name in (("--model", args.model), ("--baseline", args.baseline), ("--judge", args.judge)):
        if name not in registry.names():
            return _refuse(f"{role}: no model {name!r} in the models file; it has: {', '.join(registry.names())}")
    backends = {}
    for name in dict.fromkeys((args.model, args.baseline, args.judge)):
        print(f"[loading {name} ...]", file=sys.stderr, flush=True)
        try:
            backends[name] = registry.load(name)
        except Exception as exc:  # any engine's failure to load: the replay cannot start
            return _refuse(f"{name} is not ready: {exc}")
        if not registry.status(name).usable:
            return _refuse(f"{name} is not ready: {registry.status(name).describe()}")
    index = VoteIndex(args.log_dir)
    try:
        with Progress("indexing votes", fmt=size) as indexing:
            prompts = pick_prompts(index, args.prompts, args.seed, tuple(registry.names()), progress=indexing)
    finally:
        index.close()
    if not prompts:
        return _refuse(f"{args.log_dir}: no counted battle with a prompt to replay")
    judge = Judge.greedy(
        args.judge, backends[args.judge], prompt, registry.status(args.judge).fingerprint or None, args.judge_max_tokens
    )
    at_once = ", ".join(
        f"{name} {slots_of(backends[name])}" for name in dict.fromkeys((args.model, args.baseline, args.judge))
    )
    print(f"[replaying {len(prompts)} prompts; requests at once: {at_once}]", file=sys.stderr, flush=True)
    logged = _logged(args, backends[args.baseline], registry.status(args.baseline).fingerprint or None)
    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: cancel.set())
    started = dt.datetime.now(dt.timezone.utc)
    progress = Progress("replaying", len(prompts), unit="prompts")  # a bar on a terminal; nothing in a pipe
    try:
        results = replay(
            prompts,
            backends[args.model],
            backends[args.baseline],
            judge,
            cancel=cancel,
            on_progress=lambda done, total: progress.add(),
            logged=logged,
            max_tokens=args.max_tokens,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
        progress.close()
    if cancel.is_set():
        print("stopped: no report written", file=sys.stderr)
        return 130
    fingerprints = {name: registry.status(name).fingerprint or None for name in (args.model, args.baseline)}
    report = _report(args, judge, prompt, results, fingerprints, started)
    folder = args.out or args.log_dir / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"replay-{started:%Y%m%dT%H%M%SZ}"
    if args.queue:
        report["queued"] = _queue(args, results, fingerprints, stem.name)
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    stem.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report).split("\n\n")[1], file=sys.stderr)
    print(f"wrote {stem}.md and .json", file=sys.stderr)
    return 0


def _logged(args: argparse.Namespace, baseline: Backend, fingerprint: str | None) -> Callable[[Prompt], str | None]:
    """Where the baseline's replies come from: a logged battle by the same fingerprint, unless
    told to generate them all, or unless --max-tokens caps replies below the baseline's own limit
    (a logged reply was not capped: the two sides would not be written under the same rules)."""
    capped = args.max_tokens is not None and args.max_tokens < baseline.default_params().max_new_tokens
    if args.generate_baseline or capped:
        return lambda prompt: None
    return lambda prompt: prompt.logged_reply(args.baseline, fingerprint)


def _agreement(args: argparse.Namespace) -> int:
    """--agreement: the judge against the people's votes on queued pairs, per report."""
    if not args.log_dir.is_dir():
        return _refuse(f"{args.log_dir} is not a folder")
    folder = args.out or args.log_dir / FOLDER
    reports = [Path(args.agreement)] if args.agreement else queued_reports(folder)
    if not reports:
        return _refuse(
            f"no replay report with queued pairs in {folder}: run a replay with --queue K first "
            "(or name its report: --agreement REPORT.json)"
        )
    lines: list[str] = []
    try:
        for report in reports:
            lines += [
                *([""] if lines else []),
                *report_lines(queued_agreement(report, args.log_dir, max(0, args.rounds))),
            ]
    except NoQueuedPairs as exc:
        return _refuse(str(exc))
    print("\n".join(lines))
    return 0


def _queue(
    args: argparse.Namespace, results: list[Replayed], fingerprints: dict[str, str | None], source: str
) -> dict[str, Any]:
    """K of the judged pairs (a seeded draw, so neither the judge's verdict nor the order of the
    prompts chooses them) as prepared battles; what was queued, for the report."""
    judged = [r for r in results if r.score is not None]
    chosen = random.Random(args.seed).sample(judged, min(args.queue, len(judged)))
    pairs = [
        PreparedPair(
            pair_id=uuid.uuid4().hex,
            source=source,
            prompt=r.prompt.text,
            models=(args.model, args.baseline),
            replies=(r.new.text, r.baseline.text),
            fingerprints=(fingerprints[args.model] or "", fingerprints[args.baseline] or ""),
        )
        for r in chosen
    ]
    path = write_pairs(args.log_dir, source, pairs)
    if len(pairs) < args.queue:
        print(f"--queue {args.queue}: only {len(pairs)} pairs have a verdict; all queued", file=sys.stderr)
    print(f"queued {len(pairs)} pairs as blind battles: {path}", file=sys.stderr)
    return {"file": str(path), "pairs": [p.pair_id for p in pairs], "verdicts": [r.verdicts for r in chosen]}


def _report(
    args: argparse.Namespace,
    judge: Judge,
    prompt: JudgePrompt,
    results: list[Replayed],
    fingerprints: dict[str, str | None],
    started: dt.datetime,
) -> dict[str, Any]:
    figures = summary(results)
    decisive = sorted(
        (r for r in results if r.score is not None), key=lambda r: abs(r.score - 0.5) if r.score is not None else 0
    )
    return {
        "created": f"{started:%Y-%m-%dT%H:%M:%SZ}",
        "model": args.model,
        "baseline": args.baseline,
        "fingerprints": fingerprints,
        "judge": judge.name,
        "judge_fingerprint": judge.fingerprint,
        "prompt_version": prompt.version,
        "judge_max_tokens": judge.params.max_new_tokens,
        "max_tokens": args.max_tokens,
        "seconds": round((dt.datetime.now(dt.timezone.utc) - started).total_seconds(), 1),
        "prompts": len(results),
        "baseline_logged": sum(r.baseline.logged for r in results),
        "failed": [{"prompt": r.prompt.text, "error": r.error} for r in results if r.error],
        "win_rate": _rate(figures["overall"]),
        "categories": {name: _rate(rate) for name, rate in figures["categories"].items()},
        "differ_most": [_item(r) for r in reversed(decisive[-SHOWN_PROMPTS:])],
        "results": [_item(r) for r in results],
    }


def _rate(rate: WinRate) -> dict[str, Any]:
    numbers = {"value": rate.value, "lower": rate.lower, "upper": rate.upper}
    # JSON has no NaN: no figure is null
    return {k: None if math.isnan(v) else v for k, v in numbers.items()} | {
        "prompts": rate.prompts,
        "text": rate.text(),
    }


def _item(r: Replayed) -> dict[str, Any]:
    return {
        "prompt": r.prompt.text,
        "category": r.prompt.category,
        "new": r.new.text,
        "baseline": r.baseline.text,
        "baseline_logged": r.baseline.logged,
        "verdicts": r.verdicts,
        "score": r.score,
        "judge_answers": r.answers,
        "seconds": {
            "new": round(r.new.seconds, 2),
            "baseline": round(r.baseline.seconds, 2),
            "judge": [round(x, 2) for x in r.judge_seconds],
        },
        "error": r.error,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Replay: {report['model']} against {report['baseline']}",
        "",
        f"{report['model']} wins {report['win_rate']['text']} against {report['baseline']}, as judged by "
        f"{report['judge']} in both orders (50%: no difference).",
        "",
        f"- created {report['created']} ({report['seconds']:.0f} s); judge prompt {report['prompt_version']}, "
        f"at most {report['judge_max_tokens']} tokens per answer; replies "
        + (f"capped at {report['max_tokens']} tokens" if report["max_tokens"] else "at each model's own limit"),
        f"- fingerprints: {report['model']} {report['fingerprints'][report['model']] or 'n/a'}, "
        f"{report['baseline']} {report['fingerprints'][report['baseline']] or 'n/a'}",
        f"- {report['prompts']} prompts replayed, {len(report['failed'])} left out (a reply or the judge failed); "
        f"{report['baseline_logged']} of {report['baseline']}'s replies read from logged battles by the same "
        "fingerprint",
        *(
            [f"- {len(report['queued']['pairs'])} pairs queued as blind battles for people: {report['queued']['file']}"]
            if report.get("queued")
            else []
        ),
        "",
        "## By category",
        "",
        "| category | win rate |",
        "|---|---|",
        *(f"| {name} | {rate['text']} |" for name, rate in report["categories"].items()),
        "",
        "## Where the two differ most",
        "",
    ]
    for item in report["differ_most"]:
        won = "new wins" if (item["score"] or 0) > 0.5 else "baseline wins" if (item["score"] or 0) < 0.5 else "even"
        lines += [
            f"### {won} ({item['category']})",
            "",
            "> " + _short(item["prompt"]).replace("\n", "\n> "),
            "",
            f"- **{report['model']}**: {_short(item['new'])}",
            f"- **{report['baseline']}**: {_short(item['baseline'])}",
            "",
        ]
    return "\n".join(lines) + "\n"


def _short(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _refuse(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
