"""Models: each role resolves to a readable GGUF file, or a remote endpoint that answers and
serves its model; the embed model matches the index's vectors."""

from __future__ import annotations

import shlex
from pathlib import Path

import qmd
from qmd import harness

from .context import Context, home_path, qmd_command
from .results import CheckResult, Clock, fail, ok, warn

SKIPPED = {"rerank": "query skips reranking", "generate": "query skips expansion; typed lex:/vec: queries still work"}


def _gguf(path: Path) -> str | None:
    """None when `path` is a readable GGUF file, else why not."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except IsADirectoryError:
        return "is a folder, not a model file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None if magic == b"GGUF" else f"is not a GGUF file (starts with {magic!r})"


def _replace_fix(index: str, m: qmd.ModelStatus, path: Path) -> str:
    """How to put a real model file where a broken one is, naming that file.

    A download (an `hf:` spec) is fetched again once the bad file is out of the way; any
    other file is the user's own: convert the model folder into it again, or point the
    role at another GGUF file.
    """
    quoted = shlex.quote(str(path))
    if m.spec.startswith("hf:"):
        return f"rm {quoted} && {qmd_command('pull', index=index)}  # downloads {m.spec} again"
    return f"replace {quoted} with a GGUF file: {qmd_command('models', 'import', 'MODEL_FOLDER', '--out', str(path), index=index)} (or point the {m.role} model at another .gguf)"


def _remote(ctx: Context, index: str, m: qmd.ModelStatus) -> CheckResult:
    """An `openai:` role: the endpoint answers, serves the model, and (embed) gives vectors
    of the length the index's vectors for it have."""
    name = f"{m.role} model"
    with Clock() as c:
        store = ctx.store(index)
        try:
            found = store.probe_model(m.role)
        except qmd.QmdError as exc:  # a malformed URI or option
            return fail(name, exc.message, exc.cli_hint, ms=c.ms)
        finally:
            store.close()
    detail = f"{found.uri} ({m.source}): {found.detail}"
    if found.status == "fail":
        return fail(name, detail, found.hint, ms=c.ms)
    if found.status == "warn":
        return warn(name, detail, found.hint, ms=c.ms)
    return ok(name, detail, ms=c.ms)


def _role(index: str, m: qmd.ModelStatus) -> CheckResult:
    name = f"{m.role} model"
    with Clock() as c:
        where = f"{m.spec} ({m.source})"
        path = Path(m.path)
        if not path.exists() and not path.is_symlink():
            if m.role == "embed":
                return warn(name, f"{where} is not a local file: vector search and query's vector half are skipped", qmd_command("pull", index=index), ms=c.ms)
            if m.source == "default" or m.spec == harness.BUILTIN_MODELS.get(m.role):
                # the built-in URI named in a config (as `qmd init` writes it) is the default
                return ok(name, f"not downloaded ({SKIPPED[m.role]}); `qmd pull` fetches {m.spec}", ms=c.ms)
            return fail(name, f"{where} is configured but {home_path(path)} does not exist", qmd_command("models", "list", index=index), ms=c.ms)
        problem = _gguf(path)
        if problem:
            return fail(name, f"{home_path(path)} {problem}", _replace_fix(index, m, path), ms=c.ms)
        size = path.stat().st_size / 1e6
        return ok(name, f"{home_path(path)} ({size:.0f} MB, {m.source})", ms=c.ms)


def _vectors(ctx: Context, index: str) -> CheckResult | None:
    """The embed model's fingerprint against the vectors the index holds."""
    name = f"vectors [{index}]"
    with Clock() as c:
        store = ctx.store(index)
        try:
            found = store.check(quick=True)
            if not found.exists or found.corrupted or found.pending_migrations:
                return None  # the index checks say why
            vs = store.vector_status()
        except qmd.IndexAccessError:
            return None  # the index checks say which file refuses this user
        except qmd.QmdError as exc:
            return warn(name, f"cannot read the vector state: {exc.message}", exc.cli_hint, ms=c.ms)
        finally:
            store.close()
        if vs.fingerprint is None:
            return None
        others = [(fp, model, n) for fp, model, n in found.vector_models if fp != vs.fingerprint and n]
        if vs.pending_documents and others:
            fp, model, n = others[-1]
            return warn(
                name,
                f"the index's vectors come from another model or settings ({model}, {n} documents); "
                f"{vs.pending_documents} documents need re-embedding with {vs.model}",
                qmd_command("embed", index=index), ms=c.ms,
            )
        if vs.pending_documents:
            return warn(name, f"{vs.pending_documents} of {found.documents} documents need embedding ({vs.model})", qmd_command("embed", index=index), ms=c.ms)
        return ok(name, f"{vs.embedded_documents} documents embedded, {vs.chunks} chunks ({vs.model})", ms=c.ms)


def check(ctx: Context) -> list[CheckResult]:
    results: list[CheckResult] = []
    seen: set[tuple[str, str]] = set()
    for index in ctx.indexes:
        try:  # opening reads the config: a broken one fails this index's row, not the whole group
            store = ctx.store(index)
        except qmd.QmdError as exc:
            results.append(fail(f"models [{index}]", exc.message, exc.cli_hint))
            continue
        try:
            statuses = store.models()
        except qmd.QmdError as exc:
            results.append(fail(f"models [{index}]", exc.message, exc.cli_hint))
            continue
        finally:
            store.close()
        for m in statuses:
            if (m.role, m.path) in seen:
                continue
            seen.add((m.role, m.path))
            results.append(_remote(ctx, index, m) if m.spec.startswith("openai:") else _role(index, m))
        vectors = _vectors(ctx, index)
        if vectors:
            results.append(vectors)
    return results
