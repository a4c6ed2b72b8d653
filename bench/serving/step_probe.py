"""Where a decode step's time goes: the cost of one small CUDA kernel launch, and one forward pass
of one token with a KV cache for each model folder given, timed with synchronisation.

    python -m bench.serving.step_probe FOLDER [FOLDER ...]
"""

from __future__ import annotations

import sys
import time


def launch_us(n: int = 5000) -> float:
    import torch

    x = torch.zeros(16, device="cuda")
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def decode_step_s(folder: str, steps: int = 30) -> list[float]:
    """Sorted times of `steps` one-token forward passes after a 63-token prompt."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16, device_map="cuda").eval()
    ids = torch.randint(100, 40000, (1, 63), device="cuda")
    times = []
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True)
        past, token = out.past_key_values, ids[:, -1:]
        for _ in range(steps):
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = model(input_ids=token, past_key_values=past, use_cache=True, logits_to_keep=1)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
            past = out.past_key_values
    del model
    torch.cuda.empty_cache()
    return sorted(times)


def main(argv: list[str]) -> int:
    print(f"small kernel launch: {launch_us():.1f} us each (5000 in a row)", flush=True)
    for folder in argv:
        times = decode_step_s(folder)
        print(
            f"{folder}: one-token forward with cache: median {times[len(times) // 2] * 1e3:.1f} ms, "
            f"min {times[0] * 1e3:.1f} ms ({len(times)} steps)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
