"""A simulated arena log in FastChat's format, with known answers, for tests and for trying the board.

    python -m webui.leaderboard.simulate OUTDIR --battles N [--seed 0] [--days 10]

writes exactly N votes (rare-1b's two among them; default 20000) to OUTDIR/YYYY-MM-DD-conv.json
(vote lines as FastChat and Pairwise Arena log them) and OUTDIR/truth.json (what the board should
find). Known effects, so that each view can be checked:

* models with true Bradley-Terry ratings, named to trip substring matching (command-r, ember-7b,
  nous-hermes-2, solar-10.7b, granite-3-8b, falcon-7b) beside replies that say "Remember to
  drink water", "run this command", "solar panels", "a granite worktop", "poisonous";
* `verbose-7b`, as strong as `ember-7b` but with replies four times longer and full of markdown:
  voters prefer length and markdown, so it leads the raw board and not the style-controlled one;
* `late-7b` joins halfway (ratings over time); `rare-1b` has two battles, both lost (preliminary);
* prompts in several languages, with code, long, multi-turn (categories);
* about 1% identity leaks, errors and stopped replies, 5% named votes, 5% in FastChat's older
  form (`"models": ["Model A", "Model B"]`, roles "USER"/"ASSISTANT");
* one voter who votes for the weaker model (flagged), one who casts 400 honest votes on one day
  (the daily cap); every vote carries a session key, one per voter and day;
* each reply's speed (time to first token, tokens/s): a model's own (`SPEEDS`) times 0.8 to 1.2,
  so its median is its own; none in the older-form votes and rare-1b's (not logged there);
* the keys the app adds as it writes a vote (webui.records.storage.vote_record) on every vote but
  the older-form ones: the identity check with the word list of an arena serving these models and
  its version (`hygiene`), and the text's features (`features`), so that indexing the log reads
  them as it reads the app's; the older-form votes have neither, as FastChat's logs;
* each model's fingerprint (what served it, webui.models.fingerprint; none in the older-form
  votes); with `--requantise-late`, late-7b is served by other weights (a requantised file) for
  the last quarter of the log: a second fingerprint under the same name, which the board rates apart.
  Fingerprints are not drawn: the random draws, and so every number of the board without
  `--requantise-late`, stay those of logs simulated before there were fingerprints.

`--category-votes 40,100,200` adds votes in declared categories (prompts that name a topic, won at
the topic's own true ratings: truth.json's `categories`) and writes OUTDIR/categories.yaml for
`--categories-file`. Battles tables with known ratings and no log are webui.leaderboard.simulate_battles'.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from webui.leaderboard.votes.rows import vote_features
from webui.progress import Progress
from webui.records.identity import identity_words, leaked_identity, word_list_version
from webui.records.storage import day_file_name

TRUE = {
    "granite-3-8b": 1120.0,
    "command-r": 1070.0,
    "solar-10.7b": 1030.0,
    "ember-7b": 1000.0,
    "verbose-7b": 1000.0,
    "nous-hermes-2": 970.0,
    "falcon-7b": 940.0,
    "SmolLM2-135M-Instruct": 870.0,
    "late-7b": 1050.0,
}
LATE, RARE, VERBOSE = "late-7b", "rare-1b", "verbose-7b"
# (seconds to the first token, tokens/s): the weakest model is the fastest, the strongest the slowest
SPEEDS = {
    "granite-3-8b": (0.9, 12.0),
    "command-r": (0.7, 15.0),
    "solar-10.7b": (0.6, 18.0),
    "ember-7b": (0.5, 20.0),
    "verbose-7b": (0.5, 20.0),
    "nous-hermes-2": (0.4, 22.0),
    "falcon-7b": (0.4, 24.0),
    "SmolLM2-135M-Instruct": (0.1, 60.0),
    "late-7b": (0.5, 20.0),
}
JITTER = (0.8, 0.9, 1.0, 1.1, 1.2)  # taken in turn, not drawn: the random draws stay those of older logs
STYLE_BETA = 1.2  # log-odds per unit of the normalised length difference (voters like long replies)
TIE_SHARE = 0.15
START = 1_767_225_600.0  # 2026-01-01 00:00 UTC
PROMPTS = {
    "English": [
        "What is the capital of France?",
        "How do I make my tomato plants grow faster?",
        "Explain why the sky is blue.",
        "Give me three ideas for a birthday party.",
    ],
    "Chinese": ["法国的首都是哪里？", "请解释一下为什么天空是蓝色的。"],
    "Spanish": ["¿Cuál es la capital de Francia y por qué es famosa?", "¿Cómo puedo aprender a cocinar?"],
    "French": ["Quelle est la capitale de la France et pourquoi est-elle célèbre ?"],
    "German": ["Was ist die Hauptstadt von Deutschland und wie groß ist sie?"],
    "Russian": ["Какая столица Франции и чем она знаменита?"],
    "Japanese": ["日本の首都はどこですか？"],
}
LANGUAGE_WEIGHTS = {
    "English": 0.62,
    "Chinese": 0.1,
    "Spanish": 0.08,
    "French": 0.06,
    "German": 0.06,
    "Russian": 0.05,
    "Japanese": 0.03,
}
CODE_PROMPT = "Fix this function:\n```python\ndef add(a, b):\n    return a - b\n```"
ORDINARY = [
    "Remember to drink water.",
    "Run this command in a terminal.",
    "Solar panels help.",
    "A granite worktop is durable.",
    "Some berries are poisonous.",
    "The falcon is a fast bird.",
]
FILLER = "the answer depends on what you need and here is a short explanation of it".split()


def _as_written(record: dict, words: tuple[str, ...], version: str) -> dict:
    """`record` with what the app adds to a battle vote as it writes it: the identity check of the
    replies against `words` (of version `version`) and the features."""
    replies = [text for state in record["states"] for role, text in state["messages"] if role == "assistant"]
    record["hygiene"] = {"identity_leak": leaked_identity(replies, words), "identity_words": version}
    record["features"] = vote_features(record)
    return record


def fingerprint_of(model: str, requantised: bool = False) -> str:
    """A simulated model's fingerprint: fixed by its name (and whether it is the requantised file)."""
    return hashlib.sha256(f"{model}{'/requantised' if requantised else ''}".encode()).hexdigest()[:12]


