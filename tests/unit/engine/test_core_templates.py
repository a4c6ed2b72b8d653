"""Prompt formatting: chat template first, explicit fschat templates, context fitting."""

from __future__ import annotations

from pathlib import Path

import pytest

from webui.engine.templates import build_template, fit_to_context, fschat_template
from webui.errors import ConfigError, PromptTooLong
from webui.types import Message


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _encode(tokenizer):
    return lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]


def test_chat_template_renders_with_system_prompt(tokenizer) -> None:
    template = build_template("auto", tokenizer, "tiny")
    assert template.name == "chat_template"
    text = template.render([Message("user", "hello")], system_prompt="be brief")
    assert text == "<|system|> be brief <|end|> <|user|> hello <|end|> <|assistant|> "


def test_conversation_system_message_wins_over_entry_default(tokenizer) -> None:
    template = build_template("chat_template", tokenizer, "tiny")
    text = template.render([Message("system", "mine"), Message("user", "hi")], system_prompt="default")
    assert "mine" in text and "default" not in text


def test_fschat_template_is_used_as_named_and_system_prompt_applies() -> None:
    template = fschat_template("zero_shot")
    text = template.render([Message("user", "Capital of France?")], system_prompt="You are terse.")
    assert text == "You are terse.\n### Human: Capital of France?\n### Assistant:"
    assert "###" in template.stop
    assert template.add_special_tokens  # plain text prompts need the tokenizer's BOS


def test_no_chat_template_falls_back_deliberately_not_to_one_shot(tokenizer) -> None:
    bare = type("Bare", (), {"chat_template": None})()
    template = build_template("auto", bare, "my-base-model")
    assert template.name == "fschat:zero_shot"
    assert "Got any creative ideas" not in template.render([Message("user", "hi")])  # one_shot's canned example
    with pytest.raises(ConfigError, match="has none"):
        build_template("chat_template", bare, "my-base-model")
    with pytest.raises(ConfigError, match="unknown fschat template"):
        build_template("fschat:not-a-template", bare, "my-base-model")


def test_jinja_file_template(tokenizer, tmp_path: Path) -> None:
    path = tmp_path / "t.jinja"
    path.write_text("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }} {% endfor %}")
    assert build_template(f"jinja:{path}", tokenizer, "tiny").render([Message("user", "hi")]) == "[user] hi "


def test_context_overflow_drops_oldest_turns_but_keeps_system(tokenizer) -> None:
    template = build_template("chat_template", tokenizer, "tiny")
    history = []
    for _ in range(6):
        history += [Message("user", "one two three four five"), Message("assistant", "six seven eight nine ten")]
    history.append(Message("user", "what is the capital"))
    full = fit_to_context(history, template, _encode(tokenizer), system_prompt="yes", budget=10_000)
    assert full.dropped_messages == 0
    fitted = fit_to_context(history, template, _encode(tokenizer), system_prompt="yes", budget=40)
    assert len(fitted.token_ids) <= 40
    assert fitted.dropped_messages > 0 and fitted.dropped_messages % 2 == 0  # whole turns
    assert fitted.text.startswith("<|system|> yes <|end|> <|user|>")
    assert fitted.text.endswith("<|user|> what is the capital <|end|> <|assistant|> ")


def test_newest_message_alone_too_long_is_a_clear_error(tokenizer) -> None:
    template = build_template("chat_template", tokenizer, "tiny")
    with pytest.raises(PromptTooLong) as info:
        fit_to_context([Message("user", "hello " * 50)], template, _encode(tokenizer), system_prompt=None, budget=20)
    assert info.value.excess == info.value.prompt_tokens - 20 > 0
    assert "too many" in str(info.value)
