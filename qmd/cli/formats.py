"""Results → text, for every output format (pure; the CLI prints what these return)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence

from qmd.cli.shared import FORMATS
from qmd.cli.terminal import BOLD, CYAN, DIM, PLAIN, Style
from qmd.core.clock import ago
from qmd.core.records import record
from qmd.core.text import line_safe, numbered
from qmd.core.units import human_size
from qmd.core.results import CollectionInfo, Document, FileEntry, ModelStatus, MultiGetItem, Overlap, SearchHit, StatusInfo, VectorStatus

TYPE_CHECKING = False
if TYPE_CHECKING:
    import io
    from typing import Any

_XML_TEXT = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_XML_ATTR = {**_XML_TEXT, '"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}


def _csv_writer() -> tuple[io.StringIO, Any]:
    """A CSV writer into a string buffer (csv and io load only for --csv)."""
    import csv
    import io

    buf = io.StringIO()
    return buf, csv.writer(buf, lineterminator="\n")


def escape(text: str) -> str:
    """XML character data (xml.sax.saxutils would import urllib: 25 ms per CLI call)."""
    return "".join(_XML_TEXT.get(ch, ch) for ch in text) if any(ch in text for ch in "&<>") else text


def quoteattr(text: str) -> str:
    """A double-quoted XML attribute value."""
    return '"' + "".join(_XML_ATTR.get(ch, ch) for ch in text) + '"'


def _file(hit: SearchHit | MultiGetItem | Document, paths: dict[str, str] | None) -> str:
    """The name to show: the qmd:// URI (with `?index=NAME` for a named index), or the
    file-system path under --full-path (see shared.display_names)."""
    return (paths or {}).get(hit.uri, hit.uri)


def _on_disk(name: str) -> bool:
    """A --full-path name that was found on disk (the original then drops the docid)."""
    return not name.startswith("qmd://")


def _csv_field(text: str) -> str:
    """A field quoted as the original's --files does: in double quotes, quotes doubled."""
    return '"' + text.replace('"', '""') + '"'


ANY_MARK = "[any-term]"  # --files: a hit from the any-term fill (the original has none), in the field after the context
BELOW_MARK = "[below-threshold]"  # --files: a hit whose confidence is below the threshold (a best guess), after the confidence


@record(frozen=True)
class Judged:
    """What the formats say beside the hits' confidence: the threshold under which a hit is
    a best guess, and the words of the question no searched note holds."""

    threshold: float = 0.0
    unmatched: tuple[str, ...] = ()


def percent(value: float) -> str:
    return f"{round(value * 100)}%"


def verdict(hits: Sequence[SearchHit], threshold: float) -> str | None:
    """The line said before best guesses when no hit reaches the threshold (None: one does)."""
    rated = [h.confidence for h in hits if h.confidence is not None]
    if not rated or not all(h.below(threshold) for h in hits if h.confidence is not None):
        return None
    return f"No note answers this with confidence (best {percent(max(rated))} < {percent(threshold)}); closest hits:"


def unmatched_line(words: Sequence[str]) -> str:
    """The words of the question that no searched note holds."""
    named = ", ".join(f"'{w}'" for w in words)
    return f"no note contains {named}" if len(words) == 1 else f"no note contains any of {named}"


def search_json_rows(hits: Sequence[SearchHit], paths: dict[str, str] | None = None, judged: Judged | None = None) -> list[dict[str, Any]]:
    """`--json` rows of search results (`paths`: display names by URI), each with its
    confidence and (given `judged`) below_threshold and the unmatched words."""
    threshold, unmatched = (judged.threshold, list(judged.unmatched)) if judged else (None, None)
    return [h.to_json(file=_file(h, paths), threshold=threshold, unmatched=unmatched) for h in hits]


