"""The real Claude Code and Codex against qmd, installed exactly as a user installs it.

Pinned clients from npm (tests/support/npm_clients.py; skipped with the reason where npm is
missing), each pointed at a fake model API on 127.0.0.1 (tests/clients/fakeapi.py) that
scripts the model's turns from the request it receives and records every request. Per client,
in one isolated HOME whose XDG dirs are NOT the defaults (the case Codex's trimmed server
environment broke): `qmd collection add`, `qmd update`, `qmd hooks install`, `qmd mcp install`
and `qmd guard install` as subprocesses of this venv's `qmd`, with the client on PATH; then
three runs of the client. The model's script: `query` the notes, `grep -rn rollback <notes>`
(the guard must deny it), the Grep tool where offered, `ls <notes>` (allowed), a text answer.
Before the third run a failing updater run raises the health flag, the way the product does.

Asserted per client: the MCP protocol version it negotiates (what the server received and
answered, recorded by the venv's `qmd` launcher that the registration runs: it tees the
server's stdin and stdout to files); qmd's tools are in the first model request of 3 of 3
runs; `query` answers with the rollback runbook; the grep is denied with the guard's reason;
the SessionStart notice is in the requests iff the flag is raised; `ls` runs. Then one run
with a qmd launcher that takes 3 s to start: the registration alone must make the client wait.

The clients: the pinned Claude Code and Codex, and with `QMD_TEST_NEWEST_CLIENTS=1` also
the newest Claude Code (tests/support/npm_clients.py `NEWEST_PINS`) as `claude-newest`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.clients.fakeapi import FakeAnthropic, FakeAPI, FakeOpenAI, Step
from tests.support.harness import GIT_ENV
from tests.support.mcp import NOTES
from tests.support.npm_clients import NEWEST_PINS, newest_wanted, npm_bin

pytestmark = pytest.mark.slow

QMD = Path(sys.executable).parent / "qmd"
QUESTION = "How do we roll back a bad deploy?"
RUNBOOK = "runbooks/deploy.md"
NOTICE = "qmd: index updates have been failing since"
GUARD_REASON = ("qmd guard: ", "grep matches characters, not meaning")
SLOW_START_S = 3  # longer than the ~2 s `claude -p` waits for a server that is not alwaysLoad
# What each client negotiates with qmd over stdio (measured 2026-12-02; docs/agents.md has the table):
# (the version its initialize asks for, the one qmd serves), or "2026-07-28" for a client that
# opens with server/discover and sends every request with the per-request _meta, no initialize.
# Claude Code 2.1.332 waits 3 s for the answer to its stdio server/discover probe (min(3000 ms,
# MCP_TIMEOUT/3)), then falls back to initialize: a first start on a loaded machine (no kept
# instructions, qmd/serve/instructions.py) can miss it, so such a run may be FALLBACK instead.
FALLBACK = ("2025-11-25", "2025-11-25")
PROTOCOL: dict[str, tuple[str, str] | str] = {"claude": ("2025-11-25", "2025-11-25"), "claude-newest": "2026-07-28", "codex": ("2025-06-18", "2025-06-18")}
LABELS = {"claude": ("claude", "clients"), "claude-newest": ("claude", "newest"), "codex": ("codex", "clients")}
_DROP = ("QMD_", "XDG_", "ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "MCP_")


@dataclass
class Box:
    """One client's isolated world: HOME, non-default XDG dirs, the notes (a git repo), env."""

    root: Path
    client: str
    label: str = ""  # "claude", "claude-newest" or "codex": which pinned client
    env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def notes(self) -> Path:
        return self.root / "notes"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def trace(self) -> Path:
        """Where the tracing launcher tees what each `qmd mcp` process received and sent."""
        return self.root / "trace"

    @property
    def launcher(self) -> Path:
        """The `qmd` the registration runs: the tracing launcher's (`tracing_venv`)."""
        return self.root / "trace-venv" / "bin" / "qmd"

    def qmd(self, *args: str, ok: bool = True, qmd: tuple[str, ...] = (str(QMD),)) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*qmd, *args], env=self.env, cwd=self.work, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if ok:
            assert proc.returncode == 0, f"qmd {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return proc

    def git(self, *args: str) -> None:
        subprocess.run(["git", "-C", str(self.notes), *args], env=self.env, check=True, capture_output=True, timeout=60)


