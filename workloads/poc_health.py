#!/usr/bin/env python3
"""The health gate's facts and rules, shipped beside ddp_train.py for poc_check.py (the step before training).

What a node's own tools say, read into facts: `nvidia-smi -q` (MIG and compute mode, the clocks' event or
throttle reasons, power limits, application clocks, ECC, retired pages and remapped rows), `nvidia-smi
nvlink -s`, `nvidia-smi topo -m` (each GPU's CPUs and NUMA node, the NICs beside it), `ibstat` (each HCA
port's state and rate), the kernel's modules (GPUDirect RDMA: nvidia_peermem, or the open driver's
DMA-BUF), its log (XIDs, where the job may read it) and `dcgmi diag` where the site allows it; and the
problems a node is refused for, in words a site engineer acts on. Everything but `gather` is pure.
A tool the image lacks is a fact, not a problem, except nvidia-smi on GPUs.
"""
from __future__ import annotations

import os
import re

# -------------------------------------------------------------------------- nvidia-smi -q


def parse_smi_q(text: str) -> list[dict]:
    """`nvidia-smi -q` -> one dict per GPU: {bus, fields: {"Section/Sub/Key": value}} in the tool's own words,
    read by indentation (4 spaces a level), so both the older "Clocks Throttle Reasons" and the newer
    "Clocks Event Reasons" layout, and "Power Readings" beside "GPU Power Readings", are kept as printed."""
    gpus: list[dict] = []
    path: list[tuple[int, str]] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", raw)
        if m:
            gpus.append({"bus": m.group(1), "fields": {}})
            path = []
            continue
        if not gpus:
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key, sep, value = raw.strip().partition(":")
        key = key.strip()
        while path and path[-1][0] >= indent:
            path.pop()
        if (sep and value.strip() != "") or (sep and not value.strip() and "  " in raw.strip()):
            gpus[-1]["fields"]["/".join([p for _, p in path] + [key])] = value.strip()
        else:
            path.append((indent, key))
    return gpus


def _field(f: dict, *names: str) -> str | None:
    """The first of several layouts' names a GPU's fields hold (a name may end in '*': any one key under it)."""
    for n in names:
        if n in f:
            return f[n]
    return None


def _num(text: str | None) -> float | None:
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)", text or "")
    return float(m.group(1)) if m else None


THROTTLES = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")
REASONS = ("Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Throttle Reasons Counters")


def gpu_health(g: dict) -> dict:
    """What the gate reads of one GPU's `nvidia-smi -q` fields."""
    f = g["fields"]
    active = []
    for key, val in f.items():
        section, _, name = key.rpartition("/")
        top = section.split("/")[0]
        if top in REASONS[:2] and val == "Active":
            active.append(name)
    power = {}
    for section in ("GPU Power Readings", "Power Readings"):
        cur = _num(_field(f, f"{section}/Current Power Limit", f"{section}/Power Limit",
                          f"{section}/Enforced Power Limit"))
        if cur is not None:
            power = {"limit_w": cur, "default_w": _num(_field(f, f"{section}/Default Power Limit")),
                     "max_w": _num(_field(f, f"{section}/Max Power Limit"))}
            break
    unc = [_num(f.get(k)) for k in f if (k.startswith("ECC Errors/Volatile/") and "Uncorrectable" in k)
           or k in ("ECC Errors/Volatile/Double Bit/Total",)]
    return {
        "bus": g["bus"], "name": f.get("Product Name"),
        "mig": _field(f, "MIG Mode/Current"), "compute_mode": f.get("Compute Mode"),
        "reasons_active": sorted(active),
        "power": power,
        "app_clock_mhz": _num(_field(f, "Applications Clocks/Graphics")),
        "default_app_clock_mhz": _num(_field(f, "Default Applications Clocks/Graphics")),
        "max_sm_clock_mhz": _num(_field(f, "Max Clocks/SM")),
        "ecc_volatile_uncorrected": int(sum(x for x in unc if x is not None)) if any(x is not None for x in unc)
        else None,
        "remap_pending": _field(f, "Remapped Rows/Pending"),
        "remap_failure": _field(f, "Remapped Rows/Remapping Failure Occurred"),
        "remap_uncorrectable": _num(_field(f, "Remapped Rows/Uncorrectable Error")),
        "retired_pending": _field(f, "Retired Pages/Pending Page Blacklist", "Retired Pages/Pending Page Retirement"),
    }


