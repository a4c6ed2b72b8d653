"""Checks an installation before anyone visits it: the app imports, the models file parses, and
every model's files are on this machine (packaged GGUFs are assembled now, into the user's cache,
so the first start does not do it). Run by scripts/docker-setup.sh at image build; exits non-zero
with the reason when something is missing.

    python scripts/check_install.py [--models FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    from webui.config import DEFAULT_MODELS_FILE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS_FILE, help="models file to check")
    args = parser.parse_args(argv)

    import webui.server.app  # noqa: F401 - the whole app imports (gradio, fastapi, transformers, ...)
    from webui.errors import ConfigError
    from webui.models.sources import resolve_source
    from webui.models.specs import load_specs

    try:
        specs = load_specs(args.models)
        for spec in specs:
            if spec.backend == "openai":
                print(f"ok   {spec.name}: remote ({spec.base_url})")
                continue
            resolved = resolve_source(spec.source)
            size_mb = resolved.path.stat().st_size / 1e6 if resolved.path.is_file() else 0
            print(f"ok   {spec.name}: {resolved.path}" + (f" ({size_mb:.0f} MB)" if size_mb else ""))
    except ConfigError as exc:
        print(f"FAIL {exc}", file=sys.stderr)
        return 1
    print(f"install ok: {len(specs)} model(s) in {args.models}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
