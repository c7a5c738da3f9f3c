"""Make Debian's python3-torch usable by torchrun. Run once at image build time; idempotent.

1. trixie (torch 2.6): built without libuv. Upstream torch >= 2.4 constructs
   ``TCPStore(use_libuv=True)`` by default, and torchrun's rendezvous code (c10d and static
   backends, the agent store clients) never passes the flag, so every ``torchrun`` fails with
   "use_libuv was requested but PyTorch was build without libuv support". This replaces
   ``torch._C._distributed_c10d.TCPStore`` with a subclass whose ``use_libuv`` is off unless
   ``USE_LIBUV=1``, before torch.distributed imports it anywhere.
2. bookworm (torch 1.13 on Python 3.11): ``Std.from_str("0")`` returns None, because Python 3.11
   no longer yields the zero flag when iterating an IntFlag, and torchrun dies with
   "'NoneType' object has no attribute 'get'" (fixed upstream in torch 2.0 the same way).
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

pkg = pathlib.Path(spec.origin).parent


def patch_libuv() -> None:
    if "use_libuv" not in (torch._C._distributed_c10d.TCPStore.__init__.__doc__ or ""):
        print(f"torch {torch.__version__}: TCPStore has no use_libuv; nothing to patch")
        return
    init = pkg / "distributed" / "__init__.py"
    text = init.read_text()
    if MARK in text:
        print("already patched", init)
        return
    start = text.index(ANCHOR)
    end = text.index("\n\n", start)  # end of the `raise` block that follows the anchor
    init.write_text(text[:end] + "\n" + PATCH + text[end:])
    print("patched TCPStore use_libuv default in", init)


STD_OLD = """            for s in Std:
                if s == v:
                    return s
"""
STD_NEW = """            return Std(v)  # k8s-slurm-poc: Python 3.11 does not iterate the zero flag
"""


def patch_std_from_str() -> None:
    api = pkg / "distributed" / "elastic" / "multiprocessing" / "api.py"
    text = api.read_text()
    if STD_OLD not in text:
        print("Std.from_str needs no patch")
        return
    api.write_text(text.replace(STD_OLD, STD_NEW))
    print("patched Std.from_str in", api)


patch_libuv()
patch_std_from_str()
