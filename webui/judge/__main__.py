"""`python -m webui.judge LOGDIR --judge NAME`: judge the logged battles a judge has not judged yet.

    python -m webui.judge logs --judge SmolLM2-135M-Instruct --limit 20
    python -m webui.judge logs --judge gpt-judge --models judges.yaml --since 2026-11-01
    python -m webui.judge logs --judge gpt-judge --judge-prompt my-prompt.txt
    python -m webui.judge logs --models judges.yaml     # the judge named in its judge: block
    python -m webui.judge logs --judge gpt-judge --agreement   # how far it agrees with the votes
    python -m webui.judge logs --judge gpt-judge --composite --judge-weight auto   # one board of both
    python -m webui.judge logs --judge gpt-judge --label-categories --categories-file categories.yaml

The judge is any entry of the models file (a local engine or a remote OpenAI-compatible server).
Verdicts go to LOGDIR/YYYY-MM-DD-judge.json, category labels (--label-categories: the declared
category of each battle no rule or visitor's tag places) to LOGDIR/YYYY-MM-DD-labels.json; a run can be stopped (Ctrl-C, or killed) and
started again at any time. Bad input exits 2 with one line and writes nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from webui.config import DEFAULT_MODELS_FILE, Settings
from webui.engine.registry import Registry, build_registry
from webui.errors import ArenaError
from webui.judge.calibration import calibrate, report_lines
from webui.judge.cli_run import picked, run_safely
from webui.judge.composite import composite, composite_lines
from webui.judge.label_cli import label, label_prompt
from webui.judge.prompt import JudgePrompt, choose_judge
from webui.judge.records import VerdictLog, judged, read_verdicts
from webui.judge.run import Judge, RunReport, agreement_line, battles_to_judge, judge_battles, slots_of
from webui.leaderboard.votes.index import VoteIndex
from webui.progress import Progress
from webui.records.storage import log_files
from webui.replay.verdicts import FOLDER as REPLAYS
from webui.replay.verdicts import replayed_judgments

log = logging.getLogger("webui.judge")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m webui.judge", description=__doc__.split("\n\n")[0].strip("`"))
    p.add_argument("log_dir", type=Path, help="folder holding YYYY-MM-DD-conv.json files")
    p.add_argument(
        "--judge", metavar="NAME", help="the judge: a model name from the models file; default its judge: block's"
    )
    p.add_argument("--models", type=Path, default=None, help=f"models file; default {DEFAULT_MODELS_FILE}")
    p.add_argument(
        "--judge-prompt",
        type=Path,
        default=None,
        metavar="FILE",
        help="the prompt; default the judge: block's, or ours",
    )
    p.add_argument("--since", type=_date, default=None, metavar="YYYY-MM-DD", help="only votes from that UTC day on")
    p.add_argument("--limit", type=_positive, default=None, metavar="N", help="judge at most N battles this run")
    p.add_argument("--index", type=Path, default=None, help="the vote index file; default LOG_DIR/votes-index.sqlite3")
    p.add_argument("--server-name", default="", help="this server's name, as the arena's (names the verdict files)")
    p.add_argument(
        "--agreement",
        action="store_true",
        help="print how far the judge's verdicts agree with the human votes (judges nothing)",
    )
    p.add_argument(
        "--composite",
        action="store_true",
        help="print the board of human votes and the judge's verdicts together (judges nothing)",
    )
    p.add_argument(
        "--judge-weight",
        type=_weight,
        default=None,
        metavar="W",
        help="a verdict's weight beside a human vote's 1 in --composite: a number, or auto; default the "
        "judge: block's, else auto",
    )
    p.add_argument(
        "--prompt-version",
        metavar="VERSION",
        help="--agreement and --composite read the verdicts of this prompt version (as the verdict lines "
        "name it; 'simulated' for webui.judge.simulate's); default the current prompt's",
    )
    p.add_argument(
        "--label-categories",
        action="store_true",
        help="label the battles no declared rule or visitor's tag places with one of the declared categories "
        "(or none), for the category boards (judges nothing)",
    )
    p.add_argument(
        "--categories-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="--label-categories: the declared categories; default the arena's (ARENA_CATEGORIES_FILE)",
    )
    p.add_argument(
        "--label-prompt",
        type=Path,
        default=None,
        metavar="FILE",
        help="--label-categories: the prompt; default ours (webui/judge/default_label_prompt.txt)",
    )
    p.add_argument("--rounds", type=int, default=200, help="bootstrap rounds for --agreement's intervals; default 200")
    p.add_argument("--verbose", "-v", action="store_true")
    return p


def _date(text: str) -> float:
    try:
        return dt.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(f"a date as YYYY-MM-DD, got {text!r}") from None


def _weight(text: str) -> float | str:
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"auto, or a number of 0 or more, got {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of 1 or more, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)
    if not args.log_dir.is_dir():
        return _refuse(f"{args.log_dir} is not a folder")
    if not log_files(args.log_dir):
        return _refuse(f"{args.log_dir} holds no vote logs (YYYY-MM-DD-conv.json): nothing to judge")
    try:
        settings = Settings.from_env(models_file=args.models, log_dir=args.log_dir)
        choice = choose_judge(settings.models_file, args.judge, args.judge_prompt)
        args.judge, prompt = choice.name, choice.prompt
        if args.agreement or args.composite:
            return _agreement(args, prompt, args.judge_weight if args.judge_weight is not None else choice.weight)
        labelling = label_prompt(args, settings) if args.label_categories else None
        registry = build_registry(settings)
    except ArenaError as exc:
        return _refuse(str(exc))
    try:
        judge = _ready(args, prompt, registry, choice.max_tokens)
        if isinstance(judge, str):
            return _refuse(judge)
        if labelling is not None:
            return label(args, judge, registry.names(), labelling)
        return _judge(args, judge, registry.names())
    finally:
        registry.close()


def _ready(args: argparse.Namespace, prompt: JudgePrompt, registry: Registry, max_tokens: int | None) -> Judge | str:
    """The judge, loaded and usable, at most `max_tokens` per answer (None: the entry's own); or why not."""
    if args.judge not in registry.names():
        return f"no model {args.judge!r} in the models file; it has: {', '.join(registry.names())}"
    print(f"[loading the judge {args.judge} ...]", file=sys.stderr, flush=True)
    try:
        backend = registry.load(args.judge)
    except Exception as exc:  # any engine's failure to load: the run cannot start
        return f"the judge {args.judge} is not ready: {exc}"
    status = registry.status(args.judge)
    if not status.usable:
        return f"the judge {args.judge} is not ready: {status.describe()}"
    return Judge.greedy(args.judge, backend, prompt, status.fingerprint or None, max_tokens)


def _judge(args: argparse.Namespace, judge: Judge, model_names: Sequence[str]) -> int:
    prompt = judge.prompt
    done = judged(args.log_dir, judge.name, prompt.version)
    battles = picked(
        args,
        lambda index, indexing: battles_to_judge(
            index, model_names, done, since=args.since, limit=args.limit, progress=indexing
        ),
    )
    slots = slots_of(judge.backend)
    print(
        f"[{len(battles)} battles to judge with {judge.name} (prompt {prompt.version}), {slots} at a time]",
        file=sys.stderr,
        flush=True,
    )
    verdicts = VerdictLog(args.log_dir, args.server_name)
    report = run_safely(
        "judging",
        len(battles),
        verdicts,
        lambda cancel, progress: judge_battles(
            judge, battles, verdicts, workers=slots, cancel=cancel, on_progress=partial(_show, progress)
        ),
    )
    return _summary(args, judge, report)


def _show(progress: Progress, report: RunReport) -> None:
    """One battle settled (judged or failed)."""
    progress.note(f"{report.failed} failed" if report.failed else "")
    progress.add()


def _agreement(args: argparse.Namespace, prompt: JudgePrompt, weight: float | str) -> int:
    version = args.prompt_version or prompt.version
    verdicts = [
        r for r in read_verdicts(args.log_dir) if r.get("judge") == args.judge and r.get("prompt_version") == version
    ]
    replayed = replayed_judgments(args.log_dir / REPLAYS, args.judge, version) if args.composite else None
    if not verdicts and (args.agreement or replayed is None or not len(replayed.judgments)):
        return _refuse(
            f"no verdicts of {args.judge} with prompt {version} in {args.log_dir}: judge some battles first "
            f"(the same command without --agreement or --composite)"
        )
    index = VoteIndex(args.log_dir, args.index)
    lines = []
    try:
        rows = index.rows()
    finally:
        index.close()
    if args.agreement:
        lines += report_lines(calibrate(verdicts, rows, args.judge, version, rounds=max(0, args.rounds)))
    if args.composite:
        lines += composite_lines(args.judge, composite(verdicts, rows, weight, replayed))
    print("\n".join(lines))
    return 0


def _summary(args: argparse.Namespace, judge: Judge, report: RunReport) -> int:
    ours = [r for r in read_verdicts(args.log_dir) if r.get("judge") == judge.name]
    print(
        f"judged {report.judged} battles ({report.unparsed} with an unparsed answer), {report.failed} failed "
        f"and left for the next run; {judge.name} {agreement_line(ours)}",
        file=sys.stderr,
    )
    for error in report.errors[:5]:
        print(f"  failure: {error}", file=sys.stderr)
    if report.stopped:
        print("stopped: run the same command again to go on", file=sys.stderr)
        return 130
    return 1 if report.failed else 0


def _refuse(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `... --agreement | head`: the reader left, which is no error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (Python's own advice: no second error at exit)
        sys.exit(0)