def explain_lines(e: Mapping[str, Any], rerank_stage: object = None) -> list[str]:
    """One hit's `--explain` for people: its fused rank and RRF, each list it came from (named
    as a person would: "keywords (original query)"), the rerank score or why there is none,
    and how the final score came out. `rerank_stage`: the query's rerank stage ("off", "skipped:
    …", or how many candidates were reranked)."""
    rank = int(e.get("rrf_rank") or 0)
    bonus = float(e.get("bonus") or 0.0)
    rrf = float(e.get("rrf") or 0.0)
    head = f"Explain: fused rank {rank}, RRF {rrf:.4f}"
    lines = [head + (f" (lists {rrf - bonus:.4f} + top-rank bonus {bonus:.4f})" if bonus else "")]
    for x in e.get("lists", []):
        label = x.get("label") or x.get("list")
        lines.append(f"  {label}: rank {int(x.get('rank') or 0)}, +{float(x.get('rrf') or 0.0):.4f}")
    score = float(e.get("score") or 0.0)
    reranked = e.get("rerank")
    if reranked is None:
        if rerank_stage == "off":
            why = "off (--no-rerank)"
        elif isinstance(rerank_stage, str) and rerank_stage.startswith("skipped"):
            why = "skipped (no reranker)"
        elif isinstance(rerank_stage, int) and rerank_stage:
            why = f"not reranked (outside the top {rerank_stage} candidates)"
        else:
            why = "skipped"
        lines += [f"  rerank: {why}", f"  score: {round(score * 100)}% = 1 / fused rank {rank}"]
    else:
        w = float(e.get("blend_weight") or 0.0)
        lines += [
            f"  rerank: {float(reranked):.4f}",
            f"  score: {round(score * 100)}% = {round(w * 100)}% × 1/{rank} + {round((1 - w) * 100)}% × rerank {float(reranked):.4f}",
        ]
    return lines


def confidence_lines(hit: SearchHit) -> list[str]:
    """`--explain`'s account of a hit's confidence: the evidence it was computed from."""
    if hit.confidence is None or not hit.evidence:
        return []
    names = {"coverage": "words held", "first": "first", "bm25": "BM25", "bm25_lead": "BM25 lead", "z": "cosine z", "z_lead": "z lead", "rerank": "rerank"}
    parts = ", ".join(f"{names.get(k, k)} {v:g}" for k, v in hit.evidence.items())
    return [f"  confidence: {percent(hit.confidence)} from {parts}"]


