"""What a running embed says as it goes.

An embed runs in three phases: `loading` (the model), `chunking` (every document it embeds
is cut into chunks first, so the work ahead is known in chunks and tokens), `embedding` (the
chunks through the model, written in batches). At each step the `progress` callback of
`Store.embed` / `Store.refresh` gets an `EmbedProgress`: the phase, the plan per collection
(`CollectionPlan`), the counts so far and, once enough work is done to say, the time left.
The work is counted in tokens (a chunk's cost grows with its length; a count of documents or
chunks drifts on notes of mixed sizes); counts are shown in chunks and tokens.

`ProgressLines` turns those into whole lines at a sane rate for a log or a pipe; the CLI
draws a bar on a terminal instead, and `qmd status` shows the running phase and counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from qmd.core.pace import Eta, progress_interval
from qmd.core.records import record, replace
from qmd.core.units import duration, human_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CollectionPlan", "EmbedProgress", "OnEmbedProgress", "ProgressLines", "Tracker"]


def _n(count: int, word: str) -> str:
    """`1 document`, `12 documents`."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def short_count(n: int, scale: int | None = None) -> str:
    """`950`, `12,480`, `512k`, `1.2M`: a large count at a glance, in the unit `scale` calls for
    (`short_count(7_000, 423_000)` is `7k`, as `423k` beside it); a count still under a million
    beside millions keeps its own unit (`48k`/`7.6M`, not `0.0M`/`7.6M`, which stands still)."""
    scale = n if scale is None else scale
    if scale < 100_000:
        return f"{n:,}"
    if scale < 1_000_000 or n < 1_000_000:
        return f"{n // 1000}k" if n >= 1000 else f"{n:,}"
    return f"{n / 1_000_000:.1f}M"


@record(frozen=True)
class CollectionPlan:
    """What an embed is about to do in one collection.

    `documents`: its documents this run embeds; `embedded`: its documents that had vectors
    already (0: the collection was never embedded); `new` / `changed`: its documents the
    update just before added / changed (`qmd update --embed`, the updater; 0 for a plain
    embed); `forced`: `embed -f` drops vectors and embeds again; `stale`: its documents with
    vectors of this model cut otherwise (another qmd's chunk settings, another build of the
    file), which this run replaces.
    """

    name: str
    documents: int
    embedded: int = 0
    new: int = 0
    changed: int = 0
    forced: bool = False
    stale: int = 0

    def describe(self) -> str:
        """`embedding 12 documents of gitnotes that were never embedded`, `re-embedding 3 changed documents of notes`."""
        n, name = self.documents, self.name
        word = "document" if n == 1 else "documents"
        if self.embedded == 0 and self.stale:
            return f"re-embedding {n} {word} of {name}: the vectors they have were cut with other chunk settings or another build of the model"
        if self.embedded == 0:
            return f"embedding {n} {word} of {name} that {'was' if n == 1 else 'were'} never embedded"
        if self.forced:
            return f"re-embedding {n} {word} of {name}"
        changed = min(self.changed, n)
        new = min(self.new, n - changed)
        other = n - changed - new
        kinds = [(count, what) for count, what in ((new, "new"), (changed, "changed"), (other, "not yet embedded")) if count]
        if len(kinds) > 1:
            return f"embedding {n} {word} of {name}: " + ", ".join(f"{count} {what}" for count, what in kinds)
        if changed:
            return f"re-embedding {n} changed {word} of {name}"
        if new:
            return f"embedding {n} new {word} of {name}"
        return f"embedding {n} {word} of {name} not yet embedded"


@record(frozen=True)
class EmbedProgress:
    """Where a running embed is (see the module docstring); each phrase starts in lower case.

    `documents`: documents (distinct contents) this run embeds; `documents_done`: chunked
    (chunking) or written with their vectors (embedding). `chunks` / `tokens`: the work of the
    embedding phase, known once chunking is done (0 before); `chunks_done` / `tokens_done`:
    embedded so far. `elapsed_s`: since the run began; `phase_s`: since this phase began.
    `eta_s`: seconds left, None until enough work is done to estimate it (qmd.core.pace.Eta).
    `model_bytes`: the model file's size (None: a model served remotely, nothing to load).
    """

    phase: str  # loading | chunking | embedding
    model: str
    model_bytes: int | None
    plan: tuple[CollectionPlan, ...]
    documents: int
    documents_done: int = 0
    chunks: int = 0
    chunks_done: int = 0
    tokens: int = 0
    tokens_done: int = 0
    elapsed_s: float = 0.0
    phase_s: float = 0.0
    eta_s: float | None = None

    @property
    def share(self) -> float | None:
        """The part of this phase's work done, 0..1 (documents when chunking, tokens when embedding); None while loading."""
        if self.phase == "chunking":
            return self.documents_done / self.documents if self.documents else 1.0
        if self.phase == "embedding":
            return self.tokens_done / self.tokens if self.tokens else 1.0
        return None

    @property
    def finished(self) -> bool:
        """This phase's last count: every document chunked, or every chunk embedded."""
        if self.phase == "chunking":
            return self.documents_done >= self.documents
        return self.phase == "embedding" and self.chunks_done >= self.chunks

    def headline(self) -> str:
        """The phase's first line: `loading embedding model X (313.4 MB)…`, `chunking 249 documents…`,
        `embedding 1,204 chunks (512k tokens) of 249 documents`."""
        if self.phase == "loading":
            if self.model_bytes is None:
                return f"embedding model {self.model} is served remotely: nothing to load…"
            return f"loading embedding model {self.model} ({human_size(self.model_bytes)})…"
        if self.phase == "chunking":
            return f"chunking {_n(self.documents, 'document')}…"
        return f"embedding {_n(self.chunks, 'chunk')} ({short_count(self.tokens)} tokens) of {_n(self.documents, 'document')}"

    def _percent(self) -> str:
        share = self.share
        return f"{int(100 * share)}%" if share is not None else ""

    def counts(self) -> str:
        """This phase's counts: `480/1204 chunks, 245k/512k tokens (48%), 2.1 chunks/s, 3m 50s elapsed, ETA 5m 40s`."""
        elapsed = f"{duration(self.elapsed_s)} elapsed"
        if self.phase == "chunking":
            return f"{self.documents_done}/{self.documents} documents ({self._percent()}), {elapsed}"
        if self.phase != "embedding":
            return elapsed
        rate = self.chunks_done / self.phase_s if self.phase_s > 0 else 0.0
        eta = f", ETA {duration(self.eta_s)}" if self.eta_s is not None and not self.finished else ""
        return (
            f"{self.chunks_done}/{self.chunks} chunks, {short_count(self.tokens_done, self.tokens)}/{short_count(self.tokens)} tokens ({self._percent()}), "
            f"{rate:.1f} chunks/s, {elapsed}{eta}"
        )

    def line(self) -> str:
        """A progress line: `embedding: 480/1204 chunks, 245k/512k tokens (48%), 2.1 chunks/s, 3m 50s elapsed, ETA 5m 40s`."""
        return f"{self.phase}: {self.counts()}"

    def status(self) -> str:
        """The short form `qmd status` shows: `embedding 480/1204 chunks, 245k/512k tokens (48%), ETA 5m 40s`."""
        if self.phase == "chunking":
            return f"chunking {self.documents_done}/{self.documents} documents"
        if self.phase != "embedding":
            return self.headline().rstrip("…")
        eta = f", ETA {duration(self.eta_s)}" if self.eta_s is not None else ""
        return f"embedding {self.chunks_done}/{self.chunks} chunks, {short_count(self.tokens_done, self.tokens)}/{short_count(self.tokens)} tokens ({self._percent()}){eta}"