def gpu_problems(gpus: list[dict], min_power_ratio: float) -> list[str]:
    out = []
    for i, g in enumerate(gpus):
        name = f"GPU {i} ({g['bus']})"
        if (g.get("mig") or "").lower() == "enabled":
            out.append(f"{name} has MIG enabled: the job would get a slice of it")
        if (g.get("compute_mode") or "").lower() == "prohibited":
            out.append(f"{name} compute mode is Prohibited")
        slow = [r for r in g.get("reasons_active") or [] if r in THROTTLES]
        if slow:
            out.append(f"{name} is slowed down now: {', '.join(slow)} active")
        p = g.get("power") or {}
        if p.get("limit_w") and p.get("default_w") and p["limit_w"] < min_power_ratio * p["default_w"]:
            out.append(f"{name} power limit {p['limit_w']:g} W is below {min_power_ratio:g} of its default "
                       f"{p['default_w']:g} W")
        app, dflt = g.get("app_clock_mhz"), g.get("default_app_clock_mhz")
        if app and dflt and app < dflt:
            out.append(f"{name} application clocks are set to {app:g} MHz, below the default {dflt:g} MHz")
        if g.get("ecc_volatile_uncorrected"):
            out.append(f"{name} has {g['ecc_volatile_uncorrected']} uncorrected (volatile) ECC errors")
        if g.get("remap_failure") == "Yes":
            out.append(f"{name} had a row remapping failure: the GPU needs service")
        if g.get("remap_pending") == "Yes":
            out.append(f"{name} has a row remapping pending: it needs a GPU reset before use")
        if g.get("retired_pending") == "Yes":
            out.append(f"{name} has a page retirement pending: it needs a GPU reset before use")
    return out


# -------------------------------------------------------------------------- NVLink, topology


def parse_nvlink_status(text: str) -> list[dict]:
    """`nvidia-smi nvlink -s` -> [{gpu, links: {n: GB/s or None (inactive)}}]."""
    out: list[dict] = []
    for line in text.splitlines():
        m = re.match(r"^GPU (\d+):", line)
        if m:
            out.append({"gpu": int(m.group(1)), "links": {}})
            continue
        m = re.match(r"^\s*Link (\d+):\s*(.*)$", line)
        if m and out:
            out[-1]["links"][int(m.group(1))] = _num(m.group(2)) if "inactive" not in m.group(2).lower() else None
    return out


def nvlink_problems(status: list[dict]) -> list[str]:
    """A GPU with fewer active links (or slower ones) than its node's best: a link down or degraded."""
    active = {s["gpu"]: [v for v in s["links"].values() if v] for s in status}
    most = max((len(v) for v in active.values()), default=0)
    if not most:
        return []            # no NVLink (PCIe GPUs): nothing to compare
    fastest = max(max(v) for v in active.values() if v)
    out = []
    for gpu, links in sorted(active.items()):
        if len(links) < most:
            out.append(f"GPU {gpu} has {len(links)} of {most} NVLinks active")
        elif min(links) < 0.9 * fastest:
            out.append(f"GPU {gpu} has an NVLink at {min(links):g} GB/s, below its peers' {fastest:g} GB/s")
    return out


