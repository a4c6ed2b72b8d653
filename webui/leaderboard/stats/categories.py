"""Categories: the same leaderboard over a subset of the battles, as lmarena splits its board.

Each category is a yes/no question about a battle's prompt, answered from the battles table
alone (pure): its language (`webui.leaderboard.votes.language`), more than one turn, a long prompt,
a prompt with code, and the categories the operator declared (`--categories-file`: a boolean column
per category, `DECLARED_PREFIX` + its name, which webui.leaderboard.votes.declared adds; such a
category is named without the prefix). A battle can be in several categories; "all" holds every
counted battle.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from webui.db.columns import DECLARED_PREFIX
from webui.leaderboard.stats.battle_codes import Coded, encode

ALL = "all"
MULTI_TURN = "multi-turn"
LONG_PROMPT = "long prompt"
CODING = "coding"
LANGUAGE_PREFIX = "language: "
MIN_LANGUAGE_BATTLES = 1  # a language gets a category once it has this many counted battles


def category_masks(battles: pd.DataFrame) -> dict[str, pd.Series]:
    """Category name -> which battles are in it (a boolean Series on the battles' index).
    Languages are listed by their number of battles, largest first; "unknown" last."""
    if battles.empty:
        return {
            name: pd.Series(dtype=bool) for name in (ALL, MULTI_TURN, LONG_PROMPT, CODING, *declared_names(battles))
        }
    masks = {ALL: pd.Series(True, index=battles.index)}
    codes, names = pd.factorize(battles["language"].fillna("unknown"))
    languages = pd.Series(np.bincount(codes, minlength=len(names)), index=[str(n) for n in names])
    languages = languages.sort_values(ascending=False, kind="stable")
    known = [lang for lang in languages.index if lang != "unknown"] + (["unknown"] if "unknown" in languages else [])
    position = {name: i for i, name in enumerate(str(n) for n in names)}
    for lang in known:
        if languages[lang] >= MIN_LANGUAGE_BATTLES:
            masks[LANGUAGE_PREFIX + lang] = pd.Series(codes == position[lang], index=battles.index)
    masks[MULTI_TURN] = battles["turn"].astype(int) > 1
    # the flags were computed when the vote was read (webui.leaderboard.votes.features)
    masks[LONG_PROMPT], masks[CODING] = battles["long_prompt"].astype(bool), battles["coding"].astype(bool)
    for name in declared_names(battles):
        # a vote added since the columns were computed (the live tally's) has none: not in it yet
        masks[name] = battles[DECLARED_PREFIX + name].astype("boolean").fillna(False).astype(bool)
    return masks


def declared_names(battles: pd.DataFrame) -> list[str]:
    """The declared categories a battles table has columns for, in their order."""
    return [str(c)[len(DECLARED_PREFIX) :] for c in battles.columns if str(c).startswith(DECLARED_PREFIX)]


def category_counts(battles: pd.DataFrame, coded: Coded | None = None) -> pd.DataFrame:
    """Battles per category, and the number of models they involve. (`coded`: the battles, encoded.)"""
    rows = []
    coded = coded or encode(battles)
    for name, mask in category_masks(battles).items():
        chosen = mask.to_numpy(bool) if len(mask) else np.zeros(0, dtype=bool)
        played = np.bincount(coded.a[chosen], minlength=len(coded.models)) + np.bincount(
            coded.b[chosen], minlength=len(coded.models)
        )
        rows.append({"category": name, "battles": int(chosen.sum()), "models": int((played > 0).sum())})
    return pd.DataFrame(rows, columns=["category", "battles", "models"])