def _hash(text: str) -> str:
    return "h:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _reply(rng: np.random.Generator, model: str, leak: bool) -> str:
    """Words, sometimes ordinary sentences that contain model-like words, markdown for verbose-7b."""
    words = max(3, int(60 * (4 if model == VERBOSE else 1) * rng.lognormal(0.0, 0.6)))
    body = " ".join(rng.choice(FILLER, size=words))
    parts = [str(rng.choice(ORDINARY)) if rng.random() < 0.3 else "", body]
    if rng.random() < (0.9 if model == VERBOSE else 0.25):  # everyone uses markdown sometimes
        parts = ["## Overview", "**In short:** " + parts[0]] + ["- a point"] * int(rng.integers(1, 5)) + [body]
    if leak:
        parts.insert(0, f"I am {model}, a language model.")
    return "\n".join(p for p in parts if p)


def _prompt(rng: np.random.Generator) -> tuple[str, bool]:
    """(prompt, multi-turn?)."""
    lang = rng.choice(list(LANGUAGE_WEIGHTS), p=list(LANGUAGE_WEIGHTS.values()))
    roll = rng.random()
    if roll < 0.12:
        return CODE_PROMPT, False
    if roll < 0.17:
        return "Summarise this text: " + " ".join(rng.choice(FILLER, size=450)), False
    return str(rng.choice(PROMPTS[str(lang)])), roll > 0.9


