"""`qmd completion bash|zsh|fish`: a completion script for the whole command tree.

The script is written from the typer app as it is (harness commands included), so it knows
every command, subcommand and option of this qmd: `commands()` reads, per command path
("" for qmd itself, "collection add", …), the subcommands with their help lines, the
options, what each option's value is (`value_kind`) and what each argument is
(`ARGUMENT_KINDS`). Each shell gets that table as a `case`/`switch` and a small walker that
finds the command path and the word being completed. Collection and index names are asked
for when needed, `qmd [--index=NAME] completion --values collections|indexes`
(candidates.py: reads the config, opens no database, runs without typer through fast.py).

Kinds: `collection`, `index`, `file`, `dir`, `choice:a,b,c`, `none` (free text: nothing
offered). An argument kind ending in `*` takes every remaining word.
"""

from __future__ import annotations

from typing import Annotated

import typer

from qmd.cli.candidates import KINDS, print_values
from qmd.cli.shared import FORMATS, STATE, out
from qmd.core.config import CHUNK_STRATEGIES
from qmd.core.requests import MATCHES
from qmd.llm.convert import OUT_TYPES
from qmd.llm.models import ROLES

SHELLS = ("bash", "zsh", "fish")

# Arguments, by "command path argument", that name something qmd knows (the others take
# files when their type is a path, else free text). tests/qmd/cli/test_completion.py checks
# each entry names a real argument.
ARGUMENT_KINDS = {
    "ls target": "collection",
    "collection update-cmd name": "collection",
    "collection show name": "collection",
    "collection remove name": "collection",
    "collection rename old": "collection",
    "collection include name": "collection",
    "collection exclude name": "collection",
    "collection add path": "dir",
    "init directory": "dir",
    "context add target_or_text": "dir",
    "get ref": "file",
    "completion shell": "choice:" + ",".join(SHELLS),
}

