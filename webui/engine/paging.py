"""The paged KV cache of transformers' continuous batching, in the units the manager allocates:
pages of `PAGE_SIZE` tokens. Apart from the engine (webui.engine.batching), which needs a recent
transformers, so that the checks at load can size a cache without importing it."""

from __future__ import annotations

import math

DEFAULT_KV_CACHE_TOKENS = 8192  # on a CPU, where nothing sizes it (webui.engine.batching_load)
PAGE_SIZE = 256  # tokens per cache page: the manager's default


def whole_pages(tokens: int) -> int:
    """A cache size in tokens, up to whole pages: what the manager allocates."""
    return PAGE_SIZE * math.ceil(tokens / PAGE_SIZE)
