"""The terminal chat command, run in-process against the tiny models file."""

from __future__ import annotations

import pytest

from webui import chat


def test_chat_streams_a_reply_and_stats(tiny_models_file, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "cache"))
    code = chat.main(
        [
            "--models",
            str(tiny_models_file),
            "--model",
            "tiny-a",
            "--max-new-tokens",
            "5",
            "--temperature",
            "0",
            "--show-prompt",
            "hello world",
        ]
    )
    _out, err = capsys.readouterr()
    assert code == 0
    assert "<|user|> hello world <|end|> <|assistant|>" in err
    assert "prompt +" in err and "completion tokens" in err


def test_chat_lists_models_and_reports_errors(tiny_models_file, capsys) -> None:
    assert chat.main(["--models", str(tiny_models_file), "--list"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("tiny-a")
    assert chat.main(["--models", str(tiny_models_file), "--model", "nobody", "hi"]) == 2
    assert "no model named 'nobody'" in capsys.readouterr().err
    assert chat.main(["--models", str(tiny_models_file), "--model", "tiny-a", "--top-p", "0", "hi"]) == 2
    assert "top_p" in capsys.readouterr().err


def test_chat_rejects_empty_prompt(tiny_models_file) -> None:
    with pytest.raises(SystemExit):
        chat.main(["--models", str(tiny_models_file), "   "])
