"""Chat with one model in the terminal: the quickest proof that a model works.

    python -m webui.chat --model SmolLM2-135M-Instruct "What is the capital of France?"
    python -m webui.chat --list

The reply streams to stdout; the model's status and the statistics go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from webui.config import DEFAULT_MODELS_FILE, Settings
from webui.engine.registry import build_registry
from webui.errors import ArenaError
from webui.types import Finished, Message, StreamEvent, TextDelta


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webui.chat", description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt", nargs="?", help="the message; read from stdin when left out")
    parser.add_argument("--models", type=Path, default=None, help=f"models file; default {DEFAULT_MODELS_FILE}")
    parser.add_argument("--model", "-m", help="model name from the models file; default: the first one")
    parser.add_argument("--list", action="store_true", help="list the models in the file and exit")
    parser.add_argument("--system", help="system prompt (replaces the model's own)")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--max-new-tokens", type=int)
    parser.add_argument("--repetition-penalty", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--stop", action="append", help="stop string (repeatable)")
    parser.add_argument("--show-prompt", action="store_true", help="print the rendered prompt to stderr first")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)

    try:
        settings = Settings.from_env(models_file=args.models)
        registry = build_registry(settings)
        if args.list:
            for name in registry.names():
                print(f"{name}\t{registry.spec(name).description}")
            return 0
        name = args.model or registry.names()[0]
        prompt = args.prompt if args.prompt is not None else sys.stdin.read()
        if not prompt.strip():
            parser.error("empty prompt")
        print(f"[loading {name} ...]", file=sys.stderr, flush=True)
        backend = registry.load(name)
        print(f"[{registry.status(name).describe()}]", file=sys.stderr, flush=True)
        messages = ([Message("system", args.system)] if args.system else []) + [Message("user", prompt)]
        params = backend.default_params().replace(
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            max_new_tokens=args.max_new_tokens,
            repetition_penalty=args.repetition_penalty,
            seed=args.seed,
            stop=tuple(args.stop or ()) or None,
        )
        if args.show_prompt:
            print(backend.render_prompt(messages), file=sys.stderr, flush=True)
        return _stream(backend.stream(messages, params, threading.Event()))
    except ArenaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _stream(events: Iterator[StreamEvent]) -> int:
    final: Finished | None = None
    try:
        for event in events:
            if isinstance(event, TextDelta):
                sys.stdout.write(event.text)
                sys.stdout.flush()
            else:
                final = event
    except KeyboardInterrupt:
        getattr(events, "close", lambda: None)()  # stops the model (a ClosingStream or a generator)
        print("\n[stopped]", file=sys.stderr)
        return 130
    print()
    if final is None:
        return 1
    stats = final.stats()
    rate = f"{stats['tokens_per_s']:.1f} tok/s" if stats["tokens_per_s"] else "n/a tok/s"
    ttft = f"{stats['ttft_s']:.2f} s" if stats["ttft_s"] is not None else "n/a"
    print(
        f"[{final.reason.value}; {final.prompt_tokens} prompt + {final.completion_tokens} completion tokens; "
        f"first token {ttft}; {rate}]",
        file=sys.stderr,
    )
    if final.error:
        print(f"error: {final.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