# Option values with a fixed set of words, by option (the same word in every command that has it).
OPTION_CHOICES = {
    "--format": FORMATS,
    "--match": MATCHES,
    "--chunk-strategy": CHUNK_STRATEGIES,
    "--role": ROLES,
    "--scope": ("user", "project"),  # the harness's options (qmd never imports it): the words their help names
    "--platform": ("linux", "macos"),
    "--tool": ("Bash", "Grep", "Glob"),
    "--agent": ("claude", "codex"),
    "--type": OUT_TYPES,
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typer._click import Command, Parameter

    # per command path: (subcommands with their help line, options, value kind per option, argument kinds)
    Spec = tuple[list[tuple[str, str]], list[str], dict[str, str], list[str]]


def value_kind(param: Parameter) -> str:
    """What the value of option `param` is (see the module docstring for the kinds)."""
    opts = [*param.opts, *param.secondary_opts]
    if param.name == "collection":
        return "collection"
    if "--index" in opts:
        return "index"
    if "--cwd" in opts:
        return "dir"
    for opt in opts:
        if opt in OPTION_CHOICES:
            return "choice:" + ",".join(OPTION_CHOICES[opt])
    return "file" if param.type.name == "path" else "none"


def _argument_kind(path: str, param: Parameter) -> str:
    kind = ARGUMENT_KINDS.get(f"{path} {param.name}".strip(), "file" if param.type.name == "path" else "none")
    return kind + ("*" if param.nargs == -1 else "")


def commands(root: Command) -> dict[str, Spec]:
    """The completion table of every command path under `root` (see Spec)."""
    table: dict[str, Spec] = {}
    global_values = {"--index": "index"}  # main.py moves `--index` after a command in front of it

    def visit(command: Command, path: str) -> None:
        subs = [(name, sub.get_short_help_str(200)) for name, sub in getattr(command, "commands", {}).items() if not sub.hidden]
        options: list[str] = []
        values: dict[str, str] = {} if not path else dict(global_values)
        arguments: list[str] = []
        for param in command.params:
            if param.param_type_name == "argument":
                arguments.append(_argument_kind(path, param))
            elif not getattr(param, "hidden", False):
                names = [*param.opts, *param.secondary_opts]
                options += names
                if not getattr(param, "is_flag", False) and not getattr(param, "count", False):
                    values |= {name: value_kind(param) for name in names}
        options += [o for o in ("-h", "--help") if o not in options]
        if path:
            options += [o for o in global_values if o not in options]
        table[path] = (subs, options, values, arguments)
        for name, sub in getattr(command, "commands", {}).items():
            if not sub.hidden:
                visit(sub, f"{path} {name}".strip())

    visit(root, "")
    return table


def _tree() -> dict[str, Spec]:
    import typer.main

    from qmd.cli.main import build_app

    return commands(typer.main.get_command(build_app([])))


def _sq(text: str) -> str:
    """`text` as one word in sh and zsh: single quotes, a quote inside as '\\''."""
    return "'" + text.replace("'", "'\\''") + "'"


def _fq(text: str) -> str:
    """`text` as one word in fish: single quotes, with \\ and ' escaped by a backslash."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _case_sh(table: dict[str, Spec], with_help: bool) -> str:
    lines = ["_qmd_spec() {", "    # $1: a command path ('' for qmd, 'collection add', ...): its subcommands, options, option values, arguments", '    case "$1" in']
    for path, (subs, options, values, arguments) in table.items():
        lines.append(f"    {_sq(path)})")
        lines.append(f"        _qmd_subs={_sq(' '.join(n for n, _ in subs))}")
        if with_help:
            described = " ".join(_sq(f"{n}:{h}") for n, h in subs)
            lines.append(f"        _qmd_descs=({described})")
        lines.append(f"        _qmd_opts={_sq(' '.join(options))}")
        lines.append(f"        _qmd_vals={_sq(' '.join(f'{o}={k}' for o, k in values.items()))}")
        lines.append(f"        _qmd_args={_sq(' '.join(arguments))} ;;")
    lines += ["    *) _qmd_subs='' _qmd_opts='' _qmd_vals='' _qmd_args='' ;;", "    esac", "}"]
    return "\n".join(lines) + "\n"


_BASH = r"""
_qmd_kind() {
    # the value kind of option $1 in the current command path (in _qmd_k); fails for a flag
    local entry
    for entry in $_qmd_vals; do
        if [ "${entry%%=*}" = "$1" ]; then _qmd_k="${entry#*=}"; return 0; fi
    done
    return 1
}

_qmd_reply() {
    # COMPREPLY: the lines read from stdin (file names may hold spaces)
    local line
    COMPREPLY=()
    while IFS= read -r line; do COMPREPLY+=("$line"); done
}

_qmd_values() {
    # COMPREPLY: the values of kind $1 that start with $2; $3: the --index given, $4: a prefix to keep
    local kind="$1" cur="$2" index="$3" pre="$4" words=""
    case "$kind" in
    collection) words="$(command qmd ${index:+--index=$index} completion --values collections 2>/dev/null)" ;;
    index) words="$(command qmd completion --values indexes 2>/dev/null)" ;;
    choice:*) words="${kind#choice:}"; words="${words//,/$'\n'}" ;;
    file|dir)
        if [ "$kind" = dir ]; then _qmd_reply < <(compgen -d -- "$cur"); else _qmd_reply < <(compgen -f -- "$cur"); fi
        compopt -o filenames 2>/dev/null
        return ;;
    *) COMPREPLY=(); return ;;
    esac
    # a literal prefix match, never compgen -W (which expands $(...), `...`, $VAR, ~ and {a,b}
    # in the words: a collection name in the config must not run); each reply quoted for the line
    local w q
    COMPREPLY=()
    while IFS= read -r w; do
        [ -n "$w" ] || continue
        printf -v q '%q' "$w"
        if [[ "$w" == "$cur"* || "$q" == "$cur"* ]]; then COMPREPLY+=("$pre$q"); fi
    done <<< "$words"
}