def parse_topo(text: str) -> dict:
    """`nvidia-smi topo -m` -> {gpus: {index: {cpus, numa, near_nics}}, nics: {NICn: device}}: each GPU's CPU
    and NUMA affinity and the NICs one PCIe switch away (PIX, PXB), named by the legend's NIC lines."""
    lines = text.splitlines()
    header = next((ln for ln in lines if "CPU Affinity" in ln), None)
    if header is None:
        return {"gpus": {}, "nics": {}}
    cols = [c.strip() for c in header.split("\t")]
    nics = {m.group(1): m.group(2) for m in (re.match(r"^\s*(NIC\d+):\s*(\S+)", ln) for ln in lines) if m}
    gpus = {}
    for ln in lines:
        cells = [c.strip() for c in ln.split("\t")]
        m = re.fullmatch(r"GPU(\d+)", cells[0]) if cells else None
        if not m or len(cells) < len(cols):
            continue
        row = dict(zip(cols, cells, strict=False))
        near = [nics.get(c, c) for c in cols if c.startswith("NIC") and row.get(c) in ("PIX", "PXB")]
        gpus[int(m.group(1))] = {"cpus": row.get("CPU Affinity"), "numa": row.get("NUMA Affinity"), "near_nics": near}
    return {"gpus": gpus, "nics": nics}


# -------------------------------------------------------------------------- InfiniBand, GPUDirect, XIDs, DCGM


def parse_ibstat(text: str) -> list[dict]:
    """`ibstat` -> one dict per port: {ca, port, state, physical_state, rate_gbps, link_layer}."""
    out: list[dict] = []
    ca = None
    for line in text.splitlines():
        m = re.match(r"^CA '([^']+)'", line)
        if m:
            ca = m.group(1)
            continue
        m = re.match(r"^\s+Port (\d+):\s*$", line)
        if m and ca:
            out.append({"ca": ca, "port": int(m.group(1))})
            continue
        key, sep, val = line.strip().partition(":")
        if sep and out and out[-1]["ca"] == ca and line.startswith(("\t\t", "        ")):
            k = {"State": "state", "Physical state": "physical_state", "Rate": "rate_gbps",
                 "Link layer": "link_layer"}.get(key.strip())
            if k:
                out[-1][k] = _num(val) if k == "rate_gbps" else val.strip()
    return out


def selected_hcas(nccl_ib_hca: str | None, cas: list[str]) -> list[str]:
    """The HCAs NCCL_IB_HCA selects among `cas` (NCCL's syntax: prefixes, "=" exact, "^" excluded, an
    optional ":port" per name); every HCA when it is unset."""
    if not nccl_ib_hca:
        return list(cas)
    spec = nccl_ib_hca.strip()
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    names = [s.split(":")[0].strip() for s in (spec[1:] if exact else spec).split(",") if s.strip()]

    def hit(ca: str) -> bool:
        return any(ca == n if exact else ca.startswith(n) for n in names)
    return [c for c in cas if hit(c) != exclude]


def ib_problems(ports: list[dict], nccl_ib_hca: str | None, min_rate_gbps: float) -> list[str]:
    out = []
    cas = sorted({p["ca"] for p in ports})
    use = set(selected_hcas(nccl_ib_hca, cas))
    spec = (nccl_ib_hca or "").lstrip("^")
    if spec.startswith("=") and not (nccl_ib_hca or "").startswith("^"):
        for name in (s.split(":")[0].strip() for s in spec[1:].split(",") if s.strip()):
            if name not in cas:
                out.append(f"HCA {name} named in NCCL_IB_HCA is not on this node (ibstat: {', '.join(cas) or 'none'})")
    for p in ports:
        if p["ca"] not in use:
            continue
        where = f"{p['ca']} port {p['port']}"
        if p.get("state") and not p["state"].startswith("Active"):
            out.append(f"{where} is {p['state']} ({p.get('physical_state') or '?'}), not Active")
        elif min_rate_gbps and (p.get("rate_gbps") or 0) < min_rate_gbps:
            out.append(f"{where} runs at {p.get('rate_gbps') or 0:g} Gb/s, below the {min_rate_gbps:g} Gb/s asked for")
    return out


