"""Where the batch and the generate() path part: each model of a models file on transformers,
loaded twice (`--transformers-batching on` and `off`), the same greedy prompts through both, and
for each the first token where the texts differ (none: the same text). On a CPU in fp32 they agree
(the tests check it); on a GPU the kernels differ (flash attention and a paged cache on the batch,
sdpa on the generate() path), and this says after how many tokens a near tie goes the other way.

    python -m bench.serving.batching_parity MODELS_FILE [--tokens 64] [--out OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

PROMPTS = (
    "Write a short poem about the sea.",
    "Explain what a hash table is to a new programmer.",
    "List five countries in Africa and their capitals.",
    "What is the difference between weather and climate?",
)


def shared_prefix(left: str, right: str) -> str | None:
    """What two replies have in common before they part, or None where they are the same."""
    if left == right:
        return None
    length = next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b), min(len(left), len(right)))
    return left[:length]


def replies(models_file: Path, batching: bool, tokens: int, workdir: Path) -> dict[str, Any]:
    """Each model's status, device, tokenizer and, for each prompt, its greedy reply."""
    from webui.config import Settings
    from webui.engine import collect
    from webui.engine.registry import build_registry
    from webui.types import Message, SamplingParams

    settings = Settings.from_env(
        models_file=models_file,
        log_dir=workdir / ("on" if batching else "off"),
        transformers_batching="on" if batching else "off",
        vllm_python="none",
        llama_server="none",
        preload=False,
    )
    registry = build_registry(settings)
    greedy = SamplingParams(temperature=0, max_new_tokens=tokens, ignore_eos=True)
    out: dict[str, Any] = {}
    try:
        for name in registry.names():
            backend = registry.load(name)
            texts = [collect(backend.stream([Message("user", prompt)], greedy))[0] for prompt in PROMPTS]
            out[name] = {
                "engine": registry.status(name).engine,
                "device": str(backend.model.device),
                "texts": texts,
                "tokenizer": backend.tokenizer,  # counts the tokens the two replies share
            }
    finally:
        registry.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.serving.batching_parity", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("models", type=Path)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="batching-parity-"))  # the two registries' logs
    on = replies(args.models.resolve(), True, args.tokens, workdir)
    off = replies(args.models.resolve(), False, args.tokens, workdir)
    report: dict[str, Any] = {"tokens": args.tokens, "prompts": list(PROMPTS), "models": {}}
    print(f"| model | device | batch engine | tokens before the two paths part, per prompt (of {args.tokens}) |")
    print("|---|---|---|---|")
    for name, batched in on.items():
        prefixes = [shared_prefix(a, b) for a, b in zip(batched["texts"], off[name]["texts"], strict=True)]
        tokenizer = batched["tokenizer"]
        parts = [None if p is None else len(tokenizer.encode(p, add_special_tokens=False)) for p in prefixes]
        report["models"][name] = {
            "engine": batched["engine"],
            "device": batched["device"],
            "tokens_before_parting": parts,
            "texts": {"batch": batched["texts"], "generate": off[name]["texts"]},
        }
        shown = ", ".join("same" if part is None else str(part) for part in parts)
        print(f"| {name} | {batched['device']} | {batched['engine']} | {shown} |")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
