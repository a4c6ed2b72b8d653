import numpy as np

def elo_updates(
    rating: list[float], a: np.ndarray, b: np.ndarray, score: np.ndarray, k: float, scale: float, base: float, /
) -> list[float]: ...
