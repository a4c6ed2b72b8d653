"""Newton's method with step halving, for the strictly concave objectives of the board's fits:
Bradley-Terry (`bradley_terry.fit_bt`), style control (`style.fit_bt_style`) and the position term
(`position.position_term`).

Plain Newton can overshoot where one model wins (or loses) nearly everything, so each step is
halved until the objective does not fall (within 1e-12, its rounding) or the step is a millionth
of Newton's. Guarantee, which lets a caller keep work from `objective` for `derivatives`:
`derivatives` is only ever called at the point `objective` was evaluated at last. (The bootstrap's
batched fit, `bradley_terry.fit_bt_many`, runs the same steps as arrays over the rounds.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SLACK = 1e-12  # a step may lower the objective by this much: its rounding, not a real descent
SMALLEST_STEP = 1e-6


def maximise(
    objective: Callable[[np.ndarray], float],
    derivatives: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    start: np.ndarray,
    *,
    tol: float,
    max_iter: int = 100,
) -> np.ndarray:
    """The maximiser of `objective` from `start`; `derivatives(x)` is (gradient, Hessian) at x.
    Stops when a step moves no parameter by `tol` or more, or after `max_iter` steps."""
    x = start.copy()
    if not x.size:
        return x
    value = objective(x)
    for _ in range(max_iter):
        gradient, hessian = derivatives(x)
        step = np.linalg.solve(hessian, gradient)
        size = 1.0
        while True:
            candidate = x + size * step
            new = objective(candidate)
            if new >= value - SLACK or size < SMALLEST_STEP:
                break
            size /= 2
        x, value = candidate, new
        if np.max(np.abs(size * step)) < tol:
            break
    return x