def _state(
    model: str,
    prompt: str,
    replies: list[str],
    conv_id: str,
    older: bool,
    reasons: list[str],
    system: str,
    turn_of_log: int | None = None,
    requantised: bool = False,
) -> dict:
    """A vote state; with `turn_of_log` (a counter over the log) each reply's speed too."""
    roles = ["USER", "ASSISTANT"] if older else ["user", "assistant"]
    messages = []
    for i, reply in enumerate(replies):
        messages += [[roles[0], prompt if i == 0 else "And then?"], [roles[1], reply]]
    state: dict[str, Any] = {
        "template_name": "one_shot" if older else "tokenizer",
        "system_message": system,
        "roles": roles,
        "messages": messages,
        "offset": 0,
        "conv_id": conv_id,
        "model_name": model,
    }
    if not older:
        state["finish_reasons"] = reasons
        state["fingerprint"] = fingerprint_of(model, requantised)
    if not older and turn_of_log is not None:
        ttft, rate = SPEEDS[model]
        jitter = [JITTER[(turn_of_log + k) % len(JITTER)] for k in range(len(replies))]
        state.update(
            {"ttft_s": [round(ttft * j, 3) for j in jitter], "tokens_per_s": [round(rate * j, 2) for j in jitter]}
        )
    return state


def _winner(rng: np.random.Generator, a: str, b: str, len_a: int, len_b: int, voter: str, adversary: str) -> str:
    truth = {**TRUE, RARE: 700.0}
    if rng.random() < TIE_SHARE:
        return "tievote" if rng.random() < 0.7 else "bothbad_vote"
    if voter == adversary:
        return "leftvote" if truth[a] < truth[b] else "rightvote"
    z = (truth[a] - truth[b]) * math.log(10) / 400 + STYLE_BETA * (len_a - len_b) / (len_a + len_b)
    return "leftvote" if rng.random() < 1 / (1 + math.exp(-z)) else "rightvote"