def gdr_facts(modules: str, driver: str) -> dict:
    """GPUDirect RDMA readiness: nvidia_peermem (or the older nv_peer_mem) loaded, or DMA-BUF, which NCCL uses
    with the open kernel modules on Linux 5.12 and later without peermem."""
    mods = {ln.split()[0] for ln in modules.splitlines() if ln.strip()}
    peermem = bool(mods & {"nvidia_peermem", "nv_peer_mem"})
    kernel = os.uname().release if hasattr(os, "uname") else ""
    m = re.match(r"^(\d+)\.(\d+)", kernel)
    new_kernel = bool(m) and (int(m.group(1)), int(m.group(2))) >= (5, 12)
    open_driver = "Open Kernel Module" in driver
    return {"peermem": peermem, "dma_buf": new_kernel and open_driver, "kernel": kernel,
            "open_driver": open_driver, "loaded": sorted(mods & {"nvidia_peermem", "nv_peer_mem", "ib_core",
                                                                  "mlx5_core", "nvidia"})}


# XIDs that mean the GPU (or its memory, or its NVLink) is not to be trusted until serviced or reset (NVIDIA's XID
# catalogue: RESET_GPU or worse); 13, 31, 43 (an application's fault), 63 (a remap recorded) and 94 (a contained
# error, the application restarts) do not refuse a node
FATAL_XIDS = {48: "double-bit ECC error", 64: "row remapping failure", 74: "NVLink error",
              79: "GPU has fallen off the bus", 92: "high single-bit ECC rate", 95: "uncontained ECC error",
              119: "GSP RPC timeout", 120: "GSP error"}


