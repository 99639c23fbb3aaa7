"""The llama.cpp runtime shared by every local model role (embed, rerank, generate).

`llama_cpp` is imported here, lazily, on the first use of a model: `import qmd`, `qmd --help`,
`qmd search` and the guard never load it. A model is opened the same way for every role:
threads from `QMD_THREADS`, a context never above the model's training context (llama.cpp
aborts the whole process, uncatchably, above it) and one error path naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict

from qmd.core.errors import QmdError
from qmd.llm.gguf_info import ModelInfo, model_info

if TYPE_CHECKING:
    from llama_cpp import Llama

MAX_CONTEXT = 2048  # enough for 900-token chunks; never above the model's training context
INSTALL_HINT = "re-run ./install.sh"
LOAD_HINT = "check the file (qmd doctor) or import/download it again"


def threads() -> int:
    """`QMD_THREADS`, else every core."""
    value = os.environ.get("QMD_THREADS", "")
    return max(1, int(value)) if value.isdigit() else max(1, os.cpu_count() or 1)


def llama_cpp_module() -> ModuleType:
    """The `llama_cpp` module, or a QmdError naming the fix when it is missing or broken."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise QmdError(f"llama-cpp-python is not installed ({exc})", INSTALL_HINT) from exc
    except (OSError, RuntimeError) as exc:  # its shared library failed to load
        raise QmdError(f"llama-cpp-python is installed but cannot load its library ({exc})", INSTALL_HINT) from exc
    return llama_cpp


class LoadOptions(TypedDict, total=False):
    """What a role adds to the common `Llama(...)` arguments."""

    embedding: bool
    pooling_type: int
    n_batch: int
    n_ubatch: int
    logits_all: bool


class LlamaModel:
    """One GGUF model file opened lazily through llama.cpp; the base of every local role.

    Subclasses say how to load (`load_options`) and may finish the load (`on_load`, e.g. to
    look up token ids); `llm` is the loaded `Llama`, `close()` frees it.
    """

    def __init__(self, path: Path, n_threads: int | None = None, *, info: ModelInfo | None = None, max_context: int = MAX_CONTEXT) -> None:
        self.info: ModelInfo = info or model_info(path)
        self.n_ctx: int = self.info.usable_context(max_context)
        self._threads = n_threads or threads()
        self._running = self._threads  # the threads the loaded context evaluates on now
        self._llm: Llama | None = None

    def load_options(self) -> LoadOptions:
        """The role's extra `Llama` arguments (none by default)."""
        return {}

    def on_load(self, llm: Llama) -> None:
        """Called once after a successful load, before `llm` is handed out."""

    @property
    def llm(self) -> Llama:
        """The loaded model (loaded on first use)."""
        if self._llm is None:
            llama_cpp_module()  # a QmdError naming the fix when it is missing or broken
            from llama_cpp import Llama

            try:
                llm = Llama(
                    model_path=str(self.info.path),
                    n_ctx=self.n_ctx,
                    n_threads=self._threads,
                    n_threads_batch=self._threads,
                    verbose=False,
                    **self.load_options(),
                )
            except (ValueError, RuntimeError, OSError) as exc:
                raise QmdError(f"llama.cpp could not load {self.info.path}: {exc}", LOAD_HINT) from exc
            try:
                self.on_load(llm)
            except BaseException:
                llm.close()
                raise
            self._llm = llm
            self._running = self._threads
        return self._llm

    def load(self) -> None:
        """Load the model now rather than on its first use (a caller says so while it loads)."""
        if self._llm is None:
            _ = self.llm

    def run_on(self, n: int) -> None:
        """Evaluate on `n` threads from now on (at most the configured ones; 0: all of them).

        A short input (a search question) runs on one: llama.cpp's threads meet at a spinning
        barrier after every layer, so on a machine whose cores are busy one descheduled thread
        stalls the other (MiniLM's query embedding: 5 ms on one thread, 60-170 ms p50 and
        up to 1 s on two, beside two busy processes on 2 cores); alone, the second thread
        saves little on a few dozen tokens."""
        n = self._threads if n <= 0 else max(1, min(n, self._threads))
        if n != self._running:
            llm = self.llm
            llama_cpp_module().llama_set_n_threads(llm.ctx, n, n)
            self._running = n

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = False) -> list[int]:
        """Token ids of `text` (UTF-8, invalid characters replaced)."""
        return list(self.llm.tokenize(text.encode("utf-8", "replace"), add_bos=add_bos, special=special))

    def detokenize(self, tokens: list[int]) -> str:
        """The text of `tokens` (invalid UTF-8 replaced)."""
        return self.llm.detokenize(tokens).decode("utf-8", "replace")

    def close(self) -> None:
        """Free the loaded model, if any (it loads again on the next use)."""
        if self._llm is not None:
            self._llm.close()
            self._llm = None
