"""Who owns what a campaign makes on a shared cluster: a secret key per campaign, never written where
another user can read it, and the public values derived from it.

A campaign's name repeats across users (the default `smoke-poc`), so it never proves ownership. The key
is 32 random bytes kept in `<campaign>/.owner-key` (mode 0600, beside the results, never in campaign.json,
a run record, a report or anything rendered). What leaves this machine is derived from it:

- `id`: the campaign's public owner id (16 hex digits, a one-way digest of the key). It is the
  `poc/owner` label of every Kubernetes object and the suffix of the campaign's directory on a shared
  file system. Unguessable to anyone who has not seen the campaign's objects; seeing it gives nothing
  towards the key, and copying it onto one's own object only offers that object up for deletion.
- `mark(purpose)`: a keyed digest (HMAC-SHA256) of one named thing, such as one run directory: the
  content of that directory's owner mark. A mark proves the key made it, and is good for that path
  alone: a mark read from one directory forges no other.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

KEY_FILE = ".owner-key"
ID_HEX = 16
MARK_HEX = 32
_KEY_HEX = 64


@dataclass(frozen=True)
class OwnerKey:
    secret: str = field(repr=False)   # hex; repr=False keeps it out of every log line and traceback

    @classmethod
    def new(cls) -> OwnerKey:
        return cls(secrets.token_hex(_KEY_HEX // 2))

    @property
    def id(self) -> str:
        return hashlib.sha256(b"poc-owner-id\0" + bytes.fromhex(self.secret)).hexdigest()[:ID_HEX]

    def mark(self, purpose: str) -> str:
        """The keyed digest of one named thing (e.g. `dir:<campaign dir>/<run id>`)."""
        return hmac.new(bytes.fromhex(self.secret), purpose.encode(), hashlib.sha256).hexdigest()[:MARK_HEX]

    def __str__(self) -> str:   # an f-string of the key prints what is public
        return self.id


def dir_mark(key: OwnerKey, campaign_dir: str, run_id: str) -> str:
    """The owner mark of the run directory <campaign_dir>/<run_id> (relative to the root it lies under,
    so the same directory has the same mark wherever a cluster mounts it)."""
    return key.mark(f"dir:{campaign_dir}/{run_id}")


def is_key_hex(text: str) -> bool:
    return len(text) == _KEY_HEX and all(c in "0123456789abcdef" for c in text)


def load_or_create(campaign_root: Path) -> OwnerKey:
    """The campaign's key from <campaign_root>/.owner-key, made (mode 0600, never through a link) when there
    is none. A key file that is not ours alone or not a key is refused rather than trusted or replaced."""
    path = Path(campaign_root) / KEY_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return _create(path)
    except OSError as exc:   # ELOOP: a symbolic link where the key should be
        raise KeyFileError(f"{path} cannot be read safely ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise KeyFileError(f"{path} is readable or owned by another user (mode {st.st_mode & 0o777:o}, "
                               f"uid {st.st_uid})")
        text = fh.read(_KEY_HEX + 2).decode("ascii", errors="replace").strip()
    if not is_key_hex(text):
        raise KeyFileError(f"{path} does not hold an owner key")
    return OwnerKey(text)


def _create(path: Path) -> OwnerKey:
    key = OwnerKey.new()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.secret + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return key


class KeyFileError(Exception):
    """The campaign's owner key file is unsafe or damaged (the Store turns it into a StoreError with a tip)."""
