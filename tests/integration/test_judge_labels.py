"""Category labels from a judge: a real HTTP server, scripted to label prompts, is asked through the
arena's own `openai` backend by `python -m webui.judge --label-categories`; the labels go to their
own files and land on the category boards, a visitor's tag and a rule's match are never asked about
nor overridden, an answer without one declared mark is kept as unparsed, a run killed with -9
resumes without labelling a vote twice, and bad input exits 2 having written nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_judge import ScriptedJudge, models_file
from tests.records import battle, vote
from tests.servers import RunningServer, serve_app, wait_for
from webui.judge.__main__ import main
from webui.leaderboard.board.build import BoardOptions, board_from_index
from webui.leaderboard.votes.declared import TAG_FIELD, Membership, load
from webui.leaderboard.votes.index import VoteIndex
from webui.leaderboard.votes.labels import label_files, read_labels
from webui.records.privacy import IdentityPolicy
from webui.records.storage import JsonlRecorder, log_files

ROOT = Path(__file__).resolve().parents[2]
CATEGORIES = """\
categories:
  - name: gardening
    keywords: [tomato]
    description: growing plants
  - name: poetry
    description: poems and verse
"""


class LabellingJudge(ScriptedJudge):
    """Answers a labelling prompt by a word in the user's message: "sonnet" -> poetry, "cucumber"
    -> gardening, "Gardening" (the right name, the wrong case) -> a near miss, else none; "vague"
    answers without a mark."""

    def answer(self, prompt: str) -> str:
        if self.mode == "vague":
            return "It could be several things."
        message = prompt.split("<|The Start of the User's Message|>")[1].split("<|The End of the User's Message|>")[0]
        for word, mark in (("sonnet", "poetry"), ("cucumber", "gardening"), ("Gardening", "Gardening")):
            if word in message:
                return f"It is about {word}.\n[[{mark}]]"
        return "Nothing listed fits.\n[[none]]"


@pytest.fixture(scope="module")
def label_server() -> Iterator[tuple[LabellingJudge, RunningServer]]:
    scripted = LabellingJudge()
    server = serve_app(scripted.app, name="labelling-judge")
    yield scripted, server
    server.server.force_exit = True
    server.stop()


@pytest.fixture
def scripted(label_server: tuple[LabellingJudge, RunningServer]) -> LabellingJudge:
    judge, _ = label_server
    judge.mode, judge.delay_s = "well", 0.0
    judge.prompts.clear()
    return judge


def logged(log_dir: Path, prompts: list[tuple[str, str | None]]) -> None:
    """One anonymous battle vote per (first prompt, visitor tag)."""
    recorder = JsonlRecorder(log_dir, IdentityPolicy("none"))
    for i, (prompt, tag) in enumerate(prompts):
        convs = battle("strong", "weak", (f"good {i}", f"fine {i}"), prompt=prompt)
        recorder.vote(vote("leftvote" if i % 3 else "rightvote", convs, **({TAG_FIELD: tag} if tag else {})))
    recorder.close()


def setup(tmp_path: Path, url: str, prompts: list[tuple[str, str | None]], concurrency: int = 3) -> list[str]:
    logged(tmp_path, prompts)
    (tmp_path / "categories.yaml").write_text(CATEGORIES)
    models_file(tmp_path, url, concurrency)
    return ["--judge", "judge", "--models", str(tmp_path / "models.yaml")]


def label(log_dir: Path, common: list[str], *more: str) -> int:
    return main(
        [str(log_dir), *common, "--label-categories", "--categories-file", str(log_dir / "categories.yaml"), *more]
    )


def category_counts(log_dir: Path) -> dict[str, int]:
    index = VoteIndex(log_dir)
    try:
        membership = Membership.with_labels(load(log_dir / "categories.yaml"), log_dir)
        board = board_from_index(index, BoardOptions(rounds=0, min_battles=0), membership=membership)
    finally:
        index.close()
    return {str(k): int(v) for k, v in board.categories.set_index("category")["battles"].items()}


def asked_messages(scripted: ScriptedJudge) -> list[str]:
    return [p.split("<|The Start of the User's Message|>\n")[1].split("\n<|The End")[0] for p in scripted.prompts]


def test_labels_fill_the_category_boards_and_never_override_a_rule_or_a_visitor(
    scripted: LabellingJudge, label_server: tuple[LabellingJudge, RunningServer], tmp_path: Path
) -> None:
    prompts = [
        ("write a sonnet about rain", None),  # the judge: poetry
        ("a sonnet for my mother", None),  # poetry
        ("when do I water cucumbers", None),  # the judge: gardening (no rule says so)
        ("grow a tomato", None),  # the rule: gardening, never asked
        ("a sonnet on tomatoes", "poetry"),  # the visitor's tag ("tomatoes" is not the rule's word): never asked
        ("another sonnet, please", "gardening"),  # the visitor says gardening: never asked, never poetry
        ("a sonnet about soup", "cooking"),  # a tag the file does not declare (now): still the visitor's, never asked
        ("what is the capital of France", None),  # the judge: none
    ]
    common = setup(tmp_path, label_server[1].v1, prompts)
    logs_before = {p.name: p.read_bytes() for p in log_files(tmp_path)}
    before = category_counts(tmp_path)
    assert (before["gardening"], before["poetry"]) == (2, 1)  # the rule's tomato and a tag; a tag
    assert label(tmp_path, common) == 0
    assert sorted(asked_messages(scripted)) == sorted(
        [
            "write a sonnet about rain",
            "a sonnet for my mother",
            "when do I water cucumbers",
            "what is the capital of France",
        ]
    )
    labels = {r["vote"]: r for r in read_labels(tmp_path)}
    assert len(labels) == 4
    assert sorted(str(r["mark"]) for r in labels.values()) == ["gardening", "none", "poetry", "poetry"]
    for record in labels.values():
        assert record["categories"] == ["gardening", "poetry"] and record["judge"] == "judge"
        assert record["category"] == (None if record["mark"] == "none" else record["mark"])
    after = category_counts(tmp_path)
    assert (after["gardening"], after["poetry"]) == (3, 3)  # + cucumbers; + two sonnets
    # the labels live apart: the vote logs are byte for byte as before
    assert {p.name: p.read_bytes() for p in log_files(tmp_path)} == logs_before
    assert label_files(tmp_path) and not set(label_files(tmp_path)) & set(log_files(tmp_path))
    scripted.prompts.clear()
    assert label(tmp_path, common) == 0  # nothing left: nothing asked again
    assert scripted.prompts == [] and len(list(read_labels(tmp_path))) == 4


def test_an_answer_without_one_declared_mark_is_kept_unparsed_and_counts_for_nothing(
    scripted: LabellingJudge, label_server: tuple[LabellingJudge, RunningServer], tmp_path: Path
) -> None:
    common = setup(tmp_path, label_server[1].v1, [("Gardening question", None), ("a sonnet", None)])
    scripted.mode = "vague"
    assert label(tmp_path, common, "--limit", "1") == 0
    scripted.mode = "well"
    assert label(tmp_path, common) == 0
    records = sorted(read_labels(tmp_path), key=lambda r: r["vote_tstamp"])
    assert [r["mark"] for r in records] == [None, "poetry"]
    assert records[0]["answer"] == "It could be several things." and records[0]["category"] is None
    assert label(tmp_path, common) == 0  # an unparsed answer is a label of its own kind: not asked again
    assert len(scripted.prompts) == 2
    # a near miss ([[Gardening]] for gardening) is unparsed too, under another prompt version
    other = tmp_path / "other.txt"
    other.write_text(
        "Which?\n{categories}\n<|The Start of the User's Message|>\n{prompt}\n<|The End of the User's Message|>\n"
    )
    assert label(tmp_path, common, "--label-prompt", str(other)) == 0
    newest = [r for r in read_labels(tmp_path) if r["prompt_version"] != records[0]["prompt_version"]]
    assert sorted(str(r["mark"]) for r in newest) == ["None", "poetry"]
    assert category_counts(tmp_path)["gardening"] == 0  # unparsed and near misses place nothing


def test_a_run_killed_with_9_and_started_again_labels_each_vote_once(
    scripted: LabellingJudge, label_server: tuple[LabellingJudge, RunningServer], tmp_path: Path
) -> None:
    common = setup(tmp_path, label_server[1].v1, [(f"sonnet {i}", None) for i in range(12)], concurrency=2)
    scripted.delay_s = 0.2
    command = [sys.executable, "-m", "webui.judge", str(tmp_path), *common, "--label-categories"]
    command += ["--categories-file", str(tmp_path / "categories.yaml")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(list(read_labels(tmp_path))) >= 3, 60, "no label was written")
    finally:
        process.kill()
        process.wait(30)
    killed_at = len(list(read_labels(tmp_path)))
    assert killed_at < 12
    scripted.delay_s = 0.0
    assert label(tmp_path, common) == 0
    keys = [r["vote"] for r in read_labels(tmp_path)]
    assert len(keys) == 12 and len(set(keys)) == 12
    assert category_counts(tmp_path)["poetry"] == 12


def test_bad_input_exits_2_and_writes_nothing(
    label_server: tuple[LabellingJudge, RunningServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ARENA_CATEGORIES_FILE", raising=False)
    common = setup(tmp_path, label_server[1].v1, [("a sonnet", None)])
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([str(tmp_path), *common, "--label-categories"]) == 2  # no categories file
    assert "--label-categories needs the declared categories" in capsys.readouterr().err
    assert label(tmp_path, ["--judge", "nobody", "--models", str(tmp_path / "models.yaml")]) == 2
    assert "no model 'nobody'" in capsys.readouterr().err
    (tmp_path / "none.yaml").write_text("categories:\n  - name: none\n")
    assert main([str(tmp_path), *common, "--label-categories", "--categories-file", str(tmp_path / "none.yaml")]) == 2
    assert "cannot be labelled" in capsys.readouterr().err
    (tmp_path / "bad-prompt.txt").write_text("Which category? {categories}\n")
    assert label(tmp_path, common, "--label-prompt", str(tmp_path / "bad-prompt.txt")) == 2
    assert "{prompt}" in capsys.readouterr().err
    (tmp_path / "none.yaml").unlink()
    (tmp_path / "bad-prompt.txt").unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no index, no label file
