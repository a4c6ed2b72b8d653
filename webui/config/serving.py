"""The settings table, first part: the models, the engines that serve them and the limits of one
request. Rows are in the order --help lists them (webui/config/option.py says what a row holds)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webui.config.defaults import (
    DEFAULT_MODELS_FILE,
    default_cache_dir,
    default_host,
    default_log_dir,
    default_port,
    from_environment,
)
from webui.config.option import setting
from webui.config.values import (
    AT_LEAST_1,
    BATCHING_MODES,
    OFF_OR_MORE,
    PAIRING_MODES,
    PORT,
    POSITIVE,
    SHARE_OF_FREE_MEMORY,
    check_keys,
)


@dataclass(frozen=True)
class ServingSettings:
    """A part of `Settings` (webui/config/settings.py), never made on its own."""

    models_file: Path = setting(
        DEFAULT_MODELS_FILE, flag="--models", help=f"models file (YAML); default {DEFAULT_MODELS_FILE}"
    )
    host: str = setting(
        factory=default_host,
        flag="--host",
        help="address to listen on; default 127.0.0.1 (use 0.0.0.0 to serve a network)",
    )
    port: int = setting(factory=default_port, flag="--port", help="port; default 7860", check=PORT)
    share: bool = setting(False, flag="--share", help="create a public Gradio share link (needs internet)")
    log_dir: Path = setting(
        factory=default_log_dir,
        flag="--log-dir",
        help="where votes and transcripts go; default ./logs (/data/logs on Spaces)",
    )
    cache_dir: Path = setting(
        factory=default_cache_dir,
        flag="--cache-dir",
        help="cache for dequantised weights; default ~/.cache/pairwise-arena",
    )
    preload: bool = setting(True, flag="--no-preload", help="load models on first use instead of at start")
    load_parallel: int = setting(  # vLLM starts overlap well, hence 2
        2,
        flag="--load-parallel",
        help="models loading at once at start; default 2 (1: one after another)",
        check=AT_LEAST_1,
    )
    max_concurrency: int = setting(  # per set of weights; a models-file entry may set its own
        2, flag="--max-concurrency", help="simultaneous generations per model; default 2", check=AT_LEAST_1
    )
    queue_timeout_s: float = setting(
        60.0, flag="--queue-timeout", help="seconds a request waits for a free slot; default 60", check=POSITIVE
    )
    # The generations one model runs at once on an engine that batches them: vLLM, llama.cpp's server slots,
    # transformers' continuous batching (a models-file entry may set its own max_concurrency).
    batch_slots: int = setting(
        8,
        flag="--batch-slots",
        aliases=("--vllm-concurrency",),
        help="simultaneous generations per model on every engine that batches them (vLLM, llama.cpp, "
        "transformers' continuous batching); default 8",
        check=AT_LEAST_1,
    )
    # vLLM (docs/models.md): the interpreter that has it, how long a server may take to start.
    vllm_python: str = setting(
        factory=from_environment("ARENA_VLLM_PYTHON"),
        flag="--vllm-python",
        help="Python interpreter with vLLM installed; default: .venv-vllm beside the app if the installer made one; "
        "'none' serves every model with transformers",
    )
    vllm_start_timeout_s: float = setting(
        600.0,
        flag="--vllm-start-timeout",
        help="seconds a vLLM server may take to become ready; default 600",
        check=POSITIVE,
    )
    # A GPU server (vLLM, SGLang, TGI) batches far more than this at little cost per request, and a visitor beyond
    # the slots waits a whole reply (docs/api.md, "Remote backends").
    remote_concurrency: int = setting(
        16,
        flag="--remote-concurrency",
        help="requests in flight to each replica of a `backend: openai` model without max_concurrency (the "
        "server batches them); default 16",
        check=AT_LEAST_1,
    )
    # auto: on a GPU the batch was faster at every level measured; on a CPU one chat was not, and a batch
    # on cores other work shares collapsed (docs/performance.md)
    transformers_batching: str = setting(
        "auto",
        flag="--transformers-batching",
        choices=BATCHING_MODES,
        help="transformers serves a model's replies in one continuous batch (on) or one generate() per reply "
        "(off); auto (default): the batch for a model on a GPU, generate() on a CPU",
    )
    transformers_kv_cache_tokens: int = setting(  # allocated at load; 0: sized there (webui.engine.batching_load)
        0,
        flag="--transformers-kv-cache-tokens",
        help="tokens of the paged KV cache each transformers model allocates for continuous batching; default 0: "
        "on a GPU every slot's whole context as far as --transformers-kv-cache-memory allows, on a CPU 8192",
        check=OFF_OR_MORE,
    )
    transformers_kv_cache_memory: float = setting(
        0.5,
        flag="--transformers-kv-cache-memory",
        help="share of the GPU memory free when a transformers model loads that its paged KV cache may take when "
        "sized at load; default 0.5",
        check=SHARE_OF_FREE_MEMORY,
    )
    llama_server: str = setting(
        factory=from_environment("ARENA_LLAMA_SERVER"),
        flag="--llama-server",
        help="llama.cpp's llama-server binary; default: .llama.cpp/bin/llama-server beside the app (the installer "
        "builds it) or one on PATH; 'none' keeps `auto` GGUF models off llama.cpp",
    )
    queue_per_slot: int = setting(
        4,
        flag="--queue-per-slot",
        help="requests that may wait per generation slot of a model before new ones are refused at once; default 4",
        check=AT_LEAST_1,
    )
    max_input_chars: int = setting(
        12_000, flag="--max-input-chars", help="longest accepted message; default 12000", check=AT_LEAST_1
    )
    max_turns: int = setting(
        20,
        flag="--max-turns",
        help="turns per conversation before a new round is needed; default 20",
        check=AT_LEAST_1,
    )
    # A pane on its model's own settings is cut at this length, the same for both: each model's own
    # max_new_tokens would tell them apart before the vote (docs/ui.md).
    battle_max_new_tokens: int = setting(
        256,
        flag="--battle-max-new-tokens",
        help="one length cap for both models of a battle (their own would tell them apart); default 256",
        check=AT_LEAST_1,
    )
    # Smart is the default: on simulated votes it needs 2-4x fewer (docs/leaderboard.md).
    pairing: str = setting(
        "smart",
        flag="--pairing",
        choices=PAIRING_MODES,
        help="how a battle's pair is chosen: smart (default) favours the pair whose vote narrows the ratings most, "
        "new models first; weighted draws by the models-file weights alone. Weight 0 keeps a model out in both",
    )
    thread_join_timeout_s: float = setting(30.0)
    # Keys the HTTP API (/v1) accepts as `Authorization: Bearer KEY`; empty means no key needed.
    # Environment only (ARENA_API_KEYS=key1,key2): a command-line key would show in `ps`.
    api_keys: tuple[str, ...] = setting((), check=check_keys, private=True)
