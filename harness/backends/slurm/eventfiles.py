"""The workload's event files on the login node, read incrementally for many runs in one command.

Every rank appends ``events-<host>-<pid>.jsonl`` under its run's events directory on the shared file
system (workloads/ddp_train.py: open mode "a", one write per line; a restarted or requeued rank has a
new pid, so a new file). One poll runs ``SCRIPT`` (POSIX sh, coreutils) on the login node once for
every run being watched: it runs ``squeue --json`` first when asked, then prints, for each event file,
only the bytes after the offset the harness has consumed so far. Job ids, directories and offsets
reach the script as arguments, never inside its text.

What the script prints, section by section, each header at the start of a line::

    @@<nonce> squeue_stderr            then squeue's stderr
    @@<nonce> squeue <rc>              then squeue's stdout
    @@<nonce> file <run> <start> <size> <name>
                                       then bytes start..size of <name> in the <run>-th directory

The nonce is random per call, so nothing an event file holds can pose as a header. Only complete
lines are consumed: a line still without its newline stays unread until the next poll; a file that
shrank (rewritten from the start) is read again from 0, and ``events.Unseen`` drops what was seen.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from ...events import Unseen, parse_lines

SCRIPT = r"""
n=$1 jobs=$2 nd=$3
shift 3
if [ -n "$jobs" ]; then
  exec 3>&1
  printf '\n@@%s squeue_stderr\n' "$n"
  out=$(squeue --json --jobs="$jobs" 2>&3)
  rc=$?
  printf '\n@@%s squeue %s\n%s' "$n" "$rc" "$out"
fi
i=0
for d in "$@"; do
  i=$((i + 1))
  [ "$i" -le "$nd" ] || break
  for f in "$d"/*.jsonl; do
    [ -f "$f" ] || continue
    case $f in *'
'*) continue ;; esac
    off=0 j=0 k=
    for a in "$@"; do
      j=$((j + 1))
      [ "$j" -gt "$nd" ] || continue
      if [ -z "$k" ]; then k=$a; else
        [ "$k" = "$f" ] && off=$a
        k=
      fi
    done
    size=$(wc -c <"$f" 2>/dev/null)
    size=$((${size:-0} + 0))
    [ "$off" -le "$size" ] 2>/dev/null || off=0
    printf '\n@@%s file %s %s %s %s\n' "$n" "$i" "$off" "$size" "${f##*/}"
    [ "$size" -gt "$off" ] && tail -c +"$((off + 1))" "$f" | head -c "$((size - off))"
  done
done
exit 0
"""
# The script's arguments: $1 nonce, $2 comma-separated job ids ("" = no squeue), $3 the number of
# directories, then the directories (1-based <run> in the output), then (path, offset) pairs.


@dataclass(frozen=True)
class Chunk:
    """What one event file holds after the offset the harness had: bytes ``start``..``size``."""
    run: int            # 0-based index into the runs the command was built for
    name: str
    start: int
    size: int
    text: str


@dataclass
class Look:
    """One poll's output, split into its sections. ``squeue`` is None when squeue was not run."""
    squeue: tuple[int, str] | None = None      # (exit code, stdout)
    squeue_stderr: str = ""
    chunks: list[Chunk] = field(default_factory=list)


class RunFiles:
    """One run's event files: how many bytes of each were consumed, and which events were handed over."""

    def __init__(self, events_dir: str):
        self.dir = events_dir.rstrip("/") or "/"
        self.offsets: dict[str, int] = {}
        self.unseen = Unseen()

    def known(self) -> list[str]:
        """(path, offset) pairs, flattened, as the script takes them."""
        out: list[str] = []
        for name, off in self.offsets.items():
            out += [f"{self.dir}/{name}", str(off)]
        return out

    def take(self, chunk: Chunk) -> list[dict]:
        """Consume the chunk's complete lines; return the events in them not handed over before."""
        text = chunk.text
        cut = text.rfind("\n") + 1
        complete, partial = text[:cut], text[cut:]
        # Offsets count bytes; the text was decoded on the way (invalid bytes replaced). Of the two
        # estimates, the smaller one never skips a byte; re-reading a few is harmless (Unseen).
        end = min(chunk.start + len(complete.encode()), chunk.size - len(partial.encode()))
        self.offsets[chunk.name] = max(chunk.start, end)
        return self.unseen(parse_lines(complete.splitlines()))


def new_nonce() -> str:
    return secrets.token_hex(8)


def argv(nonce: str, job_ids: list[str], runs: list[RunFiles]) -> list[str]:
    """The one command for a poll: squeue for ``job_ids`` (none: skip it) and every run's new bytes."""
    known = [w for r in runs for w in r.known()]
    return ["sh", "-c", SCRIPT, "sh", nonce, ",".join(job_ids), str(len(runs)), *(r.dir for r in runs), *known]


def _int(s: str) -> int | None:
    s = s.strip()
    return int(s) if s.isascii() and s.isdigit() else None


def parse(text: str, nonce: str, runs: int) -> Look:
    """Split the script's output into sections; a section that does not parse is skipped, never raised on."""
    look = Look()
    for part in (text or "").split(f"\n@@{nonce} ")[1:]:
        head, _, body = part.partition("\n")
        kind, _, rest = head.partition(" ")
        if kind == "squeue_stderr":
            look.squeue_stderr = body
        elif kind == "squeue":
            rc = _int(rest)
            look.squeue = (-1 if rc is None else rc, body)
        elif kind == "file":
            words = rest.split(" ", 3)
            if len(words) != 4 or not words[3]:
                continue
            run, start, size = (_int(w) for w in words[:3])
            if run is None or start is None or size is None or not 1 <= run <= runs:
                continue
            look.chunks.append(Chunk(run - 1, words[3], start, size, body))
    return look
