"""A GGUF file's metadata: its scalar and string keys, read from the header alone.

Why not the `gguf` package's reader: it parses every array (Gemma's 262,144 vocabulary entries one by
one) and every tensor's description, 20 s for Gemma 3 270M on 2 cores; here arrays are stepped over,
the tensors never read, and Gemma's header takes a fraction of a second. Why not llama-server's
/props: it answers a default template (chatml) for a model that has none, so whether the file has
its own chat template can only be read here.

Guarantee: what is returned is what the file says (little-endian GGUF, versions 2 and 3); a file that
is not GGUF, or whose header runs past its end, raises GGUFError and nothing else. Standard library only.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

MAGIC = b"GGUF"
_SCALARS = {  # GGUF value type -> struct format
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
Value = int | float | bool | str


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands, or its header is cut short."""


def read_metadata(path: Path) -> dict[str, Value]:
    """Every scalar and string key of the file's header (arrays, such as the vocabulary, left out)."""
    with open(path, "rb") as handle:
        try:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as exc:  # an empty file cannot be mapped
            raise GGUFError(f"{path} is not a GGUF file ({exc})") from None
    with data:
        return _Header(data, path).read()


class _Header:
    def __init__(self, data: mmap.mmap, path: Path) -> None:
        self.data = data
        self.path = path
        self.at = 0

    def read(self) -> dict[str, Value]:
        if self.data[:4] != MAGIC:
            raise GGUFError(f"{self.path} is not a GGUF file")
        self.at = len(MAGIC)
        version = self._unpack("<I")
        if version not in (2, 3):
            raise GGUFError(f"{self.path}: GGUF version {version} is not supported (2 or 3)")
        self._unpack("<Q")  # tensor count: the tensors are never read
        count = self._unpack("<Q")
        found: dict[str, Value] = {}
        for _ in range(count):
            key = self._string()
            kind = self._unpack("<I")
            if kind == _ARRAY:
                self._skip_array()
            else:
                found[key] = self._value(kind)
        return found

    def _unpack(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise GGUFError(f"{self.path}: the header runs past the end of the file")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value

    def _value(self, kind: int) -> Value:
        if kind == _STRING:
            return self._string()
        fmt = _SCALARS.get(kind)
        if fmt is None:
            raise GGUFError(f"{self.path}: unknown GGUF value type {kind}")
        return self._unpack(fmt)

    def _string(self) -> str:
        size = self._unpack("<Q")
        end = self.at + size
        if end > len(self.data):
            raise GGUFError(f"{self.path}: the header runs past the end of the file")
        text = self.data[self.at : end].decode("utf-8", "replace")
        self.at = end
        return text

    def _skip_array(self) -> None:
        kind = self._unpack("<I")
        count = self._unpack("<Q")
        if kind == _STRING:  # each string says its own length: step over them one by one
            data, at, end = self.data, self.at, len(self.data)
            for _ in range(count):
                if at + 8 > end:
                    raise GGUFError(f"{self.path}: the header runs past the end of the file")
                at += 8 + struct.unpack_from("<Q", data, at)[0]
            self.at = at
        elif kind == _ARRAY:
            for _ in range(count):
                self._skip_array()
        elif kind in _SCALARS:
            self.at += count * struct.calcsize(_SCALARS[kind])
        else:
            raise GGUFError(f"{self.path}: unknown GGUF value type {kind}")
        if self.at > len(self.data):
            raise GGUFError(f"{self.path}: the header runs past the end of the file")