_qmd() {
    local cur="${COMP_WORDS[COMP_CWORD]}" at="" index="" word="" npos=0 rest=0 i=1 _qmd_k=""
    local _qmd_subs _qmd_opts _qmd_vals _qmd_args _qmd_descs
    COMPREPLY=()
    _qmd_spec ""
    while [ "$i" -lt "$COMP_CWORD" ]; do
        word="${COMP_WORDS[i]}"
        i=$((i + 1))
        if [ "$rest" = 1 ]; then npos=$((npos + 1)); continue; fi
        case "$word" in
        --) rest=1 ;;
        --*=*) if [ "${word%%=*}" = --index ]; then index="${word#*=}"; fi ;;
        -?*)
            if _qmd_kind "$word"; then
                if [ "${COMP_WORDS[i]}" = "=" ]; then i=$((i + 1)); fi  # bash splits --opt=value at the =
                if [ "$i" -lt "$COMP_CWORD" ]; then
                    if [ "$word" = --index ]; then index="${COMP_WORDS[i]}"; fi
                    i=$((i + 1))
                fi
            fi ;;
        *)
            if [ "$npos" = 0 ] && [[ " $_qmd_subs " == *" $word "* ]]; then
                at="${at:+$at }$word"
                _qmd_spec "$at"
            else
                npos=$((npos + 1))
            fi ;;
        esac
    done
    local prev="${COMP_WORDS[COMP_CWORD-1]}" before="${COMP_WORDS[COMP_CWORD-2]}"
    if [ "$rest" = 0 ]; then
        if [ "$cur" = "=" ] && _qmd_kind "$prev"; then _qmd_values "$_qmd_k" "" "$index" ""; return; fi
        if [ "$prev" = "=" ] && [ "$COMP_CWORD" -ge 3 ] && _qmd_kind "$before"; then _qmd_values "$_qmd_k" "$cur" "$index" ""; return; fi
        if [[ "$cur" == --*=* ]] && _qmd_kind "${cur%%=*}"; then _qmd_values "$_qmd_k" "${cur#*=}" "$index" "${cur%%=*}="; return; fi
        if [ "$COMP_CWORD" -ge 2 ] && [[ "$prev" == -?* ]] && _qmd_kind "$prev"; then _qmd_values "$_qmd_k" "$cur" "$index" ""; return; fi
        if [[ "$cur" == -* ]]; then _qmd_reply < <(compgen -W "$_qmd_opts" -- "$cur"); return; fi
        if [ "$npos" = 0 ] && [ -n "$_qmd_subs" ]; then _qmd_reply < <(compgen -W "$_qmd_subs" -- "$cur"); return; fi
    fi
    local kinds=() kind="none"
    read -r -a kinds <<< "$_qmd_args"
    if [ "$npos" -lt "${#kinds[@]}" ]; then
        kind="${kinds[npos]}"
    elif [ "${#kinds[@]}" -gt 0 ]; then
        kind="${kinds[${#kinds[@]}-1]}"
        [[ "$kind" == *"*" ]] || kind="none"
    fi
    _qmd_values "${kind%\*}" "$cur" "$index" ""
}
complete -F _qmd qmd
"""

_ZSH = r"""
_qmd_kind() {
    # the value kind of option $1 in the current command path (in _qmd_k); fails for a flag
    local entry
    for entry in ${=_qmd_vals}; do
        if [[ "${entry%%=*}" == "$1" ]]; then _qmd_k="${entry#*=}"; return 0; fi
    done
    return 1
}

_qmd_values() {
    # offer the values of kind $1; $2: the --index given
    local kind="$1" index="$2"
    case "$kind" in
    collection) compadd -- ${(f)"$(command qmd ${index:+--index=$index} completion --values collections 2>/dev/null)"} ;;
    index) compadd -- ${(f)"$(command qmd completion --values indexes 2>/dev/null)"} ;;
    choice:*) compadd -- ${(s:,:)${kind#choice:}} ;;
    file) _files ;;
    dir) _files -/ ;;
    esac
}

