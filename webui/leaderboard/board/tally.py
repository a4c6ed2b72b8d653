"""The board carried forward vote by vote: what a new vote changes, kept as running aggregates, so
that adding votes costs as much as the new votes and the models, not the whole log.

A full build (`board.board_from_rows`) stays the truth. `Tally.of(board)` keeps from one what the
raw ratings need: the votes per outcome (model A, model B, score), the online Elo of every model,
the eligible votes per voter and UTC day (for the daily cap), the drop counts and the newest vote's
time. `Tally.add(rows)` sets the new rows' drop reasons by the same rules and gives the board with
them counted. Equal to a full build of the same rows (tests/unit/leaderboard/board/test_incremental_board.py):
- the drop counts (hygiene, named votes, the daily cap), the battle counts, wins, ties and losses,
  pair counts and win fractions;
- the Bradley-Terry ratings, their bootstrap intervals and the preliminary models' likelihood
  intervals, the ranks and the next comparisons: all of them are fitted on the outcome counts
  (`ratings.grouped_table`), whose size depends on the models only;
- the online Elo, carried on from the last vote.
Within half a rating point of a full build (the same tests; docs/leaderboard.md has the figures):
- the style-controlled ratings, their sandwich intervals, ranks, P(above next) and coefficients
  (`StyleTally`). The last full build's battles enter as the expansion of their log-likelihood
  around its fit, to third order, in sums whose size depends on the models and features; the
  battles since, at most a full build's interval of them, enter exactly. Features are
  standardised as a full build of the same rows would (running moments).
Kept from the last full build until the next one: the speeds (medians), the voter check (a voter
flagged then has new votes left out when asked; a new one is flagged only by a full build), the
ratings over time, the categories, and the row tables `battles` and `counted` (the rows since are
in `recent`). The live board (webui.leaderboard.board.live) runs a full build after enough added votes
or time, which brings all of these up to date.

`add` declines (None: build in full) what it cannot add exactly: a vote not newer than every vote
before it (its place in the time order changes the Elo and the cap), a model the last full
build had not counted, a fingerprint that had not served its model then (a new one splits the
model's row; a model already split needs its rows' labels), and votes that move the style fit so
far from the last full build's that the expansion no longer holds (`REACH`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from webui.leaderboard.board.build import NAMED, Board, BoardOptions, Rated
from webui.leaderboard.stats import battle_codes, ratings
from webui.leaderboard.stats.elo import elo_updates
from webui.leaderboard.stats.style import (
    StyleFit,
    battle_terms,
    counts_of,
    from_scale,
    gram_of_sums,
    ridge_terms,
    standardise,
    style_columns,
    style_differences,
)
from webui.leaderboard.stats.voters import utc_day_number
from webui.leaderboard.votes.rows import drop_reasons


@dataclass
class Tally:
    """The running aggregates of one board (see the module docstring)."""

    base: Board  # the last full build
    models: list[str]
    counts: np.ndarray  # votes per outcome key (battle_codes.Coded.keys)
    elo: list[float]
    newest: float  # the newest tstamp read, counted or not
    per_day: dict[tuple[str, int], int]  # eligible votes per (voter, UTC day), when a cap is set
    dropped: dict[str, int]
    votes_read: int
    added: int = 0  # votes read since the full build
    recent: list[pd.DataFrame] = field(default_factory=list)
    served: set[tuple[str, str]] = field(default_factory=set)  # (board row, fingerprint) pairs counted
    style: StyleTally | None = None  # None: the board has no style columns

    def __post_init__(self) -> None:
        battles = self.base.battles
        for side in ("a", "b"):
            if f"fingerprint_{side}" in battles:
                pairs = battles[[f"model_{side}", f"fingerprint_{side}"]].dropna().drop_duplicates()
                self.served.update(zip(pairs.iloc[:, 0], pairs.iloc[:, 1], strict=True))

    def _served_before(self, rows: pd.DataFrame) -> bool:
        """Whether every fingerprint in `rows` served its model in the last full build: a new one
        splits the model's row (or a split model's votes need their fingerprint's row)."""
        for side in ("a", "b"):
            if f"fingerprint_{side}" not in rows:
                continue
            pairs = rows[[f"model_{side}", f"fingerprint_{side}"]].dropna().drop_duplicates()
            if not set(zip(pairs.iloc[:, 0], pairs.iloc[:, 1], strict=True)) <= self.served:
                return False
        return True

    @property
    def options(self) -> BoardOptions:
        return self.base.options

    @classmethod
    def of(cls, board: Board) -> Tally:
        coded = battle_codes.encode(board.counted)
        size = 3 * len(coded.models) ** 2
        counts = np.bincount(coded.keys(), minlength=size) if len(coded.a) else np.zeros(size, np.int64)
        elo = board.table.set_index("model")["elo"].reindex(coded.models) if len(board.table) else pd.Series()
        battles = board.battles
        return cls(
            board,
            coded.models,
            counts.astype(np.int64),
            [float(v) for v in elo],
            float(battles["tstamp"].max()) if len(battles) else -np.inf,
            _per_day(battles, board.options),
            dict(board.dropped),
            board.votes_read,
            style=StyleTally.of(board, coded) if board.options.style else None,
        )

    def add(self, rows: pd.DataFrame) -> Board | None:
        """The board with `rows` (vote index rows newer than the last, in the index's order)
        added, this tally moved on to it; None (and the tally unchanged) when only a full build
        can add them."""
        if rows.empty:
            return self.board()
        if float(rows["tstamp"].min()) <= self.newest:
            return None
        options = self.options
        new = rows.assign(drop_reason=drop_reasons(rows, options.drop_stopped)).reset_index(drop=True)
        eligible = new["drop_reason"].isna().to_numpy(bool, copy=True)
        named = eligible & ~new["anony"].astype(bool).to_numpy(bool)
        if not options.include_named:
            eligible &= ~named
        counted_models = set(new.loc[eligible, "model_a"]) | set(new.loc[eligible, "model_b"])
        if not counted_models <= set(self.models) or not self._served_before(new[eligible]):
            return None
        per_day = self._cap(new, eligible)
        flagged = self.base.flagged_voters() if options.exclude_flagged else []
        if flagged:
            out = eligible & new["voter"].isin(flagged).to_numpy(bool)
            new.loc[out, "drop_reason"] = "flagged_voter"
            eligible &= ~out
        used = new[eligible]
        if self.style is not None and not used.empty and not self.style.add(*self._coded(used), _differences(used)):
            return None
        self._count(used)
        self.per_day.update(per_day)
        for reason, n in new["drop_reason"].value_counts().items():
            self.dropped[str(reason)] = self.dropped.get(str(reason), 0) + int(n)
        if not options.include_named:
            self.dropped[NAMED] = self.dropped.get(NAMED, 0) + int(named.sum())
        self.newest = float(new["tstamp"].max())
        self.votes_read += len(new)
        self.added += len(new)
        self.recent.append(new)
        return self.board()

    def _cap(self, new: pd.DataFrame, eligible: np.ndarray) -> dict[tuple[str, int], int]:
        """Marks the new eligible votes beyond their voter's daily cap (in `new`, and out of
        `eligible`); the changed per-day counts."""
        cap = self.options.votes_per_day
        changed: dict[tuple[str, int], int] = {}
        if cap <= 0:
            return changed
        days = utc_day_number(new["tstamp"].to_numpy(float))
        for i in np.flatnonzero(eligible & (new["voter"] != "").to_numpy(bool)):
            key = (str(new.at[i, "voter"]), int(days[i]))
            seen = changed.get(key, self.per_day.get(key, 0))
            changed[key] = seen + 1
            if seen >= cap:
                new.at[i, "drop_reason"] = "over_daily_cap"
                eligible[i] = False
        return changed

    def _count(self, used: pd.DataFrame) -> None:
        """The counted new votes into the outcome counts and the Elo (in time order)."""
        if used.empty:
            return
        a, b, score = self._coded(used)
        coded = battle_codes.Coded(self.models, a, b, score)
        self.counts += np.bincount(coded.keys(), minlength=len(self.counts))
        order = np.argsort(used["tstamp"].to_numpy(float), kind="stable")
        self.elo = elo_updates(self.elo, a[order], b[order], score[order])

    def _coded(self, used: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each vote's models' positions (A, B) and score."""
        position = {m: i for i, m in enumerate(self.models)}
        a = used["model_a"].map(position).to_numpy(np.int64)
        return a, used["model_b"].map(position).to_numpy(np.int64), battle_codes.scores(used)

    def board(self) -> Board:
        """The board as of the votes added so far."""
        base, options = self.base, self.options
        g = battle_codes.grouped_keys(self.counts, self.models)
        elo = pd.Series(self.elo, index=self.models, name="elo", dtype=float)
        table = ratings.grouped_table(g, elo, options.rounds, options.seed, options.min_battles)
        coefficients = base.rated.style_coefficients
        drop = [c for c in ratings.TABLE_COLUMNS if c != "model"]
        if self.style is not None:
            styled, coefficients = style_columns(
                self.style.fit() if options.rounds > 0 else StyleFit(self.models, self.style.fit().params),
                list(table.loc[~table["preliminary"].astype(bool), "model"]),
            )
            table = table.merge(styled, on="model", how="left")
            drop += [c for c in styled.columns if c != "model"]
        kept = base.table.drop(columns=drop)
        table = table.merge(kept, on="model", how="left")  # the speeds of the last full build
        order = list(table["model"])
        none = base.counted.iloc[0:0]
        rated = Rated(
            table,
            coefficients,
            battle_codes.win_fraction(none, order, g),
            battle_codes.pair_counts(none, order, g),
        )
        recent = pd.concat(self.recent, ignore_index=True) if self.recent else base.battles.iloc[0:0]
        return dataclasses.replace(
            base, rated=rated, votes_read=self.votes_read, dropped=dict(self.dropped), recent=recent
        )


def _per_day(battles: pd.DataFrame, options: BoardOptions) -> dict[tuple[str, int], int]:
    """Eligible votes per (voter, UTC day) before the cap, as `voters.over_daily_cap` counts them."""
    if options.votes_per_day <= 0 or battles.empty:
        return {}
    reason = battles["drop_reason"]
    pool = reason.isna() | reason.isin(["over_daily_cap", "flagged_voter"])
    if not options.include_named:
        pool &= battles["anony"].astype(bool) | reason.notna()
    pool &= battles["voter"] != ""
    chosen = battles[pool]
    days = utc_day_number(chosen["tstamp"].to_numpy(float))
    sizes = pd.Series(1, index=chosen.index).groupby([chosen["voter"].to_numpy(), days]).sum()
    return {(str(v), int(d)): int(n) for (v, d), n in sizes.items()}


def _differences(battles: pd.DataFrame) -> np.ndarray:
    """`style.style_differences` of the battles' style counts."""
    return style_differences(counts_of(battles))


# How far (log-odds) the earlier battles' logits may move from the full build's fit before its
# expansion stops holding the style columns within half a rating point (measured on simulated
# logs: docs/leaderboard.md): beyond, the tally declines and a full build follows.
REACH = 0.2


@dataclass
class StyleTally:
    """The style-controlled fit carried forward: the last full build's battles as the third-order
    expansion of their log-likelihood around its fit, the battles since exactly, and the features'
    running moments (for the standardisation a full build would use). See the module docstring.

    The expansion is over (theta, beta, c), c a constant added to every battle's logit: re-centring a
    feature shifts each earlier battle's logit by the same amount (the fit has no intercept that
    would absorb it), and re-scaling it multiplies its coefficient, so with c the earlier battles
    are expressed exactly in the current standardisation (`_restandardise`)."""

    models: list[str]
    start: np.ndarray  # the full build's theta, beta, and c = 0
    grad: np.ndarray  # its battles' log-likelihood gradient there, over (theta, beta, c)
    hess: np.ndarray  # their negative Hessian there (no ridge)
    meat: np.ndarray  # the sum of their score vectors' outer products there
    # How the Hessian moves with the parameters (first order). The meat's first-order change nearly
    # cancels (the residuals sum to zero at the fit) and its second-order one does not: moving it by
    # the first alone was measured farther from full builds than keeping it, so it is kept.
    hess_slope: _Slope
    mean: np.ndarray  # the full build's standardisation: each feature's mean ...
    spread: np.ndarray  # ... and standard deviation
    moments: np.ndarray  # rows: count, sum, sum of squares of each feature's differences, every battle
    met: np.ndarray  # (models, models): which two met in those battles
    spreads: np.ndarray  # their mean of x x^T, x the standardised features and 1
    params: np.ndarray  # the fit as of the last battles added, where the next one starts
    new: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)  # a, b, s, diff
    last: StyleFit | None = None  # the fit of every battle so far (None: not asked for yet)

    @classmethod
    def of(cls, board: Board, coded: battle_codes.Coded) -> StyleTally | None:
        """The expansion of `board`'s fit (read back from its table); None without style columns."""
        table = board.table.set_index("model")
        if board.counted.empty or "style_rating" not in table:
            return None
        n = len(coded.models)  # the tally's models, in its order
        theta = from_scale(table["style_rating"].reindex(coded.models).to_numpy(float))
        params = np.concatenate([theta, board.rated.style_coefficients.to_numpy(float)])
        diff = style_differences(counts_of(board.counted))
        columns = [diff[:, j].copy() for j in range(diff.shape[1])]  # contiguous: the full build's sums
        mean, spread = np.array([c.mean() for c in columns]), np.array([c.std() for c in columns])
        x = np.column_stack([standardise(diff, mean, spread), np.ones(len(diff))])
        start = np.append(params, 0.0)
        _, grad, hess, meat = battle_terms(start, coded.a, coded.b, coded.score, x, n, meat=True)
        assert meat is not None
        p = 1.0 / (1.0 + np.exp(-(theta[coded.a] - theta[coded.b] + x[:, :-1] @ params[n:])))
        hess_slope = _Slope.of(coded.a, coded.b, x, p * (1.0 - p) * (1.0 - 2.0 * p), n)  # d/dz of p(1 - p)
        met = np.zeros((n, n), bool)
        met[coded.a, coded.b] = met[coded.b, coded.a] = True
        spreads = x.T @ x / len(x)
        return cls(
            list(coded.models),
            start,
            grad,
            hess,
            meat,
            hess_slope,
            mean,
            spread,
            _moments(diff),
            met,
            spreads,
            params,
        )

    def add(self, a: np.ndarray, b: np.ndarray, score: np.ndarray, diff: np.ndarray) -> bool:
        """Counted battles (model positions, scores, `style_differences`) in, the fit moved on to
        them; False (and nothing changed) when that moves it beyond the expansion's `REACH`."""
        moments = self.moments + _moments(diff)
        self.new.append((a, b, score, diff))
        fit = self._fit(moments)
        if fit is None:
            self.new.pop()
            return False
        self.moments, self.params, self.last = moments, fit.params, fit
        return True

    def fit(self) -> StyleFit:
        """The fit of every battle so far."""
        if self.last is None:
            self.last = self._fit(self.moments)
            assert self.last is not None, "with no battle added the fit is the full build's own: within reach"
        return self.last

    def _fit(self, moments: np.ndarray, tol: float = 1e-9, max_iter: int = 50) -> StyleFit | None:
        """Newton's method on the expansion plus the new battles, the features standardised by
        `moments`; None when the earlier battles' logits would move beyond `REACH`."""
        n = len(self.models)
        count, total, squares = moments
        mean = total / count
        variance = squares / count - mean**2
        spread = np.where(variance > 1e-12, np.sqrt(np.clip(variance, 0.0, None)), 0.0)
        to_start = self._restandardise(mean, spread)
        a, b, s, diff = (np.concatenate(parts) for parts in zip(*self.new, strict=True)) if self.new else _none(mean)
        x = standardise(diff, mean, spread)

        def objective(params: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
            """The objective, its gradient and negative Hessian: the earlier battles' to third order."""
            shift = to_start @ params - self.start
            moved = self.hess + self.hess_slope.along(shift)
            old = float(
                self.grad @ shift
                - 0.5 * shift @ self.hess @ shift
                - (shift @ moved @ shift - shift @ self.hess @ shift) / 6.0
            )
            loglik, grad, hess, _ = battle_terms(params, a, b, s, x, n)
            penalty, ridge_grad, ridge_hess = ridge_terms(params, n)
            value = old + loglik + penalty
            old_grad = self.grad - 0.5 * (self.hess + moved) @ shift
            grad = to_start.T @ old_grad + grad + ridge_grad
            return value, grad, to_start.T @ moved @ to_start + hess + np.diag(ridge_hess)

        params = self.params
        value, grad, hess = objective(params)
        for _ in range(max_iter):
            step, size = np.linalg.solve(hess, grad), 1.0
            while True:  # halve a step that would lower the objective, as fit_bt_style does
                candidate = objective(params + size * step)
                if candidate[0] >= value - 1e-12 or size < 1e-6:
                    break
                size /= 2
            params = params + size * step
            value, grad, hess = candidate
            if np.max(np.abs(size * step)) < tol:
                break
        shift = to_start @ params - self.start
        if self._reach(shift) > REACH:
            return None
        _, _, _, meat = battle_terms(params, a, b, s, x, n, meat=True)
        assert meat is not None
        return StyleFit(self.models, params, hess, to_start.T @ self.meat @ to_start + meat)

    def _reach(self, shift: np.ndarray) -> float:
        """How far `shift` (over theta, beta, c) moves the earlier battles' logits: the largest
        change of a rating difference between two models that met, plus the root mean square of
        the features' part."""
        n = len(self.models)
        apart = np.abs(shift[:n, None] - shift[None, :n])[self.met]
        return float((apart.max() if len(apart) else 0.0) + np.sqrt(shift[n:] @ self.spreads @ shift[n:]))

    def _restandardise(self, mean: np.ndarray, spread: np.ndarray) -> np.ndarray:
        """The matrix taking (theta, beta) with the features standardised by `mean` and `spread` to
        the full build's (theta, beta, c) that give every earlier battle the same logit."""
        n, k = len(self.models), len(mean)
        safe = np.where(spread > 0, spread, 1.0)
        out = np.zeros((n + k + 1, n + k))
        out[:n, :n] = np.eye(n)
        out[n : n + k, n:] = np.diag(np.where(spread > 0, self.spread / safe, 0.0))
        out[n + k, n:] = np.where(spread > 0, (self.mean - mean) / safe, 0.0)
        return out


def _moments(diff: np.ndarray) -> np.ndarray:
    """Rows: the count, the sum and the sum of squares of each feature's differences."""
    return np.vstack([np.full(diff.shape[1], float(len(diff))), diff.sum(axis=0), (diff**2).sum(axis=0)])


def _none(mean: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """No battles: (a, b, score, diff) of length 0."""
    return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros((0, len(mean)))


@dataclass(frozen=True)
class _Slope:
    """sum_i c_i (u_i . d) u_i u_i^T for any d, u_i = (e_a - e_b, x_i) a battle's design row: with
    c the derivative of a battle's weight in its logit, how the weighted Gram matrix (`style._gram`)
    moves when the parameters move by d. Kept as sums per (a, b) pair of c, c x and c x x^T, and
    the sum of c x x x over all battles: the size depends on the models and features only."""

    n_models: int
    per_pair: np.ndarray  # (pairs,)
    per_pair_x: np.ndarray  # (pairs, k)
    per_pair_xx: np.ndarray  # (pairs, k, k)
    xxx: np.ndarray  # (k, k, k)

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, x: np.ndarray, c: np.ndarray, n_models: int) -> _Slope:
        pair, cells, k = a * n_models + b, n_models * n_models, x.shape[1]
        weighted = x * c[:, None]
        per_pair_x = np.column_stack([np.bincount(pair, weighted[:, j], cells) for j in range(k)])
        per_pair_xx = np.stack(
            [np.column_stack([np.bincount(pair, weighted[:, j] * x[:, m], cells) for m in range(k)]) for j in range(k)],
            axis=1,
        )
        xxx = np.stack([(weighted * x[:, [j]]).T @ x for j in range(k)])
        return cls(n_models, np.bincount(pair, c, cells), per_pair_x, per_pair_xx, xxx)

    def along(self, d: np.ndarray) -> np.ndarray:
        n = self.n_models
        theta, gamma = d[:n], d[n:]
        apart = (theta[:, None] - theta[None, :]).ravel()  # d's part of each pair's logits, a * n + b
        return gram_of_sums(
            apart * self.per_pair + self.per_pair_x @ gamma,
            apart[:, None] * self.per_pair_x + self.per_pair_xx @ gamma,
            np.tensordot(apart, self.per_pair_xx, axes=1) + self.xxx @ gamma,
            n,
        )
