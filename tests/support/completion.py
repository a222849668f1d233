"""Ask real bash, zsh and fish what they would complete, given a completion script.

bash: the script is sourced and the function registered for the command (``complete -p``) is
called the way readline calls it, with COMP_WORDS/COMP_CWORD set; COMPREPLY is the answer.

zsh: completion only runs inside the line editor, so an interactive ``zsh -f -i`` is started on
a pseudo-terminal (zsh/zpty), with the script on ``fpath`` and ``compinit`` run; ``compadd`` is
wrapped to record every candidate that matches the word being completed, the line is typed
followed by TAB, and the widget bound to TAB prints a marker when completion has finished,
which the driver waits for.

fish: ``complete -C LINE`` prints what fish would offer at the end of LINE (``candidate<TAB>
description``), after the script is sourced into a ``fish --no-config``.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

BASH_DRIVER = r"""
source "$1"
command_name=$2
shift 1  # the words start with the command name
spec=$(complete -p "$command_name")
function_name=$(sed -E 's/.* -F ([^ ]+) .*/\1/' <<<"$spec")
COMP_WORDS=("$@")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
"$function_name" "$command_name" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""

ZSH_RC = r"""
PS1=
fpath=({fpath} $fpath)
autoload -Uz compinit && compinit -u -D
compadd() {{
  if (( ${{@[(I)-[OAD]]}} == 0 )); then   # calls that only filter or collect: pass through
    local -a __matches
    builtin compadd -O __matches "$@"
    (( $#__matches )) && print -rl -- $__matches >> {out}
  fi
  builtin compadd "$@"
}}
_gpuguard_test_complete() {{ zle complete-word; print -r -- '<<completed>>' > /dev/tty; }}
zle -N _gpuguard_test_complete
bindkey '^I' _gpuguard_test_complete
"""

ZSH_DRIVER = r"""
zmodload zsh/zpty || exit 3
zpty shell zsh -f -i
zpty -w shell "source ${(q)1}"
zpty -w -n shell "$2"$'\t'
zpty -r shell _ '*<<completed>>*'
zpty -d shell
"""


def bash_complete(bash: Path, script: Path, words: list[str], cwd: Path) -> set[str]:
    """Candidates for the last of ``words`` (use "" to complete a new word)."""
    proc = subprocess.run(
        [str(bash), "--norc", "--noprofile", "-c", BASH_DRIVER, "bash", str(script), *words],
        cwd=cwd, capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return {line for line in proc.stdout.splitlines() if line}


def zsh_complete(zsh: Path, script: Path, line: str, cwd: Path, work: Path) -> set[str]:
    """Candidates zsh offers when TAB is pressed at the end of ``line`` (``work``: a scratch folder)."""
    fpath = work / "functions"
    fpath.mkdir(parents=True, exist_ok=True)
    (fpath / f"_{line.split()[0]}").write_text(script.read_text())
    out = work / "candidates"
    out.unlink(missing_ok=True)
    rc = work / "rc.zsh"
    rc.write_text(ZSH_RC.format(fpath=shlex.quote(str(fpath)), out=shlex.quote(str(out))))
    proc = subprocess.run(
        [str(zsh), "-f", "-c", ZSH_DRIVER, "zsh", str(rc), line], cwd=cwd, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return set(out.read_text().splitlines()) if out.exists() else set()


def fish_complete(fish: Path, script: Path, line: str, cwd: Path) -> set[str]:
    """Candidates fish offers at the end of ``line``."""
    proc = subprocess.run(
        [str(fish), "--no-config", "-c", "source $argv[1]; complete -C $argv[2]", str(script), line],
        cwd=cwd, capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return {entry.split("\t", 1)[0] for entry in proc.stdout.splitlines() if entry}