def format_search(
    hits: Sequence[SearchHit], fmt: str, paths: dict[str, str] | None = None, style: Style = PLAIN, query: str = "", files: dict[str, str] | None = None,
    explain: Mapping[str, Sequence[str]] | None = None, judged: Judged | None = None,
) -> str:
    """Search hits in `fmt`; the caller prints the result as is (no extra newline).

    Hits from the any-term fill (`match == "any"`) are marked in every format: `match` in
    JSON and CSV, `match="any"` in XML, `**match:** any` in Markdown, `[any-term]` in the
    field after the context with --files (`#docid,score,file,"context",[any-term]`; the
    context field empty when there is none), a `Match:` line after the cli score. All-terms hits print as the
    original prints them. `style` and `files` (file-system paths by URI, for the links)
    decorate the cli format on a terminal; `explain` (lines by URI, `query --explain`) goes
    under each hit's score in the cli format, as the original prints it.

    Every format ends each hit with its confidence (issue 28), after the original's fields:
    JSON `confidence` and `below_threshold` (and `unmatched` words), CSV columns
    `confidence,below_threshold`, XML attributes `confidence` and `below_threshold="true"`,
    Markdown `**confidence:**`, --files `...,confidence[,[below-threshold]]` (the context and
    any-term fields then always in place, empty when there is none). The cli format shows
    the confidence as a percentage instead of the score, and when no hit reaches the
    threshold says so in one line above them (`verdict`).
    """
    judged = judged or Judged()
    if fmt == "json":
        return json.dumps(search_json_rows(hits, paths, judged), indent=2, ensure_ascii=False) + "\n"
    if fmt == "files":
        rows = []
        for h in hits:
            name = _file(h, paths)
            head = f"{h.score:.2f}," if paths and _on_disk(name) else f"#{h.docid},{h.score:.2f},"
            # The original's fields, then ours, each in its place: empty context or mark fields
            # before a field that follows; empty last fields are left off, as the original does.
            extra = [
                _csv_field(h.context) if h.context else "", ANY_MARK if h.match == "any" else "",
                f"{h.confidence:.2f}" if h.confidence is not None else "", BELOW_MARK if h.below(judged.threshold) else "",
            ]
            while extra and not extra[-1]:
                extra.pop()
            rows.append(f"{head}{line_safe(name)}" + "".join(f",{field}" for field in extra) + "\n")
        return "".join(rows)
    if fmt == "csv":
        buf, writer = _csv_writer()
        writer.writerow(["docid", "score", "file", "title", "context", "line", "snippet", "match", "confidence", "below_threshold"])
        for h in hits:
            text = h.body if h.body is not None else h.snippet
            conf = f"{h.confidence:.4f}" if h.confidence is not None else ""
            writer.writerow([f"#{h.docid}", f"{h.score:.4f}", _file(h, paths), h.title, h.context or "", h.line, text, h.match, conf, str(h.below(judged.threshold)).lower()])
        return buf.getvalue()
    if fmt == "md":
        blocks = []
        for h in hits:
            ctx = f"**context:** {h.context}\n" if h.context else ""
            mark = "**match:** any\n" if h.match == "any" else ""
            if h.confidence is not None:
                below = f" (below the {judged.threshold:.2f} threshold: a best guess)" if h.below(judged.threshold) else ""
                mark += f"**confidence:** {h.confidence:.2f}{below}\n"
            text = h.body if h.body is not None else h.snippet
            blocks.append(f"---\n# {line_safe(h.title)}\n**file:** `{line_safe(_file(h, paths))}`\n**docid:** `#{h.docid}`\n{ctx}{mark}\n{text}\n\n")
        return "".join(blocks)
    if fmt == "xml":
        if not hits:
            return "<results></results>\n"
        blocks = []
        for h in hits:
            ctx = f" context={quoteattr(h.context)}" if h.context else ""
            mark = ' match="any"' if h.match == "any" else ""
            if h.confidence is not None:
                mark += f' confidence="{h.confidence:.2f}"' + (' below_threshold="true"' if h.below(judged.threshold) else "")
            text = h.body if h.body is not None else h.snippet
            blocks.append(f"<file docid=\"#{h.docid}\" name={quoteattr(_file(h, paths))} title={quoteattr(h.title)}{ctx}{mark}>\n{escape(text)}\n</file>\n")
        return "\n".join(blocks) + "\n"
    if not hits:
        return "No results found.\n"
    blocks = []
    for h in hits:
        ctx = style.paint(DIM, f"Context: {line_safe(h.context, newlines=True)}") + "\n" if h.context else ""
        text = h.body if h.body is not None else h.snippet
        name = line_safe(_file(h, paths))
        head = style.paint(CYAN, style.link(f"{name}:{h.line}", (files or {}).get(h.uri), h.line))
        rated = h.score if h.confidence is None else h.confidence
        pct = f"{round(rated * 100):>3}%"
        label = "Score:" if h.confidence is None else "Confidence:"
        below = style.paint(DIM, f" (below {percent(judged.threshold)}: a best guess)") if h.below(judged.threshold) else ""
        mark = style.paint(DIM, "Match:  some terms (not every word of the query)") + "\n" if h.match == "any" else ""
        mark += "".join(style.paint(DIM, line) + "\n" for line in (explain or {}).get(h.uri, ()))
        blocks.append(
            f"{head} {style.paint(DIM, '#' + h.docid)}\n{style.paint(BOLD, 'Title: ' + line_safe(h.title))}\n{ctx}"
            f"{label} {style.score(rated, pct)}{below}\n{mark}\n{style.highlight(text, query)}\n"
        )
    line = verdict(hits, judged.threshold)
    return (f"{style.paint(BOLD, line)}\n\n" if line else "") + "\n".join(blocks)


def format_document(doc: Document, fmt: str, line_numbers: bool = True, name: str | None = None) -> str:
    """One document from `get`: a header then its lines (numbered unless asked not to).
    `name`: what to show instead of the qmd:// URI (--full-path, or `?index=NAME`)."""
    name = name or doc.uri
    body = numbered(doc.text, doc.from_line) if line_numbers and doc.lines_shown else doc.text  # `-l 0`: no "1: " line
    if fmt == "json":
        row: dict[str, Any] = {"file": name, "docid": f"#{doc.docid}", "title": doc.title}
        if doc.context:
            row["context"] = doc.context
        row.update({"fromLine": doc.from_line, "lines": doc.lines_shown, "totalLines": doc.total_lines, "body": body})
        return json.dumps(row, indent=2, ensure_ascii=False) + "\n"
    if fmt == "md":
        ctx = f"**context:** {doc.context}\n" if doc.context else ""
        return f"---\n# {line_safe(doc.title)}\n**file:** `{line_safe(name)}`\n**docid:** `#{doc.docid}`\n{ctx}\n{body}\n"
    if fmt == "xml":
        ctx = f" context={quoteattr(doc.context)}" if doc.context else ""
        return f"<file docid=\"#{doc.docid}\" name={quoteattr(name)} title={quoteattr(doc.title)}{ctx}>\n{escape(body)}\n</file>\n"
    if fmt == "files":
        return f"#{doc.docid},{line_safe(name)}" + (f",{_csv_field(doc.context)}" if doc.context else "") + "\n"
    ctx = f"Folder Context: {line_safe(doc.context, newlines=True)}\n" if doc.context else ""
    return f"{line_safe(name)}  #{doc.docid}\n{ctx}---\n" + (f"\n{body}\n" if doc.lines_shown else "")


