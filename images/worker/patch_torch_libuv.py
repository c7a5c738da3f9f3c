"""Patch Debian's python3-torch (built without libuv) so TCPStore defaults to the classic server.

Upstream torch >= 2.4 constructs ``TCPStore(use_libuv=True)`` by default, and torchrun's
rendezvous code (c10d and static backends, the agent store clients) never passes the flag. Debian
builds torch without libuv, so every ``torchrun`` fails with "use_libuv was requested but PyTorch
was build without libuv support". This replaces ``torch._C._distributed_c10d.TCPStore`` with a
subclass whose ``use_libuv`` is off unless ``USE_LIBUV=1`` before torch.distributed
imports it anywhere. Idempotent; a no-op on a torch that already has the marker.
"""
import importlib.util
import pathlib
import sys

MARK = "# k8s-slurm-poc: TCPStore use_libuv default"
PATCH = f'''
{MARK}
if is_available():
    import os as _poc_os
    import torch._C._distributed_c10d as _poc_c10d

    class _PocTCPStore(_poc_c10d.TCPStore):
        __doc__ = _poc_c10d.TCPStore.__doc__

        def __init__(self, *args, **kwargs):
            # This build has no libuv, so a request for it (the default, or an explicit True from
            # code that read an unset USE_LIBUV as "1") can only fail: use the classic server.
            kwargs["use_libuv"] = _poc_os.environ.get("USE_LIBUV") == "1"
            super().__init__(*args, **kwargs)

    _PocTCPStore.__name__ = _PocTCPStore.__qualname__ = "TCPStore"
    _poc_c10d.TCPStore = _PocTCPStore
'''
ANCHOR = "if is_available() and not torch._C._c10d_init():"

spec = importlib.util.find_spec("torch")
if spec is None:
    sys.exit("torch is not installed")
import torch  # noqa: E402

if "use_libuv" not in (torch._C._distributed_c10d.TCPStore.__init__.__doc__ or ""):
    print(f"torch {torch.__version__}: TCPStore has no use_libuv; nothing to patch")
    sys.exit(0)
init = pathlib.Path(spec.origin).parent / "distributed" / "__init__.py"
text = init.read_text()
if MARK in text:
    print("already patched", init)
    sys.exit(0)
start = text.index(ANCHOR)
end = text.index("\n\n", start)  # end of the `raise` block that follows the anchor
init.write_text(text[:end] + "\n" + PATCH + text[end:])
print("patched", init)
