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

import pandas as pd

SEPARATOR = " @ "
SHORT_CHARS = 6


def split_by_fingerprint(battles: pd.DataFrame, merge: Collection[str] = ()) -> pd.DataFrame:
    """`battles` with `model_a`/`model_b` of the names with several fingerprints rewritten (only
    those columns are copied); the names in `merge` are kept whole."""
    if "fingerprint_a" not in battles or battles.empty:
        return battles
    seen = _name_prints(battles)
    split = {name: prints for name, prints in seen.items() if len(prints) > 1 and name not in merge}
    if not split:
        return battles
    out = battles.copy(deep=False)
    for side in ("a", "b"):
        names, prints = battles[f"model_{side}"], battles[f"fingerprint_{side}"]
        chosen = names.isin(list(split)) & prints.notna()
        labels = [labelled(n, p, split[n]) for n, p in zip(names[chosen], prints[chosen], strict=True)]
        column = names.astype(object).copy()
        column[chosen] = labels
        out[f"model_{side}"] = column
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
    pairs = _pairs(battles)
    models = pd.Index(pd.unique(pairs["model"]), name="model")
    found = pairs.dropna().drop_duplicates().sort_values("fingerprint").groupby("model")["fingerprint"]
    return found.agg(", ".join).reindex(models, fill_value="").rename("fingerprint")


def _pairs(battles: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([pd.DataFrame({"model": battles[f"model_{s}"].to_numpy(object),
                                    "fingerprint": battles[f"fingerprint_{s}"].to_numpy(object)})
                      for s in ("a", "b")], ignore_index=True)


def _name_prints(battles: pd.DataFrame) -> dict[str, list[str]]:
    pairs = _pairs(battles).dropna().drop_duplicates()
    return {str(name): sorted(group) for name, group in pairs.groupby("model")["fingerprint"]}