def parse_xids(text: str) -> list[dict]:
    """Kernel log lines `NVRM: Xid (PCI:0000:18:00): 79, pid=..., ...` -> [{pci, xid}]."""
    return [{"pci": m.group(1), "xid": int(m.group(2))}
            for m in re.finditer(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)", text)]


def xid_problems(xids: list[dict]) -> list[str]:
    seen = sorted({(x["pci"], x["xid"]) for x in xids if x["xid"] in FATAL_XIDS})
    return [f"Xid {x} on the GPU at {pci} ({FATAL_XIDS[x]}) since boot" for pci, x in seen]


def parse_dcgmi_diag(text: str) -> list[dict]:
    """`dcgmi diag -r N` -> [{test, result}] for every row whose result is Pass, Fail, Warn or Skip."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.match(r"^(Pass|Fail|Warn|Skip)\b", cells[1]):
            out.append({"test": cells[0], "result": cells[1]})
    return out


def dcgm_problems(rows: list[dict], rc: int | None) -> list[str]:
    failed = [f"{r['test']} ({r['result']})" for r in rows if r["result"].startswith("Fail")]
    if failed:
        return ["dcgmi diag failed: " + "; ".join(failed)]
    if rc not in (None, 0) and not rows:
        return [f"dcgmi diag could not run (exit {rc})"]
    return []


# -------------------------------------------------------------------------- the whole node


def gather(run, gpus_per_node: int, simulated: bool, dcgm_level: int = 0) -> dict:
    """A node's health facts: run(argv) -> {argv, rc, out} runs a tool (poc_calibration.site_tool). Raw output
    is kept only where a tool failed (its tail), the parsed facts always."""
    facts: dict = {"topology_addr": os.environ.get("SLURM_TOPOLOGY_ADDR"),
                   "topology_pattern": os.environ.get("SLURM_TOPOLOGY_ADDR_PATTERN")}

    def tool(name: str, argv: list[str]) -> dict:
        res = run(argv)
        facts.setdefault("tools", {})[name] = {"argv": argv, "rc": res["rc"],
                                               **({"tail": res["out"][-1500:]} if res["rc"] not in (0, None) else {})}
        return res
    if gpus_per_node and not simulated:
        q = tool("nvidia_smi_q", ["nvidia-smi", "-q"])
        facts["gpus"] = [gpu_health(g) for g in parse_smi_q(q["out"])] if q["rc"] == 0 else None
        nv = tool("nvlink", ["nvidia-smi", "nvlink", "-s"])
        facts["nvlink"] = parse_nvlink_status(nv["out"]) if nv["rc"] == 0 else None
        topo = tool("topo", ["nvidia-smi", "topo", "-m"])
        facts["topo"] = parse_topo(topo["out"]) if topo["rc"] == 0 else None
        facts["gdr"] = gdr_facts(_read("/proc/modules"), _read("/proc/driver/nvidia/version"))
        if dcgm_level:
            d = tool("dcgmi_diag", ["dcgmi", "diag", "-r", str(dcgm_level)])
            facts["dcgm"] = {"rc": d["rc"], "rows": parse_dcgmi_diag(d["out"])}
    ib = tool("ibstat", ["ibstat"])
    facts["ib_ports"] = parse_ibstat(ib["out"]) if ib["rc"] == 0 else None
    kmsg = tool("dmesg", ["dmesg"])
    facts["xids"] = parse_xids(kmsg["out"]) if kmsg["rc"] == 0 else None
    return facts


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(1 << 20)
    except OSError:
        return ""


def node_problems(facts: dict, bars: dict) -> list[str]:
    """Why the node is refused, from its facts and the bars (gpus_per_node, simulated, min_power_ratio,
    min_ib_rate_gbps, require_gdr, nccl_ib_hca)."""
    out: list[str] = []
    want = bars.get("gpus_per_node") or 0
    if want and not bars.get("simulated"):
        rc = (facts.get("tools") or {}).get("nvidia_smi_q", {}).get("rc")
        if rc is None:
            out.append("nvidia-smi is not on the PATH in the job's image")
        elif rc != 0:
            out.append(f"nvidia-smi -q failed (exit {rc})")
        elif len(facts.get("gpus") or []) < want:
            out.append(f"{len(facts.get('gpus') or [])} of {want} GPUs visible to nvidia-smi")
        out += gpu_problems(facts.get("gpus") or [], bars.get("min_power_ratio", 0.9))
        out += nvlink_problems(facts.get("nvlink") or [])
        gdr = facts.get("gdr") or {}
        if bars.get("require_gdr") and not (gdr.get("peermem") or gdr.get("dma_buf")):
            out.append("GPUDirect RDMA is not ready: nvidia_peermem is not loaded and the driver offers no DMA-BUF "
                       f"(kernel {gdr.get('kernel') or '?'}, open kernel modules: {gdr.get('open_driver')})")
        if facts.get("dcgm") is not None:
            out += dcgm_problems(facts["dcgm"]["rows"], facts["dcgm"]["rc"])
    if facts.get("ib_ports") is not None:
        out += ib_problems(facts["ib_ports"], bars.get("nccl_ib_hca"), bars.get("min_ib_rate_gbps") or 0)
    out += xid_problems(facts.get("xids") or [])
    return out


def locality_warnings(topo: dict | None, bindings: dict[int, str]) -> list[str]:
    """Ranks whose CPUs (bindings: local rank -> cpulist) lie outside their GPU's CPU affinity: data loading
    and NCCL's proxy threads cross the socket. Warnings, not refusals: the report shows them."""
    out = []
    for lr, cpus in sorted(bindings.items()):
        aff = ((topo or {}).get("gpus") or {}).get(lr, {}).get("cpus")
        if not aff or not cpus or aff == "N/A":
            continue
        mine, near = _cpus(cpus), _cpus(aff)
        if mine and not mine <= near:
            out.append(f"local rank {lr} runs on CPUs {cpus}, {len(mine - near)} of them outside GPU {lr}'s "
                       f"affinity {aff}")
    return out


def _cpus(text: str) -> set[int]:
    got: set[int] = set()
    for raw in (text or "").split(","):
        part = raw.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            if a.isdigit() and b.isdigit():
                got.update(range(int(a), int(b) + 1))
        elif part.isdigit():
            got.add(int(part))
    return got