_qmd() {
    local cur="${words[CURRENT]}" at="" index="" word="" npos=0 rest=0 i=2 _qmd_k=""
    local _qmd_subs _qmd_opts _qmd_vals _qmd_args
    local -a _qmd_descs
    _qmd_spec ""
    while (( i < CURRENT )); do
        word="${words[i]}"
        (( i++ ))
        if (( rest )); then (( npos++ )); continue; fi
        case "$word" in
        --) rest=1 ;;
        --*=*) if [[ "${word%%=*}" == --index ]]; then index="${word#*=}"; fi ;;
        -?*)
            if _qmd_kind "$word" && (( i < CURRENT )); then
                if [[ "$word" == --index ]]; then index="${words[i]}"; fi
                (( i++ ))
            fi ;;
        *)
            if (( npos == 0 )) && [[ " $_qmd_subs " == *" $word "* ]]; then
                at="${at:+$at }$word"
                _qmd_spec "$at"
            else
                (( npos++ ))
            fi ;;
        esac
    done
    local prev="${words[CURRENT-1]}"
    if (( ! rest )); then
        if [[ "$cur" == --*=* ]] && _qmd_kind "${cur%%=*}"; then compset -P '*='; _qmd_values "$_qmd_k" "$index"; return; fi
        if (( CURRENT > 2 )) && [[ "$prev" == -?* ]] && _qmd_kind "$prev"; then _qmd_values "$_qmd_k" "$index"; return; fi
        if [[ "$cur" == -* ]]; then compadd -- ${=_qmd_opts}; return; fi
        if (( npos == 0 )) && [[ -n "$_qmd_subs" ]]; then _describe -t commands 'qmd command' _qmd_descs; return; fi
    fi
    local -a kinds
    kinds=(${=_qmd_args})
    local kind="none"
    if (( npos < ${#kinds} )); then
        kind="${kinds[npos+1]}"
    elif (( ${#kinds} )) && [[ "${kinds[-1]}" == *"*" ]]; then
        kind="${kinds[-1]}"
    fi
    _qmd_values "${kind%\*}" "$index"
}
if (( $+functions[compdef] )); then compdef _qmd qmd; fi
"""


def _switch_fish(table: dict[str, Spec]) -> str:
    lines = ["function __qmd_spec", "    # $argv[1]: a command path ('' for qmd, 'collection add', ...)", "    switch $argv[1]"]
    for path, (subs, options, values, arguments) in table.items():
        lines.append(f"        case {_fq(path)}")
        lines.append("            set -g __qmd_subs " + " ".join(_fq(n) for n, _ in subs))
        lines.append("            set -g __qmd_descs " + " ".join(_fq(h) for _, h in subs))
        lines.append("            set -g __qmd_opts " + " ".join(_fq(o) for o in options))
        lines.append("            set -g __qmd_vals " + " ".join(_fq(f"{o}={k}") for o, k in values.items()))
        lines.append("            set -g __qmd_args " + " ".join(_fq(a) for a in arguments))
    lines += ["        case '*'", "            set -g __qmd_subs; set -g __qmd_descs; set -g __qmd_opts; set -g __qmd_vals; set -g __qmd_args", "    end", "end"]
    return "\n".join(lines) + "\n"


_FISH = r"""
function __qmd_kind
    # prints the value kind of option $argv[1] in the current command path; fails for a flag
    for entry in $__qmd_vals
        set -l parts (string split -m1 = -- $entry)
        if test "$parts[1]" = "$argv[1]"
            echo $parts[2]
            return 0
        end
    end
    return 1
end

function __qmd_values
    # prints the values of kind $argv[1] for the word $argv[2]; $argv[3]: the --index given, $argv[4]: a prefix
    set -l kind $argv[1]
    set -l cur $argv[2]
    set -l index $argv[3]
    set -l pre $argv[4]
    switch $kind
        case collection
            set -l select
            test -n "$index"; and set select --index=$index
            for name in (command qmd $select completion --values collections 2>/dev/null)
                echo $pre$name
            end
        case index
            for name in (command qmd completion --values indexes 2>/dev/null)
                echo $pre$name
            end
        case 'choice:*'
            for word in (string split , -- (string replace choice: '' -- $kind))
                echo $pre$word
            end
        case file
            __fish_complete_path $cur
        case dir
            __fish_complete_directories $cur
    end
end

function __qmd_complete
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l at ''
    set -l index ''
    set -l npos 0
    set -l rest 0
    __qmd_spec ''
    set -l i 2
    set -l n (count $tokens)
    while test $i -le $n
        set -l word $tokens[$i]
        set i (math $i + 1)
        if test $rest = 1
            set npos (math $npos + 1)
            continue
        end
        switch $word
            case --
                set rest 1
            case '--*=*'
                set -l parts (string split -m1 = -- $word)
                test "$parts[1]" = --index; and set index $parts[2]
            case '-?*'
                if __qmd_kind $word >/dev/null; and test $i -le $n
                    test "$word" = --index; and set index $tokens[$i]
                    set i (math $i + 1)
                end
            case '*'
                if test $npos = 0; and contains -- $word $__qmd_subs
                    set at (string trim -- "$at $word")
                    __qmd_spec $at
                else
                    set npos (math $npos + 1)
                end
        end
    end
    if test $rest = 0
        if string match -q -- '--*=*' $cur
            set -l parts (string split -m1 = -- $cur)
            set -l kind (__qmd_kind $parts[1])
            and begin
                __qmd_values $kind $parts[2] "$index" "$parts[1]="
                return
            end
        end
        if test $n -ge 2; and string match -q -- '-?*' $tokens[$n]
            set -l kind (__qmd_kind $tokens[$n])
            and begin
                __qmd_values $kind $cur "$index" ''
                return
            end
        end
        if string match -q -- '-*' $cur
            printf '%s\n' $__qmd_opts
            return
        end
        if test $npos = 0; and test (count $__qmd_subs) -gt 0
            for k in (seq (count $__qmd_subs))
                printf '%s\t%s\n' $__qmd_subs[$k] $__qmd_descs[$k]
            end
            return
        end
    end
    set -l kind none
    set -l count (count $__qmd_args)
    if test $npos -lt $count
        set kind $__qmd_args[(math $npos + 1)]
    else if test $count -gt 0; and string match -q -r -- '\*$' $__qmd_args[-1]
        set kind $__qmd_args[-1]
    end
    __qmd_values (string trim -r -c '*' -- $kind) $cur "$index" ''
end

complete -c qmd -e
complete -c qmd -f -a '(__qmd_complete)'
"""


def completion_script(shell: str) -> str:
    """The completion script for `shell` (bash, zsh or fish), from the app's command tree."""
    table = _tree()
    if shell == "bash":
        return '# qmd completion for bash: eval "$(qmd completion bash)" in ~/.bashrc, or save it as ~/.local/share/bash-completion/completions/qmd\n' + _case_sh(table, with_help=False) + _BASH
    if shell == "zsh":
        return '#compdef qmd\n# qmd completion for zsh: eval "$(qmd completion zsh)" in ~/.zshrc, after compinit\n' + _case_sh(table, with_help=True) + _ZSH
    if shell == "fish":
        return "# qmd completion for fish: qmd completion fish > ~/.config/fish/completions/qmd.fish (or: qmd completion fish | source)\n" + _switch_fish(table) + _FISH
    raise typer.BadParameter(f"choose {', '.join(SHELLS)}", param_hint="SHELL")


def completion(
    shell: Annotated[str | None, typer.Argument(metavar="bash|zsh|fish", help="Your shell.", show_default=False)] = None,
    values: Annotated[str | None, typer.Option("--values", hidden=True, help="For the scripts: collections or indexes, one a line.")] = None,
) -> None:
    """Print a shell completion script: commands, subcommands, options, collection and index names.

    bash: eval "$(qmd completion bash)" in ~/.bashrc; zsh: the same after compinit in ~/.zshrc;
    fish: qmd completion fish > ~/.config/fish/completions/qmd.fish."""
    if values is not None:
        if values not in KINDS or shell is not None:
            raise typer.BadParameter(f"takes {' or '.join(KINDS)}, alone", param_hint="--values")
        print_values(values, STATE.index_name)
        return
    if shell is None:
        raise typer.BadParameter(f"choose {', '.join(SHELLS)}", param_hint="SHELL")
    out(completion_script(shell))
