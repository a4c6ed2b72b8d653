"""A real (random-weight) Llama small enough to build in well under a second, and the models file
that serves it (`tiny_models`: the one builder of a tests' models file).

Word-level tokenizer, a chat template, and `save_pretrained`: it goes through exactly the same
loading path as a downloaded model folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

Entry = str | Mapping[str, Any]  # a name, or a models-file entry's keys

WORDS = [
    "hello",
    "world",
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "and",
    "is",
    "what",
    "capital",
    "of",
    "france",
    "paris",
    "answer",
    "yes",
    "no",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "stop",
    "here",
    "red",
    "blue",
    "green",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
SPECIALS = ["<unk>", "<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]


def build_tiny_model(folder: Path, *, seed: int = 0, hidden_size: int = 16, layers: int = 2) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        additional_special_tokens=SPECIALS[4:],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=1,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# The three entries most tests share: greedy, sampled with a system prompt, and an fschat template.
THREE: tuple[Entry, ...] = (
    {"name": "tiny-a", "sampling": {"temperature": 0, "max_new_tokens": 16}},
    {"name": "tiny-b", "system_prompt": "You are tiny b.", "sampling": {"temperature": 0.8, "max_new_tokens": 16}},
    {"name": "tiny-fschat", "template": "fschat:zero_shot", "sampling": {"temperature": 0, "max_new_tokens": 16}},
)


def tiny_models(
    folder: Path, model_dir: Path, entries: Sequence[Entry] = ("tiny-a", "tiny-b"), *, max_new_tokens: int = 8
) -> Path:
    """`folder`/models.yaml, the one way tests write a models file. Each of `entries` is a name (the
    tiny model of `model_dir` under it, greedy, `max_new_tokens`) or an entry's own keys, written as
    given, with the tiny model as its source unless it names one or a remote `base_url`."""
    greedy = {"temperature": 0, "max_new_tokens": max_new_tokens}
    written = []
    for entry in entries:
        keys = {"name": entry, "sampling": greedy} if isinstance(entry, str) else dict(entry)
        if "source" not in keys and "base_url" not in keys:
            keys = {"name": keys.pop("name"), "source": str(model_dir), **keys}
        written.append(keys)
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump({"models": written}, sort_keys=False))
    return path