def make_box(root: Path, label: str) -> Box:
    """A fresh world for the client `label` (a key of LABELS) under `root`; the notes are a git
    repository with one commit."""
    client, which = LABELS[label]
    if which == "newest" and not newest_wanted():
        pytest.skip(f"the newest {client} ({NEWEST_PINS}) runs only with QMD_TEST_NEWEST_CLIENTS=1")
    exe = npm_bin(client, which)  # skips the module's tests with the reason when npm is missing
    box = Box(root, client, label)
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP) and k != "INDEX_PATH"}
    env.update(GIT_ENV)
    env["HOME"] = str(box.home)
    for var in ("CONFIG", "CACHE", "STATE", "DATA"):
        env[f"XDG_{var}_HOME"] = str(root / "xdg" / var.lower())  # not HOME/.config etc.: pinned by mcp install
    env["QMD_THREADS"] = "1"
    for role in ("EMBED", "RERANK", "GENERATE"):  # no model is local: BM25 answers, and an updater run's embed fails
        env[f"QMD_{role}_MODEL"] = str(root / f"no-{role.lower()}.gguf")
    env["PATH"] = os.pathsep.join([str(exe.parent), str(QMD.parent), env.get("PATH", "/usr/bin:/bin")])
    box.env = env
    box.home.mkdir(parents=True)
    box.work.mkdir()
    for rel, text in NOTES.items():
        (box.notes / rel).parent.mkdir(parents=True, exist_ok=True)
        (box.notes / rel).write_text(text)
    box.git("init", "-q", "-b", "main")
    box.git("add", "-A")
    box.git("commit", "-q", "-m", "notes")
    return box


def install(box: Box, fake: FakeAPI, qmd: tuple[str, ...] | None = None) -> None:
    """Everything a user runs: index the notes, enroll them, register the server and the guard.
    The server registered is `qmd` (default: the tracing launcher's venv) run as `qmd mcp install`."""
    if qmd is None:
        qmd = (str(tracing_venv(box)), "-m", "qmd")
    if box.client == "codex":  # the user's own Codex config: a model provider (the fake API)
        codex = box.home / ".codex"
        codex.mkdir(exist_ok=True)
        (codex / "config.toml").write_text(
            f'model = "gpt-5"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
            f'base_url = "{fake.url}/v1"\nenv_key = "FAKE_API_KEY"\nwire_api = "responses"\n'
        )
    box.qmd("collection", "add", str(box.notes), "--name", "notes")
    box.qmd("update")
    box.qmd("hooks", "install", str(box.notes))
    box.qmd("mcp", "install", f"--{box.client}", qmd=qmd)
    box.qmd("guard", "install", f"--{box.client}")


def steps(box: Box) -> list[Step]:
    if box.client == "claude":
        return [
            Step("mcp__qmd__query", {"query": QUESTION}),
            Step("Bash", {"command": f"grep -rn rollback {box.notes}"}),
            Step("Grep", {"pattern": "rollback", "path": str(box.notes)}),
            Step("Bash", {"command": f"ls {box.notes}"}),
        ]
    return [
        Step("mcp__qmd.query", {"query": QUESTION}),
        Step("exec_command", {"cmd": f"grep -rn rollback {box.notes}"}),
        Step("exec_command", {"cmd": f"ls {box.notes}"}),
    ]


@dataclass
class Run:
    """One client run: its exit, output, and the agent's requests to the model."""

    returncode: int
    stdout: str
    stderr: str
    turns: list[dict[str, Any]]
    servers: list[ServerTrace] = field(default_factory=list)

    def first_tools(self, client: str) -> set[str]:
        if not self.turns:
            return set()
        return FakeAnthropic.tool_names(self.turns[0]) if client == "claude" else set(FakeOpenAI.tools(self.turns[0]))

    def result_of(self, client: str, step: Step) -> str | None:
        """The tool result the client sent back for `step`, as text (None: the step was not made)."""
        for body in self.turns:
            if client == "claude":
                ids = {}
                for message in body.get("messages") or []:
                    for block in message.get("content") if isinstance(message.get("content"), list) else []:
                        if block.get("type") == "tool_use" and Step(block["name"], block.get("input") or {}).key == step.key:
                            ids[block["id"]] = True
                        if block.get("type") == "tool_result" and block.get("tool_use_id") in ids:
                            content = block.get("content")
                            return content if isinstance(content, str) else json.dumps(content)
            else:
                calls = set()
                for item in body.get("input") or []:
                    if item.get("type") == "function_call":
                        name = f"{item['namespace']}.{item['name']}" if item.get("namespace") else item["name"]
                        if Step(name, json.loads(item.get("arguments") or "{}")).key == step.key:
                            calls.add(item["call_id"])
                    if item.get("type") == "function_call_output" and item.get("call_id") in calls:
                        output = item.get("output")
                        return output if isinstance(output, str) else json.dumps(output)
        return None

    def mentions(self, text: str) -> bool:
        return any(text in json.dumps(body) for body in self.turns)


