"""The simulated judge that errs partly apart from the voter (`judged_outcome`): what its p means."""

from __future__ import annotations

import numpy as np
import pytest

from webui.judge.records import ORDERS, WINNER_OF
from webui.judge.simulate import judged_outcome, judgment

OUTCOMES = ("model_a", "model_b", "tie")
PEOPLE = np.array([0.45, 0.40, 0.15])  # a person's vote on the pair: A, B, tie


def test_a_judge_that_shares_every_error_judges_the_vote_and_draws_nothing_more() -> None:
    """shared = 1 is today's judge: the person's vote, and the random stream untouched (the
    judge's marks, and so every figure measured with it, stay what they were)."""
    rng, twin = np.random.default_rng(5), np.random.default_rng(5)
    assert judged_outcome(rng, "tie", 1.0, lambda: "model_a") == "tie"
    assert rng.random() == twin.random()
    assert judged_outcome(rng, "tie", 0.0, lambda: "model_a") == "model_a"
    with pytest.raises(ValueError, match="shared"):
        judged_outcome(rng, "tie", 1.5, lambda: "model_a")


@pytest.mark.parametrize("shared", [1.0, 0.5, 0.0])
def test_its_agreement_with_the_voter_is_the_documented_mix(shared: float) -> None:
    """Agreement with the person who voted: rho p + (1 - rho) (c p + (1 - c) (1 - p) / 2), c the
    chance that two people's votes on the pair agree (the module's docstring), over 40,000 orders."""
    rng, p, n = np.random.default_rng(11), 0.7, 20_000
    agreed = 0
    for _ in range(n):
        human = OUTCOMES[rng.choice(3, p=PEOPLE)]
        seen = judged_outcome(rng, human, shared, lambda: OUTCOMES[rng.choice(3, p=PEOPLE)])
        for order in ORDERS:
            agreed += WINNER_OF[order][judgment(rng, seen, order, p, 0.0)] == human
    c = float(PEOPLE @ PEOPLE)
    expected = shared * p + (1 - shared) * (c * p + (1 - c) * (1 - p) / 2)
    assert agreed / (2 * n) == pytest.approx(expected, abs=0.01)
