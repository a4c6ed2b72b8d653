"""The C modules over adversarial input, for scripts/sanitize-c.sh (which builds them with
AddressSanitizer): every input sits in a buffer that ends where its memory does, so that a read
one byte past its end is reported (a bytes object has a NUL there, which would hide it)."""

from __future__ import annotations

import copy
import ctypes
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.leaderboard.votes.test_leaderboard_fast_paths import odd
from webui.leaderboard.simulate import simulate
from webui.leaderboard.votes import _rows, ingest


def exact(data: bytes) -> memoryview:
    buffer = (ctypes.c_char * max(len(data), 1)).from_buffer_copy(data or b"\0")
    return memoryview(buffer).cast("B")[: len(data)]


PARTS = [b'"model_name"', b":", b" ", b"\n", b'"', b"\\", b'\\"', b"x", b"\xc3\xa9", b"\\u00e9", b"\\u", b"0"]


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    simulate(folder, 120, seed=3, days=1)
    lines = [line for path in sorted(folder.glob("*-conv.json")) for line in path.read_bytes().splitlines()]
    rng = random.Random(1)
    names(lines, rng)
    rows(lines, rng)


def names(lines: list[bytes], rng: random.Random) -> None:
    data = b"\n".join(lines) + b"\n"
    short = b"\n".join(lines[:3]) + b'\n{"model_name": "x\\'
    # The name scan: a short log cut at every offset (from either end), windows of a long one, soups.
    for cut in range(len(short) + 1):
        for piece in (short[:cut], short[cut:]):
            assert _rows.model_names_in(exact(piece)) == ingest._python_model_names_in(piece)
    for _ in range(20_000):
        start = rng.randrange(len(data))
        piece = data[start : start + rng.randint(0, 3000)]
        assert _rows.model_names_in(exact(piece)) == ingest._python_model_names_in(piece)
    for _ in range(50_000):
        soup = b"".join(rng.choices(PARTS, k=rng.randint(0, 12)))
        assert _rows.model_names_in(exact(soup)) == ingest._python_model_names_in(soup), soup
    print("model_names_in: clean", flush=True)


def rows(lines: list[bytes], rng: random.Random) -> None:
    # A vote's row over odd records, and whole chunks (the row and the name scan) cut anywhere.
    records = [json.loads(line) for line in lines]
    odds = records + [odd(record, rng) for record in records for _ in range(6)]
    for record in odds:
        ingest._compiled_vote_values(copy.deepcopy(record))
    odd_data = b"\n".join(json.dumps(record).encode() for record in odds) + b"\n"
    for _ in range(300):
        start = rng.randrange(len(odd_data))
        ingest.derive(odd_data[start : start + rng.randint(0, 40_000)], start, rng.random() < 0.5, [], ("a",), "")
    for cut in range(len(lines[0]) + 1):
        ingest.derive(lines[0][:cut] + b"\n" + lines[1][cut:] + b"\n", 0, True, [], (), "")
    print("vote_values, derive: clean", flush=True)


if __name__ == "__main__":
    main()