def _multi_body(item: MultiGetItem, line_numbers: bool) -> str:
    body = numbered(item.text, item.from_line) if line_numbers and item.text else (item.text or "")  # `:1:0`, `-l 0`: no "1: " line
    if item.truncated_lines:
        body += ("\n\n" if body else "") + f"[... truncated {item.truncated_lines} more lines]"
    return body


def format_multi(items: Sequence[MultiGetItem], fmt: str, line_numbers: bool = True, names: dict[str, str] | None = None) -> str:
    """multi-get's documents in `fmt`, laid out as the original's (`names`: what to show for
    each URI: the collection-relative path for a glob, as the original, or --full-path)."""
    def name(it: MultiGetItem) -> str:
        return _file(it, names)

    def docid(it: MultiGetItem) -> str | None:  # the original drops it for a path found on disk
        return None if not it.docid or (names and name(it).startswith(("/", "./"))) else f"#{it.docid}"

    if fmt == "json":
        rows = []
        for it in items:
            row: dict[str, Any] = {"file": name(it)}
            if docid(it):
                row["docid"] = docid(it)
            row["title"] = it.title
            if it.context:
                row["context"] = it.context
            if it.skipped:
                row.update(skipped=True, reason=it.skipped)
            else:
                if it.ranged:  # the line range the list asked for (get's keys)
                    row.update(fromLine=it.from_line, lines=it.lines_shown, totalLines=it.total_lines)
                row["body"] = _multi_body(it, line_numbers)
            rows.append(row)
        return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    if fmt == "files":
        return "".join(
            (f"{docid(it)}," if docid(it) else "") + line_safe(name(it)) + (f",{_csv_field(it.context)}" if it.context else "") + (",[SKIPPED]" if it.skipped else "") + "\n"
            for it in items
        )
    if fmt == "xml":
        parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<documents>\n']
        for it in items:
            did = docid(it)
            parts.append(f"  <document{f' docid={quoteattr(did)}' if did else ''}>\n")
            parts.append(f"    <file>{escape(name(it))}</file>\n    <title>{escape(it.title)}</title>\n")
            if it.context:
                parts.append(f"    <context>{escape(it.context)}</context>\n")
            if it.skipped:
                parts.append(f"    <skipped>true</skipped>\n    <reason>{escape(it.skipped)}</reason>\n")
            else:
                if it.ranged:
                    parts.append(f'    <lines from="{it.from_line}" count="{it.lines_shown}" total="{it.total_lines}"/>\n')
                parts.append(f"    <body>{escape(_multi_body(it, line_numbers))}</body>\n")
            parts.append("  </document>\n")
        return "".join(parts) + "</documents>\n"
    if fmt == "md":
        blocks = []
        for it in items:
            block = f"## {line_safe(name(it))}\n\n"
            if docid(it):
                block += f"**docid:** `{docid(it)}`\n\n"
            block += f"**Title:** {line_safe(it.title)}\n\n"
            if it.context:
                block += f"**Context:** {it.context}\n\n"
            if it.ranged and not it.skipped:
                block += f"**Lines:** {it.line_span}\n\n"
            block += f"> {it.skipped}\n\n" if it.skipped else f"```\n{_multi_body(it, line_numbers)}\n```\n\n"
            blocks.append(block)
        return "".join(blocks)
    if fmt == "csv":
        buf, writer = _csv_writer()
        writer.writerow(["docid", "file", "title", "context", "skipped", "body"])
        for it in items:
            writer.writerow([docid(it) or "", name(it), it.title, it.context or "", "true" if it.skipped else "false", it.skipped or _multi_body(it, line_numbers)])
        return buf.getvalue()
    rule = "=" * 60
    blocks = []
    for it in items:
        did = f"  {docid(it)}" if docid(it) else ""
        span = f"Lines: {it.line_span}\n" if it.ranged and not it.skipped else ""
        block = f"\n{rule}\nFile: {line_safe(name(it))}{did}\n{span}{rule}\n\n"
        if it.skipped:
            block += f"[SKIPPED: {it.skipped}]\n"
        else:
            if it.context:
                block += f"Folder Context: {it.context}\n---\n\n"
            block += _multi_body(it, line_numbers) + "\n"
        blocks.append(block)
    return "".join(blocks)


