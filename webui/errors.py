"""Errors the user can see. Each one says what went wrong and, where it can, what to do."""

from __future__ import annotations

ECHO_CHARS = 100  # how much of a client's own string (a model name, a field name) an error repeats


def clipped(text: str, limit: int = ECHO_CHARS) -> str:
    """A client-supplied string as an error may repeat it: its start only, so that a megabyte sent
    is not a megabyte answered (nor logged)."""
    return text if len(text) <= limit else text[:limit] + "…"


class ArenaError(Exception):
    """Base class: a problem that is reported to the user instead of crashing the server."""


class ConfigError(ArenaError):
    """A settings value or a models file is wrong. The message names the file, entry and key."""


class ParamError(ArenaError, ValueError):
    """A sampling or request parameter is out of range. `param` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


class PromptTooLong(ArenaError):
    """The newest message alone does not fit the context together with max_new_tokens. `within`
    names what it must fit in: the model's context, or an engine's smaller limit (a paged cache)."""

    def __init__(self, prompt_tokens: int, limit: int, within: str = "this model's context") -> None:
        self.prompt_tokens = prompt_tokens
        self.limit = limit
        self.within = within
        self.excess = prompt_tokens - limit
        super().__init__(
            f"the prompt is {prompt_tokens} tokens but only {limit} fit in {within} "
            f"with the requested max_new_tokens ({self.excess} tokens too many); "
            "shorten the message or lower max_new_tokens"
        )


class ModelNotFound(ArenaError, KeyError):
    """No model with that name is in the registry."""

    def __str__(self) -> str:  # KeyError would add quotes around the message
        return str(self.args[0])


class ModelNotReady(ArenaError):
    """The model exists but is still loading, or failed to load (the message says which)."""


class Overloaded(ArenaError):
    """The model cannot take the request now: its line of waiting requests is full (refused at
    once), or every generation slot stayed busy for the whole queue timeout."""

    def __init__(self, model: str, waited_s: float, *, waiting: int | None = None) -> None:
        self.model = model
        if waiting is not None:
            self.retry_after_s = 5
            super().__init__(f"{model} is busy ({waiting} requests are already waiting); try again shortly")
        else:
            self.retry_after_s = max(1, int(waited_s))
            super().__init__(f"{model} is busy (waited {waited_s:.0f} s for a free slot); try again shortly")
