"""The same command lines on the original qmd 2.8.3 (from npm) and on ours, over the same notes.

Each tool gets its own HOME and XDG dirs under tmp_path; the original's `models:` point at
missing local files so nothing it runs can hang on a download, and only commands that need
no model are compared (search, get, multi-get, ls, status, collection…, context…, cleanup).
Compared: exit codes and the parsed structure of every output format (JSON keys and values,
CSV columns, XML elements and attributes, the lines scripts pick out of md/cli/files), with
the deliberate divergences of docs/compat.md's table spelled out where they apply.
Skipped with the reason when npm (or the install) is not available.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.paths import REFERENCE
from tests.support.run import command

CORPUS = REFERENCE / "corpus"
pytestmark = [
    pytest.mark.skipif(not CORPUS.is_dir(), reason=f"reference corpus not found at {CORPUS}"),
    pytest.mark.slow,  # two processes per command (node and python) and the original installed from npm
]

FRONT_MATTER_DOC = "ops/deploy.md"  # title: ours takes front matter's `title:`, the original the first heading
DEPLOY = "---\ntitle: Deploy Checklist\nowner: platform-team\n---\n# Deploy steps\n\nRun the canary first, then flip the load balancer.\n"


class Tools:
    def __init__(self, root: Path, original: list[str], node_dir: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.original = original
        self.node_dir = node_dir

    def env(self, who: str) -> dict[str, str]:
        home = self.root / who
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_")) and k not in ("INDEX_PATH", "NO_COLOR")}
        env = dict(keep, HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), XDG_CONFIG_HOME=str(home / "config"),
                   XDG_STATE_HOME=str(home / "state"), XDG_DATA_HOME=str(home / "data"), NO_COLOR="1")
        if who == "orig":
            env["PATH"] = f"{self.node_dir}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, who: str, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
        cmd = self.original if who == "orig" else command()
        where = cwd or self.work
        env = dict(self.env(who), PWD=str(where))  # the original reads $PWD, not the process's cwd
        proc = subprocess.run([*cmd, *args], cwd=where, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        return proc.returncode, proc.stdout, proc.stderr

    def both(self, *args: str, cwd: Path | None = None) -> tuple[str, str]:
        """Run on both; the exit codes must agree; (original's stdout, ours)."""
        theirs, ours = self.run("orig", *args, cwd=cwd), self.run("ours", *args, cwd=cwd)
        assert theirs[0] == ours[0], f"qmd {' '.join(args)}: exit {theirs[0]} (original: {theirs[2][-300:]}) vs {ours[0]} (ours: {ours[2][-300:]})"
        return theirs[1], ours[1]


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Tools:
    from tests.support.npm_clients import original_bin, original_node

    qmd_bin = original_bin("qmd")
    node = original_node()
    root = tmp_path_factory.mktemp("differential")
    t = Tools(root, [str(node), str(qmd_bin.resolve())], node.parent)
    notes = t.work / "notes"
    shutil.copytree(CORPUS, notes)
    (notes / "ops").mkdir()
    (notes / FRONT_MATTER_DOC).write_text(DEPLOY)
    (notes / "big.md").write_text("# Big\n\n" + "word " * 15000 + "\n")
    missing = root / "no-models"
    config = root / "orig" / "config" / "qmd"
    config.mkdir(parents=True)
    # The original would download its models on first use (and hang offline): point them at missing files.
    (config / "index.yml").write_text(
        f"models:\n  embed: {missing}/embed.gguf\n  rerank: {missing}/rerank.gguf\n  generate: {missing}/generate.gguf\ncollections: {{}}\n"
    )
    code, _, err = t.run("orig", "--version")
    if code != 0:
        pytest.skip(f"the original qmd does not start here: {err.strip()[-200:]}")
    for who in ("orig", "ours"):
        for args in (
            ("collection", "add", "notes", "--name", "small"),
            ("context", "add", "/", "Global notes"),
            ("context", "add", "qmd://small/", "Team runbooks"),
            ("context", "add", "qmd://small/ops", "Ops folder"),
        ):
            code, _, err = t.run(who, *args)
            assert code == 0, f"{who}: qmd {' '.join(args)}: {err}"
    return t


def _rel(file: str) -> str:
    return file.removeprefix("qmd://small/")


# --- search, every format ---------------------------------------------------------------

QUERY = "load balancer"  # every hit holds both words: no any-term fill on either side


def test_search_json(tools: Tools) -> None:
    theirs, ours = (json.loads(x) for x in tools.both("search", QUERY, "--json"))
    assert [h["docid"] for h in ours] == [h["docid"] for h in theirs] and theirs
    for t, o in zip(theirs, ours):
        # ours adds `match` (and front-matter `metadata`), the confidence and its threshold flag (issue 28)
        assert set(t) <= set(o) and set(o) - set(t) <= {"match", "metadata", "confidence", "below_threshold", "unmatched"}
        assert o["match"] == "all" and 0.0 <= o["confidence"] <= 1.0 and isinstance(o["below_threshold"], bool)
        for key in ("file", "line", "context", "snippet"):
            assert o.get(key) == t.get(key), key
        if _rel(t["file"]) != FRONT_MATTER_DOC:
            assert o["title"] == t["title"]
    assert any("\n\n" in h["context"] for h in theirs)  # contexts of several levels, joined by a blank line


def test_search_files_and_csv(tools: Tools) -> None:
    theirs, ours = tools.both("search", QUERY, "--files")
    parse = lambda text: [row for row in csv.reader(io.StringIO(text))]  # noqa: E731 - the context is a quoted field
    t_rows, o_rows = parse(theirs), parse(ours)
    # The original's fields first, in their places; ours after them: the (here empty) any-term field, the confidence.
    assert [r[0] for r in o_rows] == [r[0] for r in t_rows] and [r[2 : len(t)] for r, t in zip(o_rows, t_rows)] == [t[2:] for t in t_rows]
    assert all(len(r) in (6, 7) and r[4] == "" and 0.0 <= float(r[5]) <= 1.0 and r[6:] in ([], ["[below-threshold]"]) for r in o_rows)
    theirs, ours = tools.both("search", QUERY, "--csv")
    t_rows, o_rows = list(csv.DictReader(io.StringIO(theirs))), list(csv.DictReader(io.StringIO(ours)))
    assert list(o_rows[0])[: len(t_rows[0])] == list(t_rows[0]) and list(o_rows[0])[len(t_rows[0]) :] == ["match", "confidence", "below_threshold"]  # ours: last columns
    for t, o in zip(t_rows, o_rows, strict=True):
        for key in ("docid", "file", "context", "line", "snippet"):
            assert o[key] == t[key], key


def test_search_xml_md_and_cli(tools: Tools) -> None:
    theirs, ours = tools.both("search", QUERY, "--xml")
    t_files = ET.fromstring(f"<r>{theirs}</r>").findall("file")
    o_files = ET.fromstring(f"<r>{ours}</r>").findall("file")
    assert [f.get("name") for f in o_files] == [f.get("name") for f in t_files] and t_files
    for t, o in zip(t_files, o_files):
        assert o.get("docid") == t.get("docid")
        # The original writes newlines raw inside the attribute, which an XML parser turns into
        # spaces; ours escapes them (&#10;) so the context survives parsing.
        assert " ".join((o.get("context") or "").split()) == " ".join((t.get("context") or "").split())
        assert (o.text or "").strip() == (t.text or "").strip()
    theirs, ours = tools.both("search", QUERY, "--md")
    pick = lambda text: re.findall(r"^\*\*(?:file|docid):\*\* .*$", text, re.MULTILINE)  # noqa: E731
    assert pick(ours) == pick(theirs) and pick(theirs)
    assert ours.count("**context:** Global notes\n\nTeam runbooks") == theirs.count("**context:** Global notes\n\nTeam runbooks") > 0
    theirs, ours = tools.both("search", QUERY)
    heads = lambda text: re.findall(r"^qmd://\S+ #[0-9a-f]{6}$", text, re.MULTILINE)  # noqa: E731
    assert heads(ours) == heads(theirs) and heads(theirs)
    # where the original prints its score, ours prints the confidence (issue 28)
    contexts = lambda text: re.findall(r"^Context: (?:.*\n)*?(?=Score:|Confidence:)", text, re.MULTILINE)  # noqa: E731
    assert contexts(ours) == contexts(theirs)


def test_search_options_scripts_use(tools: Tools) -> None:
    for args in (["-n", "1"], ["--all"], ["--full"], ["--line-numbers"], ["-c", "small"], ["--min-score", "0.1"]):
        theirs, ours = tools.both("search", QUERY, "--json", *args)
        assert [h["docid"] for h in json.loads(ours)] == [h["docid"] for h in json.loads(theirs)], args
    theirs, ours = tools.both("search", QUERY, "--json", "--full")
    assert [h["body"] for h in json.loads(ours)] == [h["body"] for h in json.loads(theirs)]
    # --full-path: ./relative under the working directory, the docid dropped from --files.
    theirs, ours = tools.both("search", QUERY, "--files", "--full-path")
    o_rows, t_rows = (list(csv.reader(io.StringIO(text))) for text in (ours, theirs))
    assert "./notes/" in ours and len(o_rows) == len(t_rows) and [r[: len(t)] for r, t in zip(o_rows, t_rows)] == t_rows  # ours: fields after the original's
    theirs, ours = tools.both("search", "zzyzx quuxly", "--json")
    assert json.loads(ours) == json.loads(theirs) == []
    tools.both("search", QUERY, "-c", "nope")  # exit 1 on both


def test_a_named_index_in_uris(tools: Tools) -> None:
    for who in ("orig", "ours"):
        assert tools.run(who, "--index", "work", "collection", "add", "notes", "--name", "w")[0] == 0
    theirs, ours = tools.both("search", "canary", "--index", "work", "--json")
    assert [h["file"] for h in json.loads(ours)] == [h["file"] for h in json.loads(theirs)] == ["qmd://w/ops/deploy.md?index=work"]


# --- get and multi-get ------------------------------------------------------------------

def test_get(tools: Tools) -> None:
    for ref in ("small/ops/deploy.md", "qmd://small/bluegreen-rollout.md", "#9d4971", "small/bluegreen-rollout.md:3:2"):
        theirs, ours = tools.both("get", ref)
        assert ours == theirs, ref  # header, Folder Context:, ---, numbered lines
    tools.both("get", "small/nope.md")  # exit 1 on both


@pytest.mark.parametrize("pattern", ["small/ops/*.md", "small/big.md,small/ops/deploy.md,small/travel-japan.md"])
def test_multi_get_every_format(tools: Tools, pattern: str) -> None:
    theirs, ours = (json.loads(x) for x in tools.both("multi-get", pattern, "--json", "-l", "3"))
    assert [d["file"] for d in ours] == [d["file"] for d in theirs] and theirs  # collection-relative for a glob
    for t, o in zip(theirs, ours):
        assert set(o) == set(t)
        assert (o["docid"], o.get("context"), o.get("skipped")) == (t["docid"], t.get("context"), t.get("skipped"))
        if t.get("skipped"):
            assert o["reason"] and "qmd get" in o["reason"]
        else:  # ours does not number the "[... truncated]" marker as a line of the file
            assert o["body"].split("\n")[:3] == t["body"].split("\n")[:3]
    theirs, ours = tools.both("multi-get", pattern, "--csv", "-l", "3")
    t_rows, o_rows = list(csv.DictReader(io.StringIO(theirs))), list(csv.DictReader(io.StringIO(ours)))
    assert list(o_rows[0]) == list(t_rows[0]) == ["docid", "file", "title", "context", "skipped", "body"]
    assert [(r["docid"], r["file"], r["context"], r["skipped"]) for r in o_rows] == [(r["docid"], r["file"], r["context"], r["skipped"]) for r in t_rows]
    theirs, ours = tools.both("multi-get", pattern, "--xml", "-l", "3")
    t_root, o_root = ET.fromstring(theirs), ET.fromstring(ours)
    assert o_root.tag == t_root.tag == "documents"
    shape = lambda root: [(d.get("docid"), d.findtext("file"), d.findtext("context"), d.findtext("skipped"), [c.tag for c in d]) for d in root]  # noqa: E731
    assert shape(o_root) == shape(t_root)
    theirs, ours = tools.both("multi-get", pattern, "--files", "-l", "3")
    assert list(csv.reader(io.StringIO(ours))) == list(csv.reader(io.StringIO(theirs)))
    theirs, ours = tools.both("multi-get", pattern, "--md", "-l", "3")
    pick = lambda text: re.findall(r"^(?:## .*|\*\*(?:docid|Context):\*\* .*|> .*|```)$", text, re.MULTILINE)  # noqa: E731
    assert [p for p in pick(ours) if not p.startswith("> ")] == [p for p in pick(theirs) if not p.startswith("> ")]
    theirs, ours = tools.both("multi-get", pattern, "-l", "3")
    banner = lambda text: re.findall(r"^(?:={60}|File: .*|Folder Context: .*|\[SKIPPED: .*)$", text, re.MULTILINE)  # noqa: E731
    strip = lambda lines: [re.sub(r"^\[SKIPPED: .*", "[SKIPPED]", x) for x in lines]  # noqa: E731 - our reason's wording differs
    assert strip(banner(ours)) == strip(banner(theirs))


# --- listing, status, collections, contexts, maintenance: exit codes and the lines scripts read

def test_ls_status_and_collections(tools: Tools) -> None:
    theirs, ours = tools.both("ls", "small")
    assert re.findall(r"qmd://\S+", ours) == re.findall(r"qmd://\S+", theirs)
    theirs, ours = tools.both("ls")
    assert ours == theirs
    for prefix in ("small/blue", "small/op", "qmd://small/ops/"):  # a path prefix lists what starts with it, as the original
        theirs, ours = tools.both("ls", prefix)
        assert re.findall(r"qmd://\S+", ours) == re.findall(r"qmd://\S+", theirs) and theirs, prefix
    tools.both("ls", "nope")  # exit 1 on both: no such collection
    # On purpose: a sub-path with no files is an error here (stderr, exit 1), a line on stdout with exit 0 there.
    code, out, _ = tools.run("orig", "ls", "small/nope")
    assert (code, out) == (0, "No files found under qmd://small/nope\n")
    code, out, err = tools.run("ours", "ls", "small/nope")
    assert (code, out) == (1, "") and err.startswith("Error: no files under qmd://small/nope\n")
    theirs, ours = tools.both("collection", "list")
    lines = lambda text: [x for x in text.splitlines() if not x.strip().startswith("Updated:")]  # noqa: E731
    assert lines(ours)[:5] == lines(theirs)[:5]
    tools.both("status")
    tools.both("context", "list")
    tools.both("collection", "show", "small")
    tools.both("collection", "update-cmd", "small", "true")
    tools.both("collection", "update-cmd", "small")
    tools.both("collection", "update-cmd", "nope", "x")  # exit 1 on both
    theirs, ours = tools.both("cleanup", "--dry-run")
    assert ours.startswith("Dry run — no changes made.\n") and theirs.startswith("Dry run — no changes made.\n")
    tools.both("update")
    tools.both("--version")


def test_skill_install(tools: Tools) -> None:
    for who in ("orig", "ours"):
        project = tools.root / f"project-{who}"
        project.mkdir()
        code, _, err = tools.run(who, "skill", "install", "--yes", cwd=project)
        assert code == 0, err
        skill = project / ".agents" / "skills" / "qmd" / "SKILL.md"
        assert skill.read_text().startswith("---\nname: qmd\n")
        assert (project / ".claude" / "skills" / "qmd").is_symlink()


def test_flags_the_originals_scripts_pass_anywhere(tools: Tools) -> None:
    """`--no-gpu` after the command, `ls --json`: accepted by both (the original prints its
    ls text whatever the flags; ours prints JSON, the README's table)."""
    theirs, ours = tools.both("search", "load balancer", "--no-gpu", "--files")
    assert ours.splitlines()[0].split(",")[:2] == theirs.splitlines()[0].split(",")[:2]
    theirs, ours = tools.both("ls", "small", "--json")
    assert [f["file"] for f in json.loads(ours)] == [line.split()[-1] for line in theirs.splitlines()]
    tools.both("ls", "--json")


def test_skill_install_without_yes_and_the_skills_commands(tools: Tools) -> None:
    """Off a terminal, without --yes, neither links Claude's folder (a tip instead); `skills`
    lists and prints in the same JSON shape (the original ships one more skill, `release`)."""
    for who in ("orig", "ours"):
        project = tools.root / f"project-noyes-{who}"
        project.mkdir()
        code, out, err = tools.run(who, "skill", "install", cwd=project)
        assert code == 0, err
        assert (project / ".agents" / "skills" / "qmd" / "SKILL.md").is_file() and not (project / ".claude").exists()
        assert "Tip:" in out
    theirs, ours = (json.loads(text) for text in tools.both("skills", "list", "--json"))
    assert theirs["success"] is ours["success"] is True
    assert {tuple(entry) for entry in ours["data"]} == {tuple(entry) for entry in theirs["data"]} == {("name", "description")}
    assert "qmd" in {entry["name"] for entry in ours["data"]} & {entry["name"] for entry in theirs["data"]}
    theirs, ours = (json.loads(text) for text in tools.both("skills", "get", "qmd", "--json"))
    assert [set(entry) for entry in ours["data"]] == [set(entry) for entry in theirs["data"]] == [{"name", "content"}]
    theirs, ours = tools.both("skills", "get", "qmd")
    assert theirs.startswith("---\nname: qmd\n") and ours.startswith("---\nname: qmd\n")
    theirs, ours = (json.loads(text) for text in tools.both("skills", "get", "nope", "--json"))  # exit 1 on both
    assert ours == theirs == {"success": False, "error": "Skill not found: nope"}
    theirs, ours = tools.both("--skill")
    assert theirs.startswith("QMD Skill\n\n---\nname: qmd\n") and ours.startswith("---\nname: qmd\n")  # ours: the file itself


def test_bench_json(tools: Tools) -> None:
    """The original's `bench --json` shape; bm25 scores equal; the backends without models
    differ on purpose (zeros there, `unavailable` here: docs/compat.md's table)."""
    fixture = tools.root / "bench.json"
    fixture.write_text(json.dumps({"description": "t", "version": 1, "collection": "small", "queries": [
        {"id": "lb", "query": "load balancer", "type": "exact", "description": "", "expected_files": ["ops/deploy.md"], "expected_in_top_k": 3},
        {"id": "miss", "query": "zebra unicorn", "type": "exact", "description": "", "expected_files": ["nowhere.md"], "expected_in_top_k": 1},
    ]}))
    theirs, ours = (json.loads(text) for text in tools.both("bench", str(fixture), "--json"))
    assert set(ours) == set(theirs) == {"timestamp", "fixture", "results", "summary"}
    assert [(r["id"], r["query"], r["type"]) for r in ours["results"]] == [(r["id"], r["query"], r["type"]) for r in theirs["results"]]
    for o, t in zip(ours["results"], theirs["results"]):
        assert set(o["backends"]) == set(t["backends"])
        assert set(t["backends"]["bm25"]) <= set(o["backends"]["bm25"])
        for key in ("recall", "recall_at_5", "hits_at_k", "total_expected", "matched_files", "unmatched_expected_files"):
            assert o["backends"]["bm25"][key] == t["backends"]["bm25"][key], key
        assert "unavailable" in o["backends"]["vector"] and t["backends"]["vector"]["recall"] == 0
    assert set(theirs["summary"]["bm25"]) == set(ours["summary"]["bm25"])
    fixture.write_text(json.dumps({"collection": "nope", "queries": [{"id": "a", "query": "x", "expected_files": ["a.md"], "expected_in_top_k": 1}]}))
    tools.both("bench", str(fixture))  # exit 1 on both: no such collection
