"""Container image references: the OCI distribution grammar, and the forms pyxis and apptainer take.

One place for these checks: the config model runs them when a config is loaded (`poc validate`,
`poc run`), and the renderers run them again on the image they are handed. Each returns why a
value is refused, or None.

The grammar is docker/distribution's ``reference`` (github.com/distribution/reference, regexp.go):

    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [ host [ ":" port ] "/" ] path-component [ "/" path-component ]*
    path-comp. := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" hex          (sha256: 64 hex digits, sha512: 128)

plus two rules of its parser: a name is at most 255 characters, and a first component without
"." or ":" that is not "localhost" is a path, not a registry host, so it must be lower case.
"""
from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_NAME = rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?")
NAME_MAX = 255
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
FORM = "[registry[:port]/]name[:tag][@digest], the name in lower case"
SLURM_FORMS = ("pyxis takes [user@][registry#]image[:tag] or a squashfs path; apptainer a .sif path, "
               "docker://<image reference> or library://<path>")
# Paths and the URIs apptainer pulls without a registry (library://, shub://): no shell meaning.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./~+-]+")
_PLAIN_URI = re.compile(r"(library|shub)://[A-Za-z0-9_./:+-]+")


def reference_problem(ref: str) -> str | None:
    """Why ref is not an OCI image reference, or None when it is one."""
    if not ref:
        return "is empty"
    m = REFERENCE.fullmatch(ref)
    if m is None:
        if REFERENCE.fullmatch(ref.lower()):
            return "has upper-case letters in its repository name; image names are lower case"
        return "is not an image reference"
    name, digest = m["name"], m["digest"]
    first = name.split("/")[0]
    if "/" in name and not ("." in first or ":" in first or first == "localhost") and first != first.lower():
        return f"has upper-case letters in {first!r}, which is a repository path here, not a registry host"
    if len(name) > NAME_MAX:
        return f"has a name longer than {NAME_MAX} characters"
    if digest:
        algorithm, hexpart = digest.split(":", 1)
        want = DIGEST_HEX.get(algorithm)
        if want is None:
            return f"has a digest of an unknown algorithm {algorithm!r} (sha256, sha384 or sha512)"
        if len(hexpart) != want:
            return f"has a {algorithm} digest of {len(hexpart)} hex digits, not {want}"
    return None


def slurm_image_problem(container: str, image: str | None) -> str | None:
    """Why image is not what slurm.container (pyxis, apptainer) takes, or None.

    pyxis (enroot): ``[user@][registry#]image[:tag]``, or a squashfs file path.
    apptainer: a .sif file or sandbox folder path, ``docker://``/``oras://`` + an OCI reference,
    or ``library://``/``shub://`` + a path.
    """
    if image is None or container == "none":
        return None          # no container: the value is not used
    if image.startswith(("/", "./", "../", "~")):
        return None if _PLAIN_PATH.fullmatch(image) else "is a path with characters a path does not need"
    if container == "pyxis":
        head, hash_, tail = image.partition("#")
        candidate = image
        if hash_:
            user, _, registry = head.rpartition("@")
            if user and not re.fullmatch(r"[A-Za-z0-9_.-]+", user):
                return f"has a user name {user!r} enroot does not take"
            candidate = f"{registry}/{tail}"
        problem = reference_problem(candidate)
        return None if problem is None else f"{problem} for pyxis"
    scheme, sep, rest = image.partition("://")
    if not sep:
        return None if _PLAIN_PATH.fullmatch(image) else "is a path with characters a path does not need"
    if scheme in ("docker", "oras"):
        problem = reference_problem(rest)
        return None if problem is None else f"{problem} (after {scheme}://)"
    if _PLAIN_URI.fullmatch(image):
        return None
    return "is not a path or a docker://, oras://, library:// or shub:// URI apptainer takes"
