"""The judge's prompt file, the strict reading of its answers, its verdict lines, and the models
file's judge: block."""

from __future__ import annotations

from pathlib import Path

import pytest

from webui.errors import ConfigError
from webui.judge.prompt import MARK_FIRST_PROMPT, JudgePrompt, parse_verdict, verdict_line_end
from webui.judge.records import Asked, verdict_record
from webui.models.specs import load_judge, load_specs


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("A is better.\n[[A]]", "A"),
        ("[[B]]", "B"),
        ("Equal.\n[[tie]]", "tie"),
        ("Neither helps. [[bothbad]]", "bothbad"),
        ("[[A]] ... so again [[A]]", "A"),  # the same mark twice is one verdict
        ("[[A]] no wait [[B]]", None),  # marks that disagree: unparsed, never the first or the last
        ("Assistant A is better.", None),  # no mark
        ("[A]", None),
        ("[[a]]", None),  # marks are exact
        ("[[Tie]]", None),
        ("", None),
    ],
)
def test_only_a_mark_of_one_kind_is_a_verdict(answer: str, verdict: str | None) -> None:
    assert parse_verdict(answer) == verdict


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ("A is better.\n[[A]]\nAnd more on that", "A is better.\n[[A]]"),  # cut after the verdict line
        ("[[B]]\n", "[[B]]"),  # the mark first, alone
        ("Final verdict: **[[tie]]**.\r\nThanks", "Final verdict: **[[tie]]**."),
        ("[[A]] if assistant A is better,\n[[B]] if", None),  # the instructions echoed: no verdict line
        ("Reasoning first, then\n[[bothbad]]", None),  # no newline yet: the line may go on
        ("[[a]]\n", None),
    ],
)
def test_a_judge_stops_at_the_end_of_its_first_verdict_line(answer: str, kept: str | None) -> None:
    end = verdict_line_end(answer)
    assert (answer[:end] if end is not None else None) == kept


def test_our_prompt_loads_and_shows_every_turn_of_both_conversations_in_order() -> None:
    prompt = JudgePrompt.load()
    a = [
        {"role": "system", "content": "hidden system prompt"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "reply A1"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "reply A2"},
    ]
    b = [{"role": "user", "content": "first question"}, {"role": "assistant", "content": "reply B1 {conversation_a}"}]
    text = prompt.render(a, b)
    assert text.index("reply A1") < text.index("second question") < text.index("reply A2") < text.index("reply B1")
    assert "hidden system prompt" not in text and not text.startswith("#")
    assert "reply B1 {conversation_a}" in text  # a reply's own text is never filled in again
    assert prompt.render(b, a).index("reply B1") < prompt.render(b, a).index("reply A1")
    assert len(prompt.version) == 12 and prompt.version == JudgePrompt.load().version


def test_the_mark_first_prompt_asks_for_the_verdict_after_both_conversations_and_nothing_else() -> None:
    prompt = JudgePrompt.load(MARK_FIRST_PROMPT)
    text = prompt.render([{"role": "user", "content": "q"}], [{"role": "user", "content": "q"}])
    assert text.index("Assistant B's Conversation|>") < text.index("alone on the first line") < text.index("[[A]]")
    assert "reasoning" not in text and prompt.version != JudgePrompt.load().version


def test_the_version_follows_the_text_sent_not_the_comments(tmp_path: Path) -> None:
    body = "Better? [[A]] [[B]] [[tie]] [[bothbad]]\n{conversation_a}\n{conversation_b}\n"
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text("# mine\n" + body)
    two.write_text("# another comment\n" + body)
    assert JudgePrompt.load(one).version == JudgePrompt.load(two).version
    two.write_text(body.replace("Better?", "Which is better?"))
    assert JudgePrompt.load(one).version != JudgePrompt.load(two).version


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[A]] {conversation_a}", "{conversation_b}"),
        ("[[A]] {conversation_a} {conversation_b} {conversation_b}", "exactly once"),
        ("Which? {conversation_a} {conversation_b}", "verdict marks"),
    ],
)
def test_a_prompt_without_what_it_needs_is_refused(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "prompt.txt"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r".*") as refused:
        JudgePrompt.load(path)
    assert says in str(refused.value) and str(path) in str(refused.value)
    with pytest.raises(ConfigError, match="cannot be read"):
        JudgePrompt.load(tmp_path / "missing.txt")


def test_a_verdict_names_the_side_whichever_order_it_was_shown_in() -> None:
    about = {"vote": "f@0", "model_a": "x", "model_b": "y", "human": "model_b"}
    same = verdict_record(about, "j", None, "v1", [Asked("ab", "[[B]]", "B", 1.0), Asked("ba", "[[A]]", "A", 2.0)], 5.0)
    assert same["verdict"] == "model_b" and same["consistent"] is True
    assert [o["verdict"] for o in same["orders"]] == ["model_b", "model_b"]
    biased = verdict_record(about, "j", None, "v1", [Asked("ab", "", "A", 1.0), Asked("ba", "", "A", 1.0)], 5.0)
    assert biased["verdict"] is None and biased["consistent"] is False
    half = verdict_record(about, "j", None, "v1", [Asked("ab", "", "tie", 1.0), Asked("ba", "?", None, 1.0)], 5.0)
    assert half["verdict"] is None and half["consistent"] is None
    both_bad = verdict_record(
        about, "j", None, "v1", [Asked("ab", "", "bothbad", 1.0), Asked("ba", "", "bothbad", 1.0)], 5.0
    )
    assert both_bad["verdict"] == "tie (bothbad)"  # the battles table's own word for it


MODELS = """\
models:
  - {name: small, backend: openai, base_url: "http://127.0.0.1:9/v1", remote_model: m}
  - {name: judge-70b, backend: openai, base_url: "http://127.0.0.1:9/v1", remote_model: m, weight: 0}
"""


def test_a_judge_block_names_an_entry_its_prompt_beside_the_file_and_a_weight(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(MODELS)
    assert load_judge(path) is None  # none: the CLI then needs --judge
    path.write_text(MODELS + "judge: {model: judge-70b, prompt: prompts/mine.txt, weight: 0.5}\n")
    block = load_judge(path)
    assert block is not None and block.model == "judge-70b" and block.weight == 0.5
    assert block.prompt == str(tmp_path / "prompts" / "mine.txt")
    path.write_text(MODELS + "judge: {model: judge-70b}\n")
    block = load_judge(path)
    assert block is not None and block.weight == "auto" and block.prompt is None
    assert [s.name for s in load_specs(path)] == ["small", "judge-70b"]  # the block is no entry


@pytest.mark.parametrize(
    ("block", "says"),
    [
        ("judge: {model: nobody}", "judge: key 'model': no entry named 'nobody'"),
        ("judge: {model: judge-70b, weight: -1}", "judge: key 'weight': must be 'auto' or a number of 0 or more"),
        ("judge: {model: judge-70b, weight: often}", "judge: key 'weight'"),
        (
            "judge: {model: judge-70b, temperature: 0}",
            "judge: key 'temperature': unknown; known: model, prompt, weight",
        ),
        ("judge: judge-70b", "judge: must be a mapping"),
        ("judge: {prompt: p.txt}", "judge: key 'model'"),
        ("jduge: {model: judge-70b}", "expected a mapping with the key 'models'"),
    ],
)
def test_a_broken_judge_block_fails_when_the_models_file_is_read(tmp_path: Path, block: str, says: str) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(MODELS + block + "\n")
    with pytest.raises(ConfigError) as refused:
        load_specs(path)  # the app's own start reads it: a typo never waits for the first judging run
    assert says in str(refused.value)
