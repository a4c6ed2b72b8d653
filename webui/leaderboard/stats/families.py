"""The best of many: when several rows of a board are variants of one family (a name prefix the
operator declares), the top one was picked as the best of k, and its lead is partly luck.

Were the k variants equally good, each rating would be the truth plus its own estimation noise,
and the best-looking one would look better than it is by the expected maximum of that noise:
E[max_i sigma_i Z_i], Z_i independent standard normals, sigma_i each row's standard error (its
95% interval's half-width / 1.96). That is the **expected optimism** at the board's current
interval widths (about 1.03 sigma for four variants of equal sigma): a lead smaller than it is
no evidence that the winner is better (two identical checkpoints once scored 17 points apart
with four models between them: Singh et al., "The Leaderboard Illusion", 2025).

A family is told of only while its leader is not resolved from the runner-up: their 95% intervals
overlap. A variant truly better by a margin the intervals resolve goes without the warning; the
test is strict on purpose (apart intervals mean a difference well past 95%), as the warning is the
cheap side to err on. Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from webui.leaderboard.stats.confidence import Z
from webui.leaderboard.stats.fingerprints import SEPARATOR

DRAWS = 20_000  # Monte Carlo draws for the expected maximum: within a fraction of a point


@dataclass(frozen=True)
class FamilyNote:
    family: str
    members: tuple[str, ...]  # the family's ranked rows, best first
    optimism: float  # expected optimism of the best of them, Elo points

    def text(self) -> str:
        best, k = self.members[0], len(self.members)
        return (
            f"{best} leads the {self.family} family as the best of {k} variants: were they equally good, the "
            f"best of {k} would look about {self.optimism:+.0f} points better than it is at these interval "
            f"widths. Confirm it against the runner-up ({self.members[1]}) with more battles between the two."
        )


def expected_optimism(sigmas: Sequence[float], draws: int = DRAWS, seed: int = 0) -> float:
    """E[max_i sigma_i Z_i] for independent standard normals Z_i."""
    sigma = np.asarray(sigmas, dtype=float)
    if len(sigma) < 2:
        return 0.0
    z = np.random.default_rng(seed).standard_normal((draws, len(sigma)))
    return float((z * sigma).max(axis=1).mean())


def family_notes(
    table: pd.DataFrame, prefixes: Sequence[str] = (), declared: Mapping[str, Collection[str]] | None = None
) -> list[FamilyNote]:
    """A note per family with two or more ranked rows on `table` whose leader's interval overlaps
    the runner-up's: each of `prefixes` (a name prefix), and each of `declared`
    (family -> its models' names, the models file's `family:`; a row rated per fingerprint,
    "name @ 1a2b3c", belongs to its name's family)."""
    ranked = table[~table["preliminary"].astype(bool)] if "preliminary" in table else table
    names = ranked["model"].astype(str)
    bases = names.str.split(SEPARATOR).str[0]
    chosen = {prefix: names.str.startswith(prefix) for prefix in prefixes}
    chosen |= {family: bases.isin(list(members)) for family, members in (declared or {}).items()}
    notes = []
    for family, mask in chosen.items():
        members = ranked[mask.to_numpy(bool)].sort_values("rating", ascending=False)
        if len(members) < 2:
            continue
        half = (members["upper"] - members["lower"]).to_numpy(float) / 2
        best, runner_up = members.iloc[0], members.iloc[1]
        if float(best["lower"]) > float(runner_up["upper"]):  # resolved: its lead is not luck
            continue
        sigmas = [h / Z for h in half if math.isfinite(h)]
        notes.append(FamilyNote(family, tuple(str(m) for m in members["model"]), expected_optimism(sigmas)))
    return notes


def family_prefixes(text: str) -> tuple[str, ...]:
    """The families of a comma-separated --families (each a name prefix)."""
    return tuple(p.strip() for p in text.split(",") if p.strip())