@dataclass
class ServerTrace:
    """What one `qmd mcp` process started by the client received and answered."""

    received: list[dict[str, Any]]
    sent: list[dict[str, Any]]

    def protocol(self) -> tuple[str, str] | str | None:
        """(asked, served) of its initialize; the `_meta` version of a client that sent requests
        without one (2026-07-28); None when it got neither."""
        for message in self.received:
            if message.get("method") == "initialize":
                answer = next((m for m in self.sent if m.get("id") == message.get("id") and "result" in m), {})
                return str((message.get("params") or {}).get("protocolVersion")), str(answer.get("result", {}).get("protocolVersion"))
        for message in self.received:
            meta = (message.get("params") or {}).get("_meta") or {}
            if "io.modelcontextprotocol/protocolVersion" in meta:
                return str(meta["io.modelcontextprotocol/protocolVersion"])
        return None

    def client(self) -> str:
        """The clientInfo of its initialize, or of the first request's `_meta` (2026-07-28)."""
        first = next((m for m in self.received if "method" in m), {})
        params = first.get("params") or {}
        info = params.get("clientInfo") or (params.get("_meta") or {}).get("io.modelcontextprotocol/clientInfo") or {}
        return f"{info.get('name', '?')} {info.get('version', '')}".strip()

    def methods(self) -> list[str]:
        return [str(m["method"]) for m in self.received if "method" in m]

    def errors(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if "error" in m]