OnEmbedProgress = Callable[[EmbedProgress], None]


class ProgressLines:
    """An embed's `progress` callback that says it in whole lines (no carriage returns) through `write`.

    The plan (one line per collection) and each phase's headline are written at once; then a
    progress line at most every `every_s` seconds (default `QMD_PROGRESS_S`, else 10), and a
    phase's last count always. For a log file, a pipe, CI, a service's journal.
    """

    def __init__(self, write: Callable[[str], None], every_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.write = write
        self.every_s = progress_interval() if every_s is None else every_s
        self.clock = clock
        self.phase: str | None = None
        self._last = 0.0
        self._said_last = False  # this phase's last count is written (once)

    def __call__(self, progress: EmbedProgress) -> None:
        now = self.clock()
        if progress.phase != self.phase:
            if self.phase is None:
                for collection in progress.plan:
                    self.write(collection.describe())
            self.phase, self._last, self._said_last = progress.phase, now, False
            self.write(progress.headline())
            if not progress.finished:
                return
        elif self._said_last or (not progress.finished and now - self._last < self.every_s):
            return
        if progress.phase != "loading":
            self._last, self._said_last = now, progress.finished
            self.write(progress.line())


class Tracker:
    """One embed run's counts, told to `progress` as an `EmbedProgress` at every step."""

    CHUNKED_EVERY_S = 0.1  # cutting a document takes milliseconds: not one call per document

    def __init__(
        self, progress: OnEmbedProgress | None, model: str, model_bytes: int | None, plan: list[CollectionPlan], documents: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.progress = progress
        self.clock = clock
        self.started = self.phase_started = clock()
        self.state = EmbedProgress("loading", model, model_bytes, tuple(plan), documents)
        self._eta: Eta | None = None
        self._chunked_told = self.started

    def _tell(self, **changes: Any) -> None:
        now = self.clock()
        self.state = replace(self.state, elapsed_s=now - self.started, phase_s=now - self.phase_started, **changes)
        if self.progress is not None:
            self.progress(self.state)

    def _phase(self, phase: str, **changes: Any) -> None:
        self.phase_started = self.clock()
        self._tell(phase=phase, **changes)

    def loading(self) -> None:
        self._phase("loading")

    def chunking(self) -> None:
        self._phase("chunking", documents_done=0)

    def chunked(self, documents: int) -> None:
        """`documents` are cut so far (told at most every CHUNKED_EVERY_S seconds, and the last)."""
        now = self.clock()
        if documents >= self.state.documents or now - self._chunked_told >= self.CHUNKED_EVERY_S:
            self._chunked_told = now
            self._tell(documents_done=documents)

    def embedding(self, documents: int, chunks: int, tokens: int) -> None:
        """The work ahead, now that every document is cut: `documents` to embed, their chunks and tokens."""
        self._eta = Eta(tokens, self.clock())
        self._phase("embedding", documents=documents, documents_done=0, chunks=chunks, tokens=tokens)

    def embedded(self, chunks: int, tokens: int) -> None:
        """`chunks` more chunks (of `tokens` tokens) went through the model."""
        done = self.state.tokens_done + tokens
        eta = self._eta.update(done, self.clock()) if self._eta is not None else None
        self._tell(chunks_done=self.state.chunks_done + chunks, tokens_done=done, eta_s=eta)

    def written(self, documents: int) -> None:
        """`documents` more documents' vectors were written."""
        self._tell(documents_done=self.state.documents_done + documents)

    def dropped(self, chunks: int, tokens: int) -> None:
        """A document's content went (a cleanup between two batches): its work is no longer ahead."""
        self.state = replace(self.state, documents=self.state.documents - 1, chunks=self.state.chunks - chunks, tokens=self.state.tokens - tokens)
