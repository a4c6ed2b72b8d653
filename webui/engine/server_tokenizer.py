"""The tokenizer of a model on llama.cpp: llama-server's own, asked over HTTP, and the GGUF's chat
template rendered here with jinja2.

Why not a tokenizer in this process: transformers reads a GGUF's vocabulary in seconds and brings
torch with it (700 MB); the server has already read the same vocabulary, and its tokenizer is by
definition the one the model runs with. `/tokenize` answers in about a millisecond, from the
server's HTTP threads (not its generation slots), so counting a prompt never waits for a reply.

It offers what webui.engine.templates.PromptBuilder asks of a tokenizer: `chat_template`,
`apply_chat_template(..., tokenize=False)` and `tokenizer(text, add_special_tokens=...)["input_ids"]`.
Special tokens written in the text (`<|im_start|>`) become their ids, as a Hugging Face tokenizer
makes them. A server that does not answer raises ModelNotReady, as any request to a dead engine does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from webui.engine import jinja_chat
from webui.engine.base import ENGINE_EXITED
from webui.errors import ModelNotReady


class ServerTokenizer(jinja_chat.ChatTemplateText):
    def __init__(
        self, name: str, client: httpx.Client, chat_template: str | None, special_tokens: Mapping[str, str]
    ) -> None:
        self.name = name
        self.chat_template = chat_template or None
        self.special_tokens: dict[str, Any] = dict(special_tokens)  # bos_token, eos_token: names a template may use
        self._client = client  # on the server's base URL; ours to close

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        body = {"content": text, "add_special": add_special_tokens, "parse_special": True}
        try:
            response = self._client.post("/tokenize", json=body)
            response.raise_for_status()
            tokens = response.json()["tokens"]
        except (httpx.HTTPError, ValueError, KeyError, RuntimeError) as exc:  # RuntimeError: a closed client
            raise ModelNotReady(f"{self.name} is not ready ({ENGINE_EXITED})") from exc
        return {"input_ids": [int(t) for t in tokens]}

    def close(self) -> None:
        self._client.close()


def special_tokens(props: Mapping[str, Any]) -> dict[str, str]:
    """The special tokens a template may name, from llama-server's /props."""
    return {key: props[key] for key in ("bos_token", "eos_token") if isinstance(props.get(key), str)}