def format_ls(entries: Sequence[FileEntry]) -> str:
    sizes = [human_size(e.size) for e in entries]
    width = max((len(s) for s in sizes), default=0)
    return "".join(
        f"{s.rjust(width)}  {time.strftime('%b %d %H:%M', time.localtime(e.mtime_ns / 1e9))}  {line_safe(e.uri)}\n" for s, e in zip(sizes, entries)
    )


def collections_json(colls: Sequence[CollectionInfo]) -> str:
    """`qmd collection list --json` and `qmd ls --json`: every field of each collection."""
    return to_json([c.__dict__ for c in colls])


def ls_json(entries: Sequence[FileEntry], uri: Callable[[str], str] = str) -> str:
    """`qmd ls NAME --json`: one object per file (the original prints its listing as text
    whatever the flags); `uri` adds the `?index=NAME` of a named index, as get reads it."""
    from qmd.core.clock import now_iso

    return to_json([
        {"file": uri(e.uri), "collection": e.collection, "path": e.path, "docid": f"#{e.docid}", "title": e.title,
         "size": e.size, "modified": now_iso(e.mtime_ns / 1e9)}
        for e in entries
    ])


def format_ls_root(colls: Sequence[CollectionInfo]) -> str:
    if not colls:
        return "No collections. Add one with: qmd collection add DIR --name NAME\n"
    return "Collections:\n\n" + "".join(f"  qmd://{c.name}/  ({c.documents} files)\n" for c in colls)


def format_collection(c: CollectionInfo, detailed: bool = False, compact: bool = False) -> str:
    """A collection's block; `compact` (for status) folds the update time into the Files line."""
    lines = [f"{c.name} (qmd://{c.name}/)"]
    if detailed:
        lines.append(f"  Path:     {c.path}")
    lines.append(f"  Pattern:  {c.pattern}")
    if c.ignore:
        lines.append(f"  Ignore:   {', '.join(c.ignore)}")
    if compact:
        lines.append(f"  Files:    {c.documents} (updated {ago(c.updated_at)})")
        if c.embedded_documents is not None and c.embed:
            lines.append(f"  Vectors:  {c.embedded_documents} of {c.documents} documents embedded")
    else:
        lines.append(f"  Files:    {c.documents}")
        lines.append(f"  Updated:  {ago(c.updated_at)}")
    if not c.include_by_default:
        lines.append("  Default:  excluded (search it with -c " + c.name + ")")
    if detailed:
        if c.update_command:
            lines.append(f"  Update:   {c.update_command}")
        if not c.embed:
            lines.append("  Embed:    off")
        if c.skipped or c.warnings:
            lines.append(f"  Issues:   {c.skipped} skipped, {c.warnings} warnings (see qmd status)")
        for sub, text in c.contexts.items():
            lines.append(f"  Context {sub}: {text}")
    return "\n".join(lines) + "\n"


def format_collection_list(colls: Sequence[CollectionInfo]) -> str:
    if not colls:
        return "No collections. Add one with: qmd collection add DIR --name NAME\n"
    return f"Collections ({len(colls)}):\n\n" + "\n".join(format_collection(c) for c in colls) + "\n"


def to_json(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=default) + "\n"


def overlap_line(o: Overlap) -> str:
    """Two collections over the same files, and how to keep one."""
    where = f"'{o.collection}' indexes the same folder as '{o.other}'" if o.same_folder else f"'{o.collection}' indexes a folder inside '{o.other}'"
    both = "" if not o.files else (": 1 file is in both" if o.files == 1 else f": {o.files} files are in both")
    return f"{where}{both}; keep one: qmd collection remove {o.collection}"


def pending_reason(vectors: VectorStatus) -> str:
    """Why documents are pending, in `qmd embed`'s words: `3 were cut with other chunk settings
    or another build of the model, 2 never embedded`."""
    other, never = vectors.pending_other_settings, vectors.pending_never_embedded
    said = f"{other} {'has vectors' if other == 1 else 'have vectors'} cut with other chunk settings or another build of the model"
    return said + (f", {never} never embedded" if never else "")


