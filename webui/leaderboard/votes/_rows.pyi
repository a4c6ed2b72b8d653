from collections.abc import Callable
from typing import Any

def configure(
    winners: dict[str, str | None],
    anonymous: tuple[str, ...],
    text_style: Callable[[str], tuple[int, int, int, int]],
    detect_language: Callable[[str], str],
    has_code: Callable[[str], bool],
    is_long: Callable[[str], bool],
    name_max: int,
    features_version: int,
    count_keys: tuple[str, ...],
    /,
) -> None: ...
def vote_values(record: object, /) -> tuple[list[Any], tuple[str, ...] | None, set[str]] | None: ...
def model_names_in(data: bytes | bytearray | memoryview, /) -> set[bytes]: ...
