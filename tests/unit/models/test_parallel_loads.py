"""Two loader threads never build models with transformers at the same time.

With the registry's parallel loads (`--load-parallel 2`), the two demo models loaded at once came
out with garbage weights in most runs (SmolLM2 answered "ickness Mama KerNNVal" instead of "The
capital of France is Paris."): building a model goes through process-wide state in transformers.
The real race needs the demo models and luck; here each build is slowed down so that two
unserialised builds would overlap for certain, and the test counts how many ran at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import torch

from tests.tiny import build_tiny_model
from webui.models.loading import load_weights
from webui.models.specs import parse_specs


def test_two_threads_build_one_model_at_a_time(tmp_path: Path, monkeypatch) -> None:
    import transformers

    folders = [build_tiny_model(tmp_path / f"m{i}", seed=i) for i in range(2)]
    specs = parse_specs({"models": [{"name": f"m{i}", "source": str(f)} for i, f in enumerate(folders)]})
    original = transformers.AutoModelForCausalLM.from_pretrained
    running, most = [0], [0]
    count = threading.Lock()

    def slow_build(*args, **kwargs):
        with count:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.5)
            return original(*args, **kwargs)
        finally:
            with count:
                running[0] -= 1

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", slow_build)
    loaded: dict[str, object] = {}
    threads = [
        threading.Thread(target=lambda s=s: loaded.__setitem__(s.name, load_weights(s, tmp_path / "cache")))
        for s in specs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert set(loaded) == {"m0", "m1"}, "both models loaded"
    assert most[0] == 1, "two models were built at the same time"
    ids = torch.tensor([[2, 8, 9, 10]])
    for spec, folder in zip(specs, folders, strict=True):  # and each is its own model, as built alone
        alone = original(folder).eval()
        with torch.no_grad():
            assert torch.allclose(loaded[spec.name].model(ids).logits, alone(ids).logits)  # type: ignore[attr-defined]
