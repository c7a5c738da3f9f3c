"""A run directory the campaign owns (pure): the owner mark it holds and the one command that removes or
remakes such a directory, run by the Slurm backend through its transport and by the Kubernetes cleanup
pod on a PersistentVolumeClaim.

The mark is the run's owner mark (spec.owner_mark: a keyed digest of the directory's path made with the
campaign's secret key, harness/owner.py), so a mark read from one directory forges no other. A directory is
removed only when its mark is that value, so one user's campaign never removes another's directory.

On a shared file system a mark alone would not do: a co-user who learnt it (the workload's argv is visible
to `ps` on its nodes) could plant a directory of their own holding it. So the command also works on what
the file system itself says: it runs with umask 077 (run directories 0700, the mark 0600), never follows a
symbolic link (the directory, its parent or the mark), makes the final component with a plain mkdir (a
directory someone made in the meantime is refused, never reused), and takes only a directory (and mark,
and parent) owned by the user it runs as. That last check is skipped when it runs as root: root owns or
may write everything, and on a Kubernetes PersistentVolumeClaim (the cleanup pod, like the run's pods,
commonly runs as root) a file's owner says which image's user wrote it, not which campaign; there the
claim's namespace is the boundary and the mark decides.
"""
from __future__ import annotations

OWNER_MARK = ".poc-owner"
MARK_NOT_OURS = 3        # someone else's directory (or a link, or made by someone else meanwhile): untouched
CANNOT_CLEAR = 4         # ours, but rm could not remove all of it: nothing may start over in it
# sh -c SCRIPT sh MODE DIR MARK, the words passed as arguments (never pasted into the script).
# A directory that exists is removed only when its owner mark is the run's mark; a campaign (a mark)
# never takes a directory without one, and outside a campaign (no mark) one with a mark is someone's
# campaign's. "prepare" then makes the directory afresh with the mark in it.
OWNED_DIR_SCRIPT = (
    'umask 077\n'
    'mode=$1 d=$2 own=$3 m="$2/' + OWNER_MARK + '" p="${2%/*}"\n'
    'not_ours() { echo "poc-owned-dir: $d: $1; nothing was touched" >&2; exit ' + str(MARK_NOT_OURS) + '; }\n'
    # root: ownership means nothing (see the module's docstring); anyone else: the file must be its own
    'mine() { [ "$(id -u)" = 0 ] || [ -O "$1" ]; }\n'
    'cannot_clear() { echo "poc-owned-dir: $d: could not remove all of it (see rm\'s words above)" >&2; '
    'exit ' + str(CANNOT_CLEAR) + '; }\n'
    '[ -L "$d" ] && not_ours "it is a symbolic link"\n'
    '[ -n "$p" ] && [ -L "$p" ] && not_ours "its parent is a symbolic link"\n'
    'if [ -e "$d" ]; then\n'
    '  [ -d "$d" ] || not_ours "it is not a directory"\n'
    '  mine "$d" || not_ours "it is owned by another user"\n'
    '  if [ -n "$own" ] || [ -e "$m" ] || [ -L "$m" ]; then\n'
    '    [ -L "$m" ] && not_ours "its owner mark is a symbolic link"\n'
    '    [ -f "$m" ] && mine "$m" || not_ours "it has no owner mark of this user\'s"\n'
    '    [ "$(cat -- "$m")" = "$own" ] || not_ours "its owner mark is not this run\'s"\n'
    '  fi\n'
    # everything but the mark first: a directory rm cannot empty keeps its mark, so it stays the run's
    # (to retry, or to remove by hand) instead of becoming a directory nobody's mark is in
    '  for e in "$d"/* "$d"/.[!.]* "$d"/..?*; do\n'
    '    if { [ -e "$e" ] || [ -L "$e" ]; } && [ "$e" != "$m" ]; then rm -rf -- "$e"; fi\n'
    '  done\n'
    '  for e in "$d"/* "$d"/.[!.]* "$d"/..?*; do\n'
    '    if { [ -e "$e" ] || [ -L "$e" ]; } && [ "$e" != "$m" ]; then cannot_clear; fi\n'
    '  done\n'
    '  rm -f -- "$m" && rmdir -- "$d" || cannot_clear\n'
    'fi\n'
    '[ "$mode" = prepare ] || exit 0\n'
    'mkdir -p -- "$p" || exit 1\n'
    '[ -L "$p" ] && not_ours "its parent is a symbolic link"\n'
    'mine "$p" || not_ours "its parent is owned by another user"\n'
    # plain mkdir: a directory (or link) someone made since the check above makes it fail, and is refused
    'if ! mkdir -- "$d" 2>/dev/null; then\n'
    '  { [ -e "$d" ] || [ -L "$d" ]; } && not_ours "someone made it in the meantime"\n'
    '  mkdir -- "$d" || exit 1\n'
    'fi\n'
    # noclobber: the mark is made, never written through something already there
    'set -C\n'
    'printf %s "$own" > "$m"\n')


def owned_dir_argv(mode: str, path: str, mark: str) -> list[str]:
    """The command that removes (mode "remove") or remakes (mode "prepare") a run directory the campaign
    owns. mark: the run's owner mark (spec.owner_mark). Exits MARK_NOT_OURS, touching nothing, when the
    directory is someone else's; CANNOT_CLEAR when rm could not remove all of it."""
    return ["sh", "-c", OWNED_DIR_SCRIPT, "sh", mode, path, mark]
