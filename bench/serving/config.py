"""What a run measures: the sections, the prompt, and the two presets (full and --quick).

Every path gets the same request: the same chat prompt, greedy decoding, repetition penalty 1 and
a fixed number of new tokens (end-of-sequence ignored where the path allows it), so that tokens/s
compare like with like.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from webui.config import DEFAULT_MODELS_FILE

SECTIONS = ("overhead", "ttft", "panes", "users", "coldstart", "memory", "browser", "engines")
# Run order: the subprocess sections first, while nothing else holds the cores or the memory.
RUN_ORDER = ("memory", "coldstart", "engines", "overhead", "ttft", "panes", "users", "browser")
PATHS = ("raw", "engine", "gradio", "api")
# Long enough an answer that greedy decoding does not end before the token budget; the Gradio path
# cannot ignore end-of-sequence, so this matters there.
PROMPT = (
    "Write a long, detailed story about a lighthouse keeper who finds an old map hidden in the "
    "wall. Describe every room of the lighthouse, the weather and the sea."
)


@dataclass(frozen=True)
class BenchConfig:
    preset: str = "full"
    models_file: Path = DEFAULT_MODELS_FILE
    device: str = "auto"  # auto | cpu | cuda | cuda:N: written into a copy of the models file
    sections: tuple[str, ...] = SECTIONS
    prompt: str = PROMPT
    # 1 + 2. overhead and time to first token
    overhead_tokens: int = 128
    overhead_repeats: int = 5  # a median of 5 shrugs off two stalls (seen on shared 2-core machines)
    ttft_tokens: int = 4
    ttft_repeats: int = 5
    # 3. two panes at once
    panes_tokens: int = 64
    panes_repeats: int = 3
    # 4. many users
    users_levels: tuple[int, ...] = (1, 2, 4, 8, 16)
    users_tokens: int = 48
    users_repeats: int = 3  # each level, app and engine alone in turn; the median run is reported
    users_path: str = "api"  # api | gradio | engine
    # 5. cold start
    coldstart_cold: bool = True  # also launch with an empty weights cache (slow: dequantises every GGUF)
    coldstart_timeout_s: float = 600.0
    # where the server and the in-process models come from
    server_timeout_s: float = 600.0
    only_models: tuple[str, ...] = field(default_factory=tuple)  # empty: every model in the file

    @classmethod
    def quick(cls, **changes: object) -> BenchConfig:
        """Small token counts and few repeats: checks the harness end to end in a few minutes."""
        base = cls(
            preset="quick",
            overhead_tokens=24,
            overhead_repeats=2,
            ttft_repeats=3,
            panes_tokens=16,
            panes_repeats=1,
            users_levels=(1, 2, 4),
            users_tokens=12,
            users_repeats=1,
            coldstart_cold=False,
        )
        return replace(base, **changes)  # type: ignore[arg-type]

    def with_changes(self, **changes: object) -> BenchConfig:
        return replace(self, **changes)  # type: ignore[arg-type]
