"""The guard's vocabulary: a search found in a tool call, its targets, and the decision about it."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing these at run time would load the shell parser
    from .knowledge import Folder
    from .shell import Command

# Rule names written to the block log (`-root`: a recursive search from a folder that
# contains a knowledge folder). Allow rules explain why a call was let through.
DENY_RULES = {
    "grep": "shell-search",
    "git-grep": "git-grep",
    "find-exec": "find-exec",
    "file-list": "file-list",
    "cat-pipe": "cat-pipe",
    "grep-tool": "grep-tool",
    "glob-tool": "glob-tool",
}  # and `too-complex`: a command the guard could not check in full within its deadline and budgets (guards.fallback)
ALLOW_RULES = {
    "no-knowledge": "no knowledge folders are configured (folders.json missing or empty)",
    "not-a-search": "no search command in this call",
    "outside": "the search stays in folders that hold no knowledge folder",
    "named-file": "the search reads named files only",
    "stdin": "the search reads a pipe or a redirected file, not folders",
    "listing": "lists file names only; does not read contents",
    "filtered": "its file filters exclude the notes (e.g. --include='*.py', -t py)",
    "exempt": "the path is exempted by guard.allow",
    "unresolved": "its paths depend on values the guard cannot know; allowed (fail open)",
    "unknown-tool": "the guard does not inspect this tool",
    "malformed": "the call's input is malformed; allowed (fail open)",
    "quick-check": "the guard ran out of time judging it; a quick check of its paths found no knowledge folder",
}


class Target:
    """A path a search reads: a word of its command line (`index`), or its implicit cwd (`index` None)."""

    __slots__ = ("word", "index", "path", "glob", "recursive", "pattern")

    def __init__(self, word: str | None, index: int | None, path: str | None, glob: bool = False, recursive: bool | None = None, pattern: str | None = None) -> None:
        self.word = word
        self.index = index
        self.path = path  # absolute and normalised; None when it depends on something unknowable
        self.glob = glob  # the word holds an unquoted wildcard
        self.recursive = recursive  # None: the search's own recursion applies
        self.pattern = pattern  # for a wildcard word: the absolute `glob` pattern


class Search:
    """A content search found in a tool call, in the terms the decision needs."""

    __slots__ = (
        "kind", "tool", "command", "patterns", "targets", "recursive", "stdin", "listing",
        "includes", "include_regexes", "types", "type_nots", "type_defs", "file_excludes", "excludes", "path_excludes",
        "implicit", "suffix", "follows",
    )

    def __init__(self, kind: str, tool: str, command: Command | None) -> None:
        self.kind = kind
        self.tool = tool
        self.command = command  # the command whose words narrowing rewrites
        self.patterns: list[str] = []
        self.targets: list[Target] = []
        self.recursive = False
        self.stdin = False
        self.listing = False
        self.includes: list[str] = []  # file-name globs it is limited to (empty: every file)
        self.include_regexes: list[str] = []  # ag -G
        self.types: list[str] = []  # rg/ack/Grep file types it is limited to
        self.type_nots: list[str] = []
        self.type_defs: dict[str, list[str]] = {}  # rg --type-add NAME:GLOB
        self.file_excludes: list[str] = []  # file-name globs it skips
        self.excludes: list[str] = []  # directories it skips: a name, or a path from the search root if it holds '/'
        self.path_excludes: list[str] = []  # find -path globs (matched against the path find prints)
        self.implicit = "append"  # how to name paths when the search had none: append | pathspec | after-name | none
        self.suffix = ""  # text after the rewritten command (`| xargs grep …`)
        self.follows = False  # follows the symlinks it meets while recursing (grep -R, rg -L)

    def copy(self) -> Search:
        """A shallow copy (lists shared until replaced)."""
        other = Search(self.kind, self.tool, self.command)
        for slot in Search.__slots__:
            setattr(other, slot, getattr(self, slot))
        return other


class Decision:
    """Allow or deny, the rule that decided, and what the reason text needs."""

    __slots__ = ("deny", "rule", "folder", "search", "root", "target", "detail")

    def __init__(self, deny: bool, rule: str, folder: Folder | None = None, search: Search | None = None, root: str | None = None, target: Target | None = None, detail: str = "") -> None:
        self.deny = deny
        self.rule = rule
        self.folder = folder
        self.search = search
        self.root = root  # for -root rules: the folder the search started from
        self.target = target
        self.detail = detail or ALLOW_RULES.get(rule, "")

    def __repr__(self) -> str:
        return f"Decision({'deny' if self.deny else 'allow'}, {self.rule!r}, folder={self.folder.path if self.folder else None!r})"