def format_status(info: StatusInfo, vectors: VectorStatus | None, vector_error: str | None, models: Sequence[ModelStatus]) -> str:
    """`qmd status` for people: documents, vectors, collections, files needing attention, models."""
    lines = [
        "QMD Status",
        "",
        f"Index: {info.index_path}",
        f"Size:  {human_size(info.size_bytes)}",
        "",
        "Documents",
        f"  Total:    {info.documents} files indexed",
    ]
    if vectors is not None:
        model = f" ({vectors.model})" if vectors.model else " (no embed model file yet: qmd pull, or qmd models import)"
        lines.append(f"  Vectors:  {vectors.embedded_documents} documents embedded, {vectors.chunks} chunks{model}")
        if vectors.pending_documents:
            lines.append(f"  Pending:  {vectors.pending_documents} need embedding (run 'qmd embed')")  # the original's line, kept for scripts
            if vectors.pending_other_settings:
                lines.append(f"            {pending_reason(vectors)}")
    elif vector_error:
        lines.append(f"  Vectors:  unavailable: {vector_error}")
    if info.inactive:
        lines.append(f"  Deleted:  {info.inactive} (run 'qmd cleanup' to drop them)")
    lines.append(f"  Updated:  {ago(info.updated_at)}")
    if info.running:
        r = info.running
        of = f"/{r['total']}" if r.get("total") else ""
        doing = r.get("detail") or f"{r.get('done')}{of} {r.get('unit')}".rstrip()
        lines.append(f"  Running:  {r.get('command')} (pid {r.get('pid')}, since {ago(str(r.get('started_at')))}): {doing}")
    if info.grammars:  # the original's section: tree-sitter grammars for chunk_strategy: auto
        have = [g.language for g in info.grammars if g.available]
        missing = [g for g in info.grammars if not g.available]
        status = "available (chunk_strategy: auto, or embed --chunk-strategy auto)" if have else f"unavailable ({missing[0].install or 'no grammar'})"
        lines += ["", "AST Chunking", f"  Status:   {status}"]
        if have:
            lines.append(f"  Languages: {', '.join(have)}")
        for g in missing:
            lines.append(f"  Missing:  {g.language}: {g.reason}")
    if info.global_context:
        lines += ["", "Global context", f"  {info.global_context}"]
    lines += ["", "Collections"]
    if not info.collections:
        lines.append("  none — add one with: qmd collection add DIR --name NAME")
    for c in info.collections:
        lines.append("  " + format_collection(c, compact=True).rstrip("\n").replace("\n", "\n  "))
    if info.overlaps:
        lines += ["", "Collections over the same files (a search shows each of them twice)"]
        lines += [f"  {overlap_line(o)}" for o in info.overlaps]
    skipped = [i for i in info.issues if i[2] == "skipped"]
    warnings = [i for i in info.issues if i[2] == "warning"]
    if skipped or warnings:
        lines += ["", "Files needing attention"]
        for coll, path, severity, reason in skipped + warnings:
            lines.append(f"  {severity:8} qmd://{coll}/{path}: {reason}")
    if info.collections:
        name = info.collections[0].name
        lines += [
            "",
            "Examples",
            "  # List files in a collection",
            f"  qmd ls {name}",
            "  # Get a document",
            f"  qmd get qmd://{name}/path/to/file.md",
            "  # Search within a collection",
            f'  qmd search "query" -c {name}',
        ]
    labels = {"embed": "Embedding", "rerank": "Reranking", "generate": "Generation"}
    sources = {"config": "index config", "env": "environment", "installed": "installed default", "default": "built-in default"}
    lines += ["", "Models"]
    for m in models:
        state = "ready" if m.available else ("not downloaded: qmd pull" if m.spec.startswith("hf:") else "file missing")
        lines.append(f"  {labels[m.role] + ':':12} {m.spec} ({sources[m.source]}; {state})")
    bare = [c.name for c in info.collections if not c.contexts]
    if bare and not info.global_context:
        lines += [
            "",
            "Tips",
            f"  Add context to collections for better search results: {', '.join(bare)}",
            '    qmd context add qmd://<name>/ "What this collection contains"',
            '    qmd context add qmd://<name>/meeting-notes "Weekly team meeting notes"',
        ]
    return "\n".join(lines) + "\n"
