"""One row per fingerprint: a model name that came to serve something else is rated apart.

Pure: a battles table in, the same table with the model names of split models rewritten. A name
whose votes carry more than one fingerprint (webui.models.fingerprint: new weights, another
quantisation, engine, template or system prompt) becomes one name per fingerprint,
`name @ 1a2b3c` (the shortest prefix, at least six characters, that tells its fingerprints
apart); its votes without one (older logs) stay under the plain name, as one group. A name with
one fingerprint, or only votes without, is left alone. The operator may merge a name's
fingerprints back into one row (`merge`). The board's table says which fingerprints each row
holds (`fingerprints_of`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd

SEPARATOR = " @ "
SHORT_CHARS = 6


def split_by_fingerprint(battles: pd.DataFrame, merge: Collection[str] = ()) -> pd.DataFrame:
    """`battles` with `model_a`/`model_b` of the names with several fingerprints rewritten (only
    those columns are copied); the names in `merge` are kept whole."""
    if "fingerprint_a" not in battles or battles.empty:
        return battles
    coded = _Coded(battles)
    split = {name: prints for name, prints in coded.prints_by_name().items() if len(prints) > 1 and name not in merge}
    if not split:
        return battles
    # one label per distinct (name, fingerprint) pair, looked up by the pair's key for every row
    keys = coded.keys()
    labels = np.array(
        [labelled(n, p, split[n]) if n in split else None for n, p in coded.pairs(keys)] + [None], dtype=object
    )
    found = np.searchsorted(keys, coded.row_keys())
    found[(coded.names < 0) | (coded.prints < 0)] = len(keys)  # no name or no fingerprint: as it is
    new = labels[found]
    whole = np.concatenate([battles["model_a"].to_numpy(object), battles["model_b"].to_numpy(object)])
    named = np.where(pd.isna(new), whole, new)
    out = battles.copy(deep=False)
    out["model_a"], out["model_b"] = named[: len(battles)], named[len(battles) :]
    return out


def labelled(name: str, fingerprint: str, siblings: Collection[str]) -> str:
    """`name @ prefix`, the prefix as short as tells `fingerprint` from its `siblings`."""
    for size in range(SHORT_CHARS, len(fingerprint) + 1):
        prefix = fingerprint[:size]
        if sum(other.startswith(prefix) for other in siblings) == 1:
            return f"{name}{SEPARATOR}{prefix}"
    return f"{name}{SEPARATOR}{fingerprint}"


def served_rows(table: pd.DataFrame, current: Mapping[str, str]) -> dict[str, str]:
    """Row name -> model name for the split rows of `table` (the board's: `model`, `fingerprint`)
    that hold what each model serves now (`current`: name -> fingerprint), so that whoever asks by
    the registry's names (smart pairing) reads the row of today's weights."""
    out = {}
    for row, prints in zip(table["model"], table["fingerprint"], strict=True):
        name, separator, _ = str(row).rpartition(SEPARATOR)
        if separator and current.get(name) in str(prints).split(", "):
            out[str(row)] = name
    return out


def fingerprints_of(battles: pd.DataFrame) -> pd.Series:
    """Per model (the index) of `battles`: its fingerprints, comma-separated in name order ("" for a
    model whose votes carry none)."""
    if "fingerprint_a" not in battles or battles.empty:
        return pd.Series(dtype=object, name="fingerprint")
    coded = _Coded(battles)
    found = coded.prints_by_name()
    models = [str(m) for m in coded.name_values]
    return pd.Series(
        [", ".join(found.get(m, [])) for m in models],
        index=pd.Index(models, name="model"),
        name="fingerprint",
        dtype=object,
    )


class _Coded:
    """Both sides' (name, fingerprint) of every battle as integer codes: a million battles have a
    few dozen distinct pairs, found without hashing a string per row twice."""

    def __init__(self, battles: pd.DataFrame) -> None:
        self.names, self.name_values = _both_sides(battles["model_a"], battles["model_b"])  # -1: no value
        self.prints, self.print_values = _both_sides(battles["fingerprint_a"], battles["fingerprint_b"])
        self._width = max(1, len(self.print_values))

    def row_keys(self) -> np.ndarray:
        return self.names.astype(np.int64) * self._width + self.prints

    def keys(self) -> np.ndarray:
        """The distinct keys of the rows that have both a name and a fingerprint, sorted."""
        both = (self.names >= 0) & (self.prints >= 0)
        return np.unique(self.row_keys()[both])

    def pairs(self, keys: np.ndarray) -> list[tuple[str, str]]:
        return [(str(self.name_values[k // self._width]), str(self.print_values[k % self._width])) for k in keys]

    def prints_by_name(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for name, print_id in self.pairs(self.keys()):
            found.setdefault(name, []).append(print_id)
        return {name: sorted(prints) for name, prints in found.items()}


def _both_sides(a: pd.Series, b: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(codes of `a` then `b`, -1 for none; their distinct values in order of first appearance):
    `pd.factorize` of the two joined, without an object per value (a million rows of text held
    as Arrow strings would each become a Python string, 60 MB a column)."""
    codes_a, values_a = pd.factorize(a)
    codes_b, values_b = pd.factorize(b)
    values = pd.Index(values_a).append(pd.Index(values_b)).unique()
    both = [
        np.append(values.get_indexer(found), -1)[codes] for found, codes in ((values_a, codes_a), (values_b, codes_b))
    ]
    return np.concatenate(both), values
