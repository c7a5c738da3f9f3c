"""A run directory the campaign owns (pure): the owner mark it holds and the one command that removes or
remakes such a directory, run by the Slurm backend through its transport and by the Kubernetes cleanup
pod on a PersistentVolumeClaim. The mark is the campaign's random token (spec.owner): a directory is
removed only when its mark is that token, so one user's campaign never removes another's directory.
"""
from __future__ import annotations

OWNER_MARK = ".poc-owner"
MARK_NOT_OURS = 3
# sh -c SCRIPT sh MODE DIR TOKEN, the words passed as arguments (never pasted into the script).
# A directory that exists is removed only when its owner mark is the campaign's token; a campaign
# (a token) never takes a directory without a mark, and outside a campaign (no token) one with a
# mark is someone's campaign's. "prepare" then makes the directory afresh with the mark in it.
OWNED_DIR_SCRIPT = (
    'mode=$1 d=$2 own=$3 m="$2/' + OWNER_MARK + '"\n'
    'if [ -e "$d" ]; then\n'
    '  if [ -n "$own" ] || [ -e "$m" ]; then\n'
    '    [ -f "$m" ] && [ "$(cat -- "$m")" = "$own" ] || exit ' + str(MARK_NOT_OURS) + '\n'
    '  fi\n'
    '  rm -rf -- "$d"\n'
    'fi\n'
    'if [ "$mode" = prepare ]; then mkdir -p -- "$d" && printf %s "$own" > "$m"; fi\n')


def owned_dir_argv(mode: str, path: str, owner: str) -> list[str]:
    """The command that removes (mode "remove") or remakes (mode "prepare") a run directory the campaign
    owns; exit MARK_NOT_OURS, touching nothing, when the directory is someone else's."""
    return ["sh", "-c", OWNED_DIR_SCRIPT, "sh", mode, path, owner]