def _pair(rng: np.random.Generator, i: int, n: int) -> tuple[str, str]:
    pool = [m for m in TRUE if m != LATE or i >= n // 2]
    a, b = rng.choice(len(pool), size=2, replace=False)
    return pool[a], pool[b]


def _voter(rng: np.random.Generator, i: int, n: int, voters: int) -> str:
    """A Zipf-ish crowd, the adversary (1% of the votes) and the heavy voter (day 1)."""
    if rng.random() < 0.01:
        return "adversary"
    if i < 400 and n >= 2000:
        return "heavy"
    return f"voter{min(int(rng.zipf(1.3)), voters)}"


def _vote(rng: np.random.Generator, i: int, n: int, days: int, voters: int, requantise: bool = False) -> dict:
    a, b = _pair(rng, i, n)
    voter = _voter(rng, i, n, voters)
    prompt, multi = _prompt(rng)
    leak, fail = rng.random() < 0.01, rng.random()
    turns = 2 if multi else 1
    replies = [[_reply(rng, m, leak and k == turns - 1 and m == a) for k in range(turns)] for m in (a, b)]
    reasons = ["error" if fail < 0.01 else "cancelled" if fail < 0.02 else "stop"] * turns
    older, named = rng.random() < 0.05, rng.random() < 0.05
    tstamp = START + (i / n) * days * 86_400 if voter != "heavy" else START + i
    systems = ["", "Answer briefly."] if rng.random() < 0.2 else ["", ""]
    requantised = requantise and i >= n * 3 // 4
    states = [
        _state(
            m,
            prompt,
            r,
            f"c{i}-{k}",
            older,
            reasons if k == 0 else ["stop"] * turns,
            s,
            2 * i + k,
            requantised=requantised and m == LATE,
        )
        for k, (m, r, s) in enumerate(zip((a, b), replies, systems, strict=True))
    ]
    len_a, len_b = (sum(len(x.split()) for x in r) for r in replies)
    public = ["Model A", "Model B"] if older else [a, b] if named else ["", ""]
    record = {
        "tstamp": round(tstamp, 4),
        "type": _winner(rng, a, b, len_a, len_b, voter, "adversary"),
        "models": public,
        "states": states,
        "ip": _hash(voter),
    }
    if not older:
        day = int((tstamp - START) // 86_400)
        record.update(
            {
                "schema_version": 1,
                "mode": "side_by_side" if named else "battle",
                "battle_id": f"b{i}",
                "anonymous": not named,
                "user": "",
                "extra": {"session": _hash(f"{voter}/{day}")},
            }
        )
    return record


def _rare(n: int) -> list[dict]:
    """rare-1b: two battles, both lost to ember-7b."""
    out = []
    for k in range(2):
        states = [
            _state(RARE, "Hello there", ["hi"], f"rare{k}a", False, ["stop"], ""),
            _state("ember-7b", "Hello there", ["Hello! How can I help?"], f"rare{k}b", False, ["stop"], ""),
        ]
        out.append(
            {
                "tstamp": START + 3600 * (k + 1),
                "type": "rightvote",
                "models": ["", ""],
                "states": states,
                "ip": _hash(f"rare{k}"),
                "schema_version": 1,
                "mode": "battle",
                "battle_id": f"rare{k}",
                "anonymous": True,
                "user": "",
                "extra": {"session": _hash(f"rare{k}")},
            }
        )
    return out


def simulate(
    out_dir: Path,
    battles: int = 20_000,
    seed: int = 0,
    days: int = 10,
    voters: int = 300,
    server: str = "",
    requantise_late: bool = False,
    progress: Progress | None = None,
    category_votes: Sequence[int] = (),
) -> dict:
    """Write `battles` votes (rare-1b's two among them) to the log files (named for `server`, if
    given) and truth.json; return the truth. With `requantise_late`, late-7b has a second
    fingerprint in the last quarter of the log. `progress` counts the battles made (a command
    line's bar). With `category_votes`, as many more votes per category (`_topic_votes`), and
    OUTDIR/categories.yaml."""
    rng = np.random.default_rng(seed)
    rare = _rare(battles)[:battles]
    # drawn as the first of `battles` votes: the same draws, and times, whatever the rare ones take
    drawn = []
    for i in range(battles - len(rare)):
        drawn.append(_vote(rng, i, battles, days, voters, requantise_late))
        if progress is not None:
            progress.add()
    records = drawn + rare
    if progress is not None:
        progress.add(len(rare))
    topics: dict[str, dict[str, float]] = {}
    if category_votes:
        topic_records, topics = _topic_votes(seed, category_votes, days)
        records += topic_records
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "categories.yaml").write_text(
            "categories:\n" + "".join(f"  - name: {t}\n    keywords: [{t}]\n" for t in topics), encoding="utf-8"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    words = identity_words([*TRUE, RARE])  # an arena serving the simulated models, no extra words
    version = word_list_version(words)
    by_day: dict[str, list[str]] = {}
    for record in sorted(records, key=lambda r: r["tstamp"]):
        if "schema_version" in record:  # (not the older form: FastChat never wrote these keys)
            record = _as_written(record, words, version)
        day = np.datetime64(int(record["tstamp"]), "s").astype("datetime64[D]").astype(str)
        by_day.setdefault(day, []).append(json.dumps(record, ensure_ascii=True))
    for day, lines in by_day.items():
        (out_dir / day_file_name(day, server)).write_text("\n".join(lines) + "\n", encoding="utf-8")
    truth = {
        "ratings": TRUE,
        "speeds": SPEEDS,
        "rare": RARE,
        "late": LATE,
        "verbose": VERBOSE,
        "adversary": "ip:" + _hash("adversary"),
        "heavy_voter": "ip:" + _hash("heavy"),
        "votes": len(records),
        "files": len(by_day),
        "fingerprints": {m: fingerprint_of(m) for m in [*TRUE, RARE]},
        "requantised": {LATE: fingerprint_of(LATE, True)} if requantise_late else {},
        "categories": topics,  # declared category -> model -> its true rating there (mean 1000)
    }
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return truth


CATEGORY_SPREAD = 40.0  # Elo points: the sd of a model's rating in a category around its overall one
TOPICS = ("astronomy", "cooking", "contracts", "chemistry", "poetry", "networking")


def _topic_votes(seed: int, per_topic: Sequence[int], days: int) -> tuple[list[dict], dict[str, dict[str, float]]]:
    """Anonymous battle votes whose prompts name a topic (the keyword of a declared category), won
    at the topic's own true ratings (the overall ones plus a normal difference of CATEGORY_SPREAD);
    short equal replies, no leaks, errors or ties of style. Their own random draws (seed + 1): the
    rest of the log is unchanged by them. Returns the records and each topic's true ratings."""
    if len(per_topic) > len(TOPICS):
        raise ValueError(f"at most {len(TOPICS)} simulated categories")
    rng = np.random.default_rng(seed + 1)
    models = [m for m in TRUE if m != LATE]
    base = np.array([TRUE[m] for m in models])
    records, truths = [], {}
    for topic, count in zip(TOPICS, per_topic, strict=False):
        truth = base + rng.normal(0.0, CATEGORY_SPREAD, size=len(models))
        truths[topic] = dict(zip(models, (truth - truth.mean() + 1000.0).tolist(), strict=True))
        for k in range(count):
            a, b = rng.choice(len(models), size=2, replace=False)
            p = 1 / (1 + 10 ** ((truth[b] - truth[a]) / 400))
            kind = "tievote" if rng.random() < TIE_SHARE else "leftvote" if rng.random() < p else "rightvote"
            prompt = f"A question about {topic}: {PROMPTS['English'][k % len(PROMPTS['English'])]}"
            conv = f"{topic}{k}"
            states = [
                _state(models[i], prompt, ["an answer of a few words"], f"{conv}{side}", False, ["stop"], "")
                for side, i in (("a", a), ("b", b))
            ]
            voter = f"voter{int(rng.integers(1, 200))}"
            tstamp = START + float(rng.random()) * days * 86_400
            records.append(
                {
                    "tstamp": round(tstamp, 4),
                    "type": kind,
                    "models": ["", ""],
                    "states": states,
                    "ip": _hash(voter),
                    "schema_version": 1,
                    "mode": "battle",
                    "battle_id": conv,
                    "anonymous": True,
                    "user": "",
                    "extra": {"session": _hash(f"{voter}/topic")},
                }
            )
    return records, truths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webui.leaderboard.simulate", description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the day files into")
    parser.add_argument("--battles", type=int, default=20_000, help="battle votes to simulate; default 20000")
    parser.add_argument("--seed", type=int, default=0, help="random seed; default 0")
    parser.add_argument("--days", type=int, default=10, help="days the votes spread over; default 10")
    parser.add_argument("--server-name", default="", help="name the files as this server's (YYYY-MM-DD-NAME-conv.json)")
    parser.add_argument(
        "--requantise-late",
        action="store_true",
        help="serve late-7b from other weights (a second fingerprint) for the last quarter of the log",
    )
    parser.add_argument(
        "--category-votes",
        default="",
        metavar="N,N,...",
        help="also simulate categories: this many votes in each (prompts naming a topic, won at the topic's own "
        "true ratings), and write OUTDIR/categories.yaml to pass as --categories-file",
    )
    args = parser.parse_args(argv)
    try:
        per_category = [int(n) for n in args.category_votes.split(",") if n.strip()]
    except ValueError:
        per_category = [-1]
    if not all(n > 0 for n in per_category) or len(per_category) > len(TOPICS):
        print(f"error: --category-votes takes up to {len(TOPICS)} counts of 1 or more", file=sys.stderr)
        return 2
    if args.battles < 1 or args.days < 1:
        print("error: --battles and --days must be at least 1", file=sys.stderr)
        return 2
    with Progress("simulating", args.battles, unit="battles") as progress:  # a bar on a terminal only
        truth = simulate(
            args.out_dir,
            args.battles,
            args.seed,
            args.days,
            server=args.server_name,
            requantise_late=args.requantise_late,
            progress=progress,
            category_votes=per_category,
        )
    print(f"wrote {truth['votes']} votes in {truth['files']} day files to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
