"""Incremental update, soft deletes, shared content, front matter, titles, CJK, collections."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import pytest

import qmd
import qmd.index.indexer
from qmd.backends.sql import scalar


def _touch_later(path: Path, seconds: int = 10) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every file the indexer reads (a spy around the real reader)."""
    reads: list[str] = []
    real = qmd.index.indexer.read_text

    def spy(path: str, size_hint: int, root: str | None = None):  # type: ignore[no-untyped-def]
        reads.append(path)
        return real(path, size_hint, root)

    monkeypatch.setattr(qmd.index.indexer, "read_text", spy)
    return reads


def test_first_index_reports_new_files(store: qmd.Store, notes: Path) -> None:
    report = store.add_collection(notes, name="notes")
    assert report is not None
    assert report.totals == {"new": 4, "updated": 0, "unchanged": 0, "removed": 0, "skipped": 0, "warnings": 0}
    assert sorted(e.path for e in store.ls("notes")) == ["ideas.md", "meetings/2024-03-01.md", "runbooks/deploy.md", "runbooks/postgres.md"]


def test_noop_update_reads_nothing(store: qmd.Store, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store.add_collection(notes, name="notes")
    reads = _count_reads(monkeypatch)
    report = store.update()
    assert report.totals["unchanged"] == 4 and report.totals["new"] == report.totals["updated"] == 0
    assert reads == []


def test_changed_file_is_rehashed_and_searchable(store: qmd.Store, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store.add_collection(notes, name="notes")
    old_docid = store.get("qmd://notes/runbooks/deploy.md").docid
    target = notes / "runbooks" / "deploy.md"
    target.write_text(target.read_text() + "\nCanary first: watch the zanzibar dashboard.\n")
    _touch_later(target)
    reads = _count_reads(monkeypatch)
    report = store.update()
    assert report.totals["updated"] == 1 and report.totals["unchanged"] == 3
    assert reads == [str(target)]
    hits = store.search("zanzibar")
    assert [h.path for h in hits] == ["runbooks/deploy.md"]
    assert hits[0].docid != old_docid
    with pytest.raises(qmd.NotFoundError):
        store.get("#" + old_docid)


def test_touched_identical_file_is_unchanged_and_not_reread_next_time(store: qmd.Store, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store.add_collection(notes, name="notes")
    _touch_later(notes / "ideas.md")
    reads = _count_reads(monkeypatch)
    assert store.update().totals["unchanged"] == 4
    assert len(reads) == 1  # re-hashed once because its mtime moved
    store.update()
    assert len(reads) == 1  # the new mtime was recorded


def test_deleted_file_is_soft_deleted_and_restorable(store: qmd.Store, notes: Path) -> None:
    store.add_collection(notes, name="notes")
    text = (notes / "runbooks" / "postgres.md").read_text()
    (notes / "runbooks" / "postgres.md").unlink()
    report = store.update()
    assert report.totals["removed"] == 1
    assert store.search("pg_restore") == []
    conn = store.backend.connection()
    assert scalar(conn, "SELECT active FROM documents WHERE path = 'runbooks/postgres.md'") == 0
    assert store.status().inactive == 1
    (notes / "runbooks" / "postgres.md").write_text(text)
    assert store.update().totals["new"] == 1
    assert [h.path for h in store.search("pg_restore")] == ["runbooks/postgres.md"]


def test_identical_content_shares_one_row_and_docid(store: qmd.Store, notes: Path) -> None:
    (notes / "copy.md").write_text((notes / "runbooks" / "deploy.md").read_text())
    store.add_collection(notes, name="notes")
    a, b = store.get("notes/copy.md"), store.get("notes/runbooks/deploy.md")
    assert a.docid == b.docid == hashlib.sha256(a.text.encode()).hexdigest()[:6]
    conn = store.backend.connection()
    assert scalar(conn, "SELECT count(*) FROM content") == 4
    assert scalar(conn, "SELECT count(*) FROM documents") == 5


def test_cleanup_drops_deleted_docs_and_orphaned_content(store: qmd.Store, notes: Path) -> None:
    store.add_collection(notes, name="notes")
    (notes / "ideas.md").unlink()
    store.update()
    report = store.cleanup()
    assert (report.inactive_removed, report.orphaned_content_removed) == (1, 1)
    assert store.status().documents == 3
    assert [h.path for h in store.search("pg_restore")] == ["runbooks/postgres.md"]


def test_front_matter_title_tags_and_snippet(store: qmd.Store, notes: Path) -> None:
    store.add_collection(notes, name="notes")
    doc = store.get("notes/meetings/2024-03-01.md")
    assert doc.title == "Planning March"
    hits = store.search("kubernetes migration")
    assert hits[0].path == "meetings/2024-03-01.md"
    assert "title:" not in hits[0].snippet and "tags:" not in hits[0].snippet
    assert hits[0].line == 7  # line numbers count the front matter lines of the file
    assert store.get("notes/meetings/2024-03-01.md:7:1").text == "Discussed the migration to kubernetes."
    assert [h.path for h in store.search("q2")] == ["meetings/2024-03-01.md"]  # tags are searchable
    assert store.search("title") == []  # front-matter keys are not indexed as body text


def test_title_falls_back_to_heading_then_file_name(store: qmd.Store, notes: Path) -> None:
    (notes / "fenced.md").write_text("```\n# not a title\n```\n\n## Real Title\n\ntext\n")
    store.add_collection(notes, name="notes")
    assert store.get("notes/ideas.md").title == "ideas"
    assert store.get("notes/runbooks/deploy.md").title == "Deploy Runbook"
    assert store.get("notes/fenced.md").title == "Real Title"


def test_cjk_words_inside_a_run_are_searchable(store: qmd.Store, tmp_path: Path) -> None:
    root = tmp_path / "cjk"
    root.mkdir()
    (root / "ja.md").write_text("# 旅行\n\n東京都の天気予報を確認する。\n")
    (root / "zh.md").write_text("# 数据库\n\n我们使用数据库备份恢复系统。\n")
    (root / "ko.md").write_text("# 배포\n\n블루그린배포를 사용합니다.\n")
    store.add_collection(root, name="cjk")
    assert [h.path for h in store.search("天気")] == ["ja.md"]
    assert [h.path for h in store.search("京都")] == ["ja.md"]
    assert [h.path for h in store.search("备份")] == ["zh.md"]
    assert [h.path for h in store.search("그린")] == ["ko.md"]
    hit = store.search("天気予報")[0]
    assert hit.line == 3 and "天気予報" in hit.snippet


def test_collection_filter_is_exact_not_a_filtered_global_top_k(store: qmd.Store, tmp_path: Path) -> None:
    big, small = tmp_path / "big", tmp_path / "small"
    big.mkdir()
    small.mkdir()
    for i in range(40):
        (big / f"n{i}.md").write_text(f"# Latency {i}\n\nlatency latency latency budget {i}\n")
    (small / "one.md").write_text("# Misc\n\nA long note that mentions latency once among many other words here.\n")
    store.add_collection(big, name="big")
    store.add_collection(small, name="small")
    assert "small" not in {h.collection for h in store.search("latency", limit=5)}
    assert [h.path for h in store.search("latency", limit=5, collections=["small"])] == ["one.md"]
    with pytest.raises(qmd.NotFoundError) as info:
        store.search("latency", collections=["smal"])
    assert "small" in (info.value.hint or "")


def test_excluded_collection_is_searched_only_when_named(store: qmd.Store, notes: Path, tmp_path: Path) -> None:
    other = tmp_path / "archive"
    other.mkdir()
    (other / "old.md").write_text("# Old\n\npg_restore notes from 2019\n")
    store.add_collection(notes, name="notes")
    store.add_collection(other, name="archive")
    store.set_include_by_default("archive", False)
    assert {h.collection for h in store.search("pg_restore")} == {"notes"}
    assert {h.collection for h in store.search("pg_restore", collections=["archive"])} == {"archive"}
    store.set_include_by_default("archive", True)
    assert {h.collection for h in store.search("pg_restore")} == {"notes", "archive"}


def test_rename_and_remove_collection(store: qmd.Store, notes: Path) -> None:
    store.add_collection(notes, name="notes")
    store.rename_collection("notes", "wiki")
    hits = store.search("pg_restore")
    assert hits[0].uri == "qmd://wiki/runbooks/postgres.md"
    assert store.get("qmd://wiki/runbooks/postgres.md").title == "Postgres Backups"
    assert store.update().totals["unchanged"] == 4
    assert store.remove_collection("wiki") == 4
    assert store.collections() == []
    assert scalar(store.backend.connection(), "SELECT count(*) FROM documents") == 0
    assert (notes / "runbooks" / "postgres.md").exists()


def test_contexts_apply_from_general_to_specific(store: qmd.Store, notes: Path) -> None:
    store.add_collection(notes, name="notes")
    store.add_context("/", "Team knowledge base")
    store.add_context("qmd://notes/", "Engineering notes")
    store.add_context("qmd://notes/runbooks", "Operational runbooks")
    deploy = store.search("load balancer")[0]
    assert deploy.context == "Team knowledge base\n\nEngineering notes\n\nOperational runbooks"
    assert store.get("notes/ideas.md").context == "Team knowledge base\n\nEngineering notes"
    assert {c.target for c in store.contexts()} == {"/", "qmd://notes/", "qmd://notes/runbooks"}
    store.remove_context("qmd://notes/runbooks")
    assert store.search("load balancer")[0].context == "Team knowledge base\n\nEngineering notes"
    # The config is the source of truth: a fresh Store sees the same contexts.
    again = qmd.Store(store.index_path, store.config_path)
    assert [c.text for c in again.contexts()] == ["Team knowledge base", "Engineering notes"]


def test_pattern_and_ignore_globs(store: qmd.Store, notes: Path) -> None:
    (notes / "drafts").mkdir()
    (notes / "drafts" / "wip.md").write_text("# WIP\n\nunfinished zebra\n")
    (notes / "readme.txt").write_text("zebra text file\n")
    (notes / ".hidden").mkdir()
    (notes / ".hidden" / "h.md").write_text("# H\n\nzebra hidden\n")
    (notes / "node_modules").mkdir()
    (notes / "node_modules" / "x.md").write_text("# X\n\nzebra dependency\n")
    store.add_collection(notes, name="notes", ignore=["drafts/**"])
    assert store.search("zebra") == []
    store.add_collection(notes, name="all", pattern="**/*.{md,txt}")
    assert sorted(h.path for h in store.search("zebra")) == ["drafts/wip.md", "readme.txt"]


def test_update_command_runs_first_and_failure_is_reported(store: qmd.Store, notes: Path) -> None:
    store.add_collection(notes, name="notes", update_command="printf '# Generated\\n\\nquokka\\n' > generated.md")
    assert [h.path for h in store.search("quokka")] == ["generated.md"]
    coll = store.config.collections()["notes"]
    coll.update = "echo pull failed >&2; exit 7"
    store.config.set_collection(coll)
    store.config.save()
    (notes / "later.md").write_text("# Later\n\nwombat\n")
    report = store.update()
    assert report.command_failures and "exited 7" in report.command_failures[0][1] and "pull failed" in report.command_failures[0][1]
    assert [h.path for h in store.search("wombat")] == ["later.md"]  # still indexed from disk


def test_docid_prefixes(store: qmd.Store, tmp_path: Path) -> None:
    root = tmp_path / "ids"
    root.mkdir()
    # Two texts whose sha256 share the first 6 hex digits (birthday search: ~4k tries).
    seen: dict[str, str] = {}
    while True:
        text = f"# Note\n\n{secrets.token_hex(8)}\n"
        prefix = hashlib.sha256(text.encode()).hexdigest()[:6]
        if prefix in seen:
            break
        seen[prefix] = text
    (root / "a.md").write_text(seen[prefix])
    (root / "b.md").write_text(text)
    store.add_collection(root, name="ids")
    with pytest.raises(qmd.QmdError, match="ambiguous"):
        store.get("#" + prefix)
    full_a = hashlib.sha256(seen[prefix].encode()).hexdigest()
    full_b = hashlib.sha256(text.encode()).hexdigest()
    common = len(os.path.commonprefix([full_a, full_b]))
    assert store.get("#" + full_a[: common + 1]).path == "a.md"
    assert store.get("#" + full_b.upper()[: common + 1]).path == "b.md"
    with pytest.raises(qmd.QmdError, match="not a docid"):
        store.get("#abc")


def test_knowledge_folder_cache_follows_config_changes(notes: Path, tmp_path: Path) -> None:
    import json

    paths = qmd.resolve_index("work")
    store = qmd.Store(paths.index_path, paths.config_path)
    store.add_collection(notes, name="notes")
    other = tmp_path / "other"
    other.mkdir()
    qmd.Store(qmd.resolve_index(None).index_path, qmd.resolve_index(None).config_path).add_collection(other, name="misc", index=False)
    cache = json.loads(qmd.index.folder_cache.cache_path().read_text())
    assert {(f["index"], f["collection"], f["path"]) for f in cache["folders"]} == {
        ("work", "notes", str(notes.resolve())),
        ("index", "misc", str(other.resolve())),
    }
    store.remove_collection("notes")
    cache = json.loads(qmd.index.folder_cache.cache_path().read_text())
    assert [f["collection"] for f in cache["folders"]] == ["misc"]