def read_traces(folder: Path) -> list[ServerTrace]:
    """Every server process's trace in `folder` (`<pid>.in` / `<pid>.out`, JSON lines)."""

    def lines(path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        out = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    return [ServerTrace(lines(p), lines(p.with_suffix(".out"))) for p in sorted(folder.glob("*.in"))]


def run_client(box: Box, fake: FakeAPI, *, skip_permissions: bool = False) -> Run:
    """Run the client once on QUESTION; every process it started is gone when this returns."""
    fake.clear()
    shutil.rmtree(box.trace, ignore_errors=True)
    box.trace.mkdir()
    env = dict(box.env)
    if box.client == "claude":
        env.update(ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY="dummy", DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        argv = ["claude", "-p", QUESTION, "--output-format", "stream-json", "--verbose"]
        if skip_permissions:
            argv.append("--dangerously-skip-permissions")
            if os.geteuid() == 0:
                env["IS_SANDBOX"] = "1"
        else:
            argv += ["--allowedTools", "Bash,Grep,Glob,Read,mcp__qmd"]
    else:
        env["FAKE_API_KEY"] = "dummy"
        # the guard's hooks are not trusted in this fresh HOME: run them for this invocation
        argv = ["codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", QUESTION]
    exe = shutil.which(argv[0], path=env["PATH"])
    assert exe is not None
    proc = subprocess.Popen([exe, *argv[1:]], env=env, cwd=box.work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the client's MCP servers and hooks with it
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return Run(proc.returncode, out, err, fake.agent_turns(), read_traces(box.trace))


def fake_for(box: Box) -> FakeAPI:
    return (FakeAnthropic if box.client == "claude" else FakeOpenAI)(steps(box)).start()


def raise_health_flag(box: Box) -> None:
    """As the product raises it: a commit queues a reindex, the updater's embed step fails."""
    (box.notes / "runbooks" / "incident.md").write_text("# Incident\n\nThe rollback took an hour.\n")
    box.git("add", "runbooks/incident.md")
    box.git("commit", "-q", "-m", "incident")  # the post-commit hook queues a reindex
    assert box.qmd("updater", "run", ok=False).returncode == 1
    assert box.qmd("health", ok=False).returncode == 1


@dataclass
class Session:
    box: Box
    runs: list[Run]
    raised: list[bool]


def _session(tmp_path_factory: pytest.TempPathFactory, label: str) -> Iterator[Session]:
    box = make_box(tmp_path_factory.mktemp(label), label)
    fake = fake_for(box)
    try:
        install(box, fake)
        runs, raised = [], []
        for i in range(3):
            if i == 2:
                raise_health_flag(box)
            runs.append(run_client(box, fake, skip_permissions=(i == 2)))
            raised.append(i == 2)
        yield Session(box, runs, raised)
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from _session(tmp_path_factory, "claude")


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from _session(tmp_path_factory, "codex")


@pytest.fixture(scope="module")
def claude_newest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    yield from _session(tmp_path_factory, "claude-newest")


@pytest.fixture(params=["claude", "codex", "claude-newest"])
def session(request: pytest.FixtureRequest) -> Session:
    result: Session = request.getfixturevalue(request.param.replace("-", "_"))
    return result


def _describe(run: Run) -> str:
    return f"exit {run.returncode}; stderr: {run.stderr[-1500:]}; stdout: {run.stdout[-1500:]}"


# --- what was installed -------------------------------------------------------------------


def test_the_registration_waits_and_pins_the_index(session: Session) -> None:
    box = session.box
    expected_env = {k: box.env[k] for k in box.env if k.startswith("XDG_") or k.endswith("_MODEL")}
    if box.client == "claude":
        entry = json.loads((box.home / ".claude.json").read_text())["mcpServers"]["qmd"]
        assert entry["alwaysLoad"] is True and entry["type"] == "stdio"
    else:
        import tomllib

        entry = tomllib.loads((box.home / ".codex" / "config.toml").read_text())["mcp_servers"]["qmd"]
        assert entry["required"] is True
    assert entry["command"] == str(box.launcher) and entry["args"] == ["mcp"] and entry["env"] == expected_env


# --- what each run negotiates ---------------------------------------------------------------


def test_the_client_negotiates_its_protocol_version(session: Session) -> None:
    """Each run's `qmd mcp` got the client's handshake and answered the version in PROTOCOL."""
    seen = [[(trace.client(), trace.protocol(), trace.methods()) for trace in run.servers] for run in session.runs]
    print(session.box.label, seen)  # the table in docs/agents.md (pytest -rP shows it)
    expected = PROTOCOL[session.box.label]
    assert all(run.servers for run in session.runs), seen
    for run in session.runs:
        for trace in run.servers:
            assert not trace.errors(), trace.errors()  # every request the client made was served
            assert "tools/list" in trace.methods() and "tools/call" in trace.methods(), trace.methods()
            if expected != "2026-07-28":
                assert trace.protocol() == expected, seen
            elif trace.protocol() == FALLBACK:  # the probe's 3 s ran out first: the handshake, as a 2025-11-25 client
                assert trace.methods()[:2] == ["server/discover", "initialize"], trace.methods()
            else:  # the stateless path: no handshake at all, every answer complete
                assert trace.protocol() == expected and trace.methods()[0] == "server/discover" and "initialize" not in trace.methods(), seen
                answers = [m["result"] for m in trace.sent if "result" in m]
                assert answers and all(a.get("resultType") == "complete" for a in answers), answers[:1]
    if expected == "2026-07-28":  # the second and third runs start with the instructions kept: in time
        assert any(trace.protocol() == expected for run in session.runs[1:] for trace in run.servers), seen


# --- what each run shows --------------------------------------------------------------------


def test_qmd_tools_are_in_the_first_request_of_every_run(session: Session) -> None:
    present = [any("qmd" in name for name in run.first_tools(session.box.client)) for run in session.runs]
    assert present == [True, True, True], [sorted(run.first_tools(session.box.client)) for run in session.runs]


def test_query_answers_with_the_runbook_from_the_non_default_dirs(session: Session) -> None:
    query = steps(session.box)[0]
    for run in session.runs:
        assert run.returncode == 0, _describe(run)
        result = run.result_of(session.box.client, query)
        assert result is not None, _describe(run)
        assert RUNBOOK in result and "no collections yet" not in result, result[:2000]


def test_grep_of_the_notes_is_denied_with_the_guards_reason(session: Session) -> None:
    grep = steps(session.box)[1]
    for run in session.runs:
        result = run.result_of(session.box.client, grep)
        assert result is not None, _describe(run)
        assert all(part in result for part in GUARD_REASON), result[:2000]
        assert "Flip the load balancer" not in result  # the grep never ran


def test_claude_grep_tool_is_denied_when_offered(session: Session) -> None:
    # Claude Code 2.1.197 offers Grep and Glob under --allowedTools naming them, not under
    # --dangerously-skip-permissions (search then runs through Bash, which the guard covers)
    if session.box.client != "claude":
        pytest.skip("Codex has no Grep tool: its searches arrive as shell commands")
    claude = session
    grep_tool = next(s for s in steps(claude.box) if s.tool == "Grep")
    offered = [run for run in claude.runs if "Grep" in run.first_tools("claude")]
    if not offered:
        pytest.skip(f"this Claude Code offered no Grep tool in any run: {sorted(claude.runs[0].first_tools('claude'))}")
    for run in offered:
        result = run.result_of("claude", grep_tool)
        assert result is not None and all(part in result for part in GUARD_REASON), result


def test_an_allowed_command_runs(session: Session) -> None:
    ls = steps(session.box)[-1]
    for run in session.runs:
        result = run.result_of(session.box.client, ls)
        assert result is not None, _describe(run)
        assert "runbooks" in result and "ideas.md" in result and "qmd guard" not in result, result


def test_the_session_start_notice_is_there_iff_the_flag_is_raised(session: Session) -> None:
    assert [run.mentions(NOTICE) for run in session.runs] == session.raised


# --- a server that is slow to start ----------------------------------------------------------


def launcher_venv(venv: Path, script: str) -> Path:
    """A venv whose `qmd` is the shell `script` (which ends up running the real qmd); `qmd mcp
    install` run with its python (returned) registers that launcher, as it registers any venv's."""
    real = Path(sys.prefix)
    (venv / "bin").mkdir(parents=True)
    shutil.copy(real / "pyvenv.cfg", venv / "pyvenv.cfg")
    for lib in ("lib", "lib64"):
        if (real / lib).exists():
            os.symlink(real / lib, venv / lib)
    os.symlink(sys.executable, venv / "bin" / "python")
    launcher = venv / "bin" / "qmd"
    launcher.write_text(script)
    launcher.chmod(0o755)
    return venv / "bin" / "python"


def _slow_venv(root: Path) -> Path:
    """A venv whose `qmd` takes SLOW_START_S to start its MCP server (the real qmd after that)."""
    return launcher_venv(root / "slow-venv", f'#!/bin/sh\nif [ "$1" = mcp ]; then sleep {SLOW_START_S}; fi\nexec {QMD} "$@"\n')


def tracing_venv(box: Box) -> Path:
    """A venv whose `qmd mcp` (stdio) is the real one between two `tee`s: what each server
    process received and answered lands in `box.trace/<pid>.in` and `.out`."""
    box.trace.mkdir(exist_ok=True)
    trace = str(box.trace)
    script = (
        '#!/bin/sh\nif [ "$*" = mcp ]; then\n'
        f'  tee -a "{trace}/$$.in" | "{QMD}" "$@" | tee -a "{trace}/$$.out"\n  exit 0\nfi\n'
        f'exec "{QMD}" "$@"\n'
    )
    python = launcher_venv(box.launcher.parent.parent, script)
    assert python.parent / "qmd" == box.launcher
    return python


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_the_client_waits_for_a_server_that_is_slow_to_start(client: str, tmp_path: Path) -> None:
    box = make_box(tmp_path / "box", client)  # tmp_path/home is conftest's
    python = _slow_venv(tmp_path)
    fake = fake_for(box)
    try:
        install(box, fake, qmd=(str(python), "-m", "qmd"))
        registered = json.dumps(json.loads((box.home / ".claude.json").read_text())) if client == "claude" else (box.home / ".codex" / "config.toml").read_text()
        assert str(python.parent / "qmd") in registered  # the slow launcher is what the client starts
        run = run_client(box, fake)
    finally:
        fake.stop()
    assert run.returncode == 0, _describe(run)
    assert any("qmd" in name for name in run.first_tools(client)), sorted(run.first_tools(client))
    result = run.result_of(client, steps(box)[0])
    assert result is not None and RUNBOOK in result

