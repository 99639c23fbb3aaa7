"""Update then embed, as one step: what the updater runs for a commit and `qmd update --embed` runs by hand.

The update re-indexes the collections; the embed then runs for those of them that updated
cleanly (no error) and are embeddable (not `embed: false`). The policy for a setup without
vectors lives here: an index with no embedding model at all (none configured, the built-in
default never downloaded) skips the embed and says why (`embed_skipped`), while a configured
model that is missing or broken is an error of the embed (`embed_error`). An update that
raises raises (nothing was embedded); an embed that raises is kept in the report beside the
update's, which is never lost.
"""

from __future__ import annotations

from collections.abc import Callable

from qmd.core.records import field, record
from qmd.core.results import UpdateReport

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.index.embed_progress import OnEmbedProgress
    from qmd.index.embedding import EmbedReport
    from qmd.store.models import Models


@record
class RefreshReport:
    """What `Store.refresh` did: the update's report, then the embed's (or why it did not run)."""

    update: UpdateReport
    embedded: list[str] = field(default_factory=list)  # the collections the embed ran for
    embed: EmbedReport | None = None  # None: no embed ran (nothing to embed, skipped, or it failed)
    embed_skipped: str | None = None  # why embedding was skipped: the index has no embedding model at all
    embed_error: Exception | None = None  # the embed failed (a QmdError, or a bug): the update still stands

    @property
    def failed_collections(self) -> list[str]:
        """Collections the update could not index (see `UpdateReport.errors`)."""
        return [name for name, _, _ in self.update.errors]


def embed_updated(
    models: Models, collections: list[str] | None, update: UpdateReport, progress: OnEmbedProgress | None, on_wait: Callable[[], None] | None, wait: float | None,
) -> RefreshReport:
    """The second half of `Store.refresh`: embed what `update` indexed cleanly of `collections` (all when None)."""
    report = RefreshReport(update)
    broken = set(report.failed_collections)
    updated = [name for name in (collections if collections is not None else list(models.state.collections())) if name not in broken]
    embeddable, _ = models.state.embeddable(updated) if updated else ([], [])
    if not embeddable:
        return report
    report.embed_skipped = models.unconfigured_embedding()
    if report.embed_skipped is not None:
        return report
    report.embedded = embeddable
    try:
        report.embed = models.embed(False, embeddable, progress, on_wait, wait, update=update)
    except Exception as exc:  # the caller says how: the CLI raises it, the updater records the embed step
        report.embed_error = exc
    return report
