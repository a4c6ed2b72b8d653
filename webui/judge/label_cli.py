"""`python -m webui.judge LOGDIR --judge NAME --label-categories`: the command line's labelling run.

Split from `__main__` (which parses the arguments, loads the judge and refuses bad input) so that
each file keeps one job: this one runs the labelling and says what it did.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence

from webui.config import Settings
from webui.errors import ConfigError
from webui.judge.cli_run import picked, run_safely
from webui.judge.label_prompt import LabelPrompt
from webui.judge.labels import LabelLog, label_votes, labelled, votes_to_label
from webui.judge.run import Judge, RunReport, slots_of
from webui.leaderboard.votes.declared import Declared
from webui.leaderboard.votes.declared import load as load_declared
from webui.leaderboard.votes.labels import read_labels


def label_prompt(args: argparse.Namespace, settings: Settings) -> tuple[Declared, LabelPrompt]:
    """The declared categories and the labelling prompt the command line names; a ConfigError
    (exit 2, nothing written) when there are none or either file cannot be used."""
    path = args.categories_file or settings.categories_file
    if not path:
        raise ConfigError(
            "--label-categories needs the declared categories: --categories-file FILE (or ARENA_CATEGORIES_FILE)"
        )
    declared = load_declared(path)
    return declared, LabelPrompt.load(declared, args.label_prompt)


def label(
    args: argparse.Namespace, judge: Judge, model_names: Sequence[str], labelling: tuple[Declared, LabelPrompt]
) -> int:
    """Label the votes not labelled yet by this judge with this prompt; 0 done, 1 some failed
    (left for the next run), 130 stopped."""
    declared, prompt = labelling
    done = labelled(args.log_dir, judge.name, prompt.version)
    votes = picked(
        args,
        lambda index, indexing: votes_to_label(
            index, model_names, declared, done, since=args.since, limit=args.limit, progress=indexing
        ),
    )
    slots = slots_of(judge.backend)
    print(
        f"[{len(votes)} battles to label with {judge.name} into {len(prompt.names)} categories "
        f"(prompt {prompt.version}), {slots} at a time]",
        file=sys.stderr,
        flush=True,
    )
    log = LabelLog(args.log_dir, args.server_name)
    report = run_safely(
        "labelling",
        len(votes),
        log,
        lambda cancel, progress: label_votes(
            judge, prompt, votes, log, workers=slots, cancel=cancel, on_progress=lambda _: progress.add()
        ),
    )
    return _summary(args, judge, prompt, report)


def _summary(args: argparse.Namespace, judge: Judge, prompt: LabelPrompt, report: RunReport) -> int:
    marks = Counter(
        str(r.get("mark") or "unparsed")
        for r in read_labels(args.log_dir)
        if r.get("judge") == judge.name and r.get("prompt_version") == prompt.version
    )
    shown = ", ".join(f"{mark} {n}" for mark, n in marks.most_common()) or "none yet"
    print(
        f"labelled {report.judged} battles ({report.unparsed} with an unparsed answer), {report.failed} failed "
        f"and left for the next run; {judge.name}'s labels with this prompt: {shown}",
        file=sys.stderr,
    )
    for error in report.errors[:5]:
        print(f"  failure: {error}", file=sys.stderr)
    if report.stopped:
        print("stopped: run the same command again to go on", file=sys.stderr)
        return 130
    return 1 if report.failed else 0
