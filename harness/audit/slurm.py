"""Slurm's answers, from its own records only (raw["audit"], backends/slurm/auditlog.py; the
collect-time ``sacct --json`` in raw["sacct_json"] when the post-cancel sacct is missing).

Pure: raw dict in, answers out. Each answer names its source in the words of RETENTION's keys, so
the report can say how long that evidence lasts."""
from __future__ import annotations

import json
import re

from .common import answer, iso, no

SACCT = "sacct (slurmdbd)"
SCRIPT = "sacct --batch-script (slurmdbd)"
CTLD = "slurmctld log"
_BY_UID = re.compile(r"\bby (\d+)\b")
_KILL = re.compile(r"_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=\d+ uid (\d+)")
_TRES = re.compile(r"([\w/]+(?::\w+)?)=([\d.]+)([KMGT]?)")


def parse_sacct(text: str) -> tuple[list[dict], list[dict]]:
    """sacct -P text -> (job rows, one per attempt; step rows)."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines or "|" not in lines[0]:
        return [], []
    head = lines[0].split("|")
    rows = [dict(zip(head, ln.split("|"), strict=False)) for ln in lines[1:]]
    jobs = [r for r in rows if "." not in r.get("JobID", "")]
    return jobs, [r for r in rows if "." in r.get("JobID", "")]


def tres(text: str) -> dict[str, float]:
    """AllocTRES "billing=2,cpu=2,gres/gpu=2,node=2" -> {name: count}."""
    return {k: float(v) for k, v, _unit in _TRES.findall(text or "")}


def _num(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _users(audit: dict, jobs: list[dict]) -> dict[str, str]:
    """uid -> user name: the job rows' UID/User pairs, then getent's lines."""
    out = {r["UID"]: r["User"] for r in jobs if r.get("UID") and r.get("User")}
    for ln in ((audit.get("getent") or {}).get("text") or "").splitlines():
        f = ln.split(":")
        if len(f) > 2:
            out.setdefault(f[2], f[0])
    return out


def _json_job(raw: dict) -> dict | None:
    """The collect-time sacct --json record's last attempt (a fallback when the post-cancel sacct failed)."""
    text = (raw.get("sacct_json") or {}).get("text") or ""
    try:
        jobs = json.loads(text[text.find("{"):]).get("jobs") or []
    except (ValueError, AttributeError):
        return None
    return jobs[-1] if jobs else None


def answers(raw: dict) -> dict:
    audit = raw.get("audit") or {}
    sacct = audit.get("sacct") or {}
    jobs, steps = parse_sacct(sacct.get("text", ""))
    log = audit.get("controller_log") or {}
    log_lines = log.get("lines") or [] if log.get("readable") else []
    if not jobs:
        why = (sacct.get("stderr") or sacct.get("error") or audit.get("note")
               or "sacct printed no record for the job").strip()[:300]
        return _from_json(raw, why)
    first, last = jobs[0], jobs[-1]
    users = _users(audit, jobs)
    out = {
        "who_submitted": answer(f"{first['User']} (uid {first.get('UID')}, account {first.get('Account') or '-'}, "
                                f"QOS {first.get('QOS') or '-'})", f"{SACCT}: User/UID/Account/QOS")
        if first.get("User") else no(SACCT, "sacct shows no User for the job"),
        "what": _what(audit, first),
        "when": answer(f"submitted {iso(first.get('Submit'))}, started {iso(first.get('Start'))}, "
                       f"ended {iso(last.get('End'))}" + (f" ({len(jobs)} attempts)" if len(jobs) > 1 else ""),
                       f"{SACCT}: Submit/Start/End"),
        "where": _where(jobs, steps),
        "usage": _usage(jobs),
        "outcome": answer(f"{last.get('State')} exit {last.get('ExitCode')} "
                          f"(derived {last.get('DerivedExitCode') or '-'})", f"{SACCT}: State/ExitCode"),
        "who_cancelled": _cancelled(last, users, log_lines, log),
    }
    return out


def _has_script(rec: dict) -> bool:
    """sacct --batch-script printed a script ("Batch Script for ID", a rule, then the script)."""
    body = [ln for ln in (rec.get("text") or "").strip().splitlines()[1:] if not set(ln) <= {"-"}]
    return rec.get("rc") == 0 and any(ln.strip() and ln.strip() != "NONE" for ln in body)


def _what(audit: dict, first: dict) -> dict:
    line = first.get("SubmitLine") or "?"
    user, admin = audit.get("batch_script") or {}, audit.get("batch_script_admin") or {}
    for rec, how, note in ((user, "", None),
                           (admin, f", read by {admin.get('source')}",
                            "the job's user could not read it: slurmdbd returns a script to its owner only when "
                            "it has a user record (sacctmgr association) for them")):
        if _has_script(rec):
            return answer(f"the batch script as submitted ({rec.get('lines')} lines, sha256 "
                          f"{str(rec.get('sha256'))[:16]}) by `{line}` in {first.get('WorkDir') or '?'}",
                          f"{SCRIPT}{how}; {SACCT}: SubmitLine/WorkDir", note=note)
    return no(f"{SACCT}: SubmitLine/WorkDir",
              "slurmdbd gave only the submit line and directory, not the script: it keeps scripts only with "
              "slurm.conf AccountingStoreFlags=job_script, and returns one to its owner only when it has a user "
              "record (association) for them", value=f"`{line}` in {first.get('WorkDir') or '?'}")


def _where(jobs: list[dict], steps: list[dict]) -> dict:
    nodes = [r.get("NodeList") for r in jobs if r.get("NodeList") and r["NodeList"] != "None assigned"]
    if not nodes:
        return no(f"{SACCT}: NodeList", "the job never got nodes (NodeList: None assigned)")
    step = [f"{r['JobID'].split('.', 1)[1]} on {r['NodeList']}" for r in steps if r.get("NodeList")]
    value = " then ".join(dict.fromkeys(nodes)) + (f" (steps: {', '.join(step)})" if step else "")
    return answer(value, f"{SACCT}: NodeList (job and steps)")


def _usage(jobs: list[dict]) -> dict:
    node_s = gpu_s = 0.0
    parts, gpu_seen = [], False
    for r in jobs:
        el = _num(r.get("ElapsedRaw")) or 0.0
        t = tres(r.get("AllocTRES", ""))
        n = t.get("node") or _num(r.get("NNodes")) or 0.0
        g = t.get("gres/gpu", 0.0)
        gpu_seen = gpu_seen or "gres/gpu" in t
        node_s += n * el
        gpu_s += g * el
        parts.append(f"{n:g} nodes x {el:g} s, gres/gpu={g:g}")
    value = f"node-hours {node_s / 3600:.4f}, GPU-hours {gpu_s / 3600:.4f} ({'; '.join(parts)})"
    note = None if gpu_seen else "AllocTRES names no gres/gpu (no GPUs asked, or AccountingStorageTRES lacks gres/gpu)"
    return answer(value, f"{SACCT}: AllocTRES x ElapsedRaw", note=note)


def _cancelled(last: dict, users: dict, log_lines: list[str], log: dict) -> dict:
    """The value is who (stable across runs, so the report can list the users it saw); the note has the
    controller's kill requests, with their times."""
    state = last.get("State") or ""
    kills = [(m.group(1), ln[1:24]) for ln in log_lines if (m := _KILL.search(ln))]
    by_log = "; ".join(f"kill request by uid {u} ({users.get(u, '?')}) at {t}" for u, t in kills)
    logged = f"; {CTLD}: _slurm_rpc_kill_job" if kills else ""
    unread = None if log.get("readable") else log.get("note")
    if state.startswith("CANCELLED"):
        m = _BY_UID.search(state)
        if m is None:
            return no(f"{SACCT}: State", f"{state} names no uid")
        uid = m.group(1)
        who = users.get(uid)
        notes = [f"{CTLD}: {by_log}" if by_log else unread,
                 None if who else "the uid is not in sacct's or getent's records"]
        return answer(f"{who or 'uid ' + uid} (uid {uid})", f"{SACCT}: State 'CANCELLED by {uid}'{logged}",
                      note="; ".join(n for n in notes if n) or None)
    note = f"a later cancel found it ended: {by_log}" if kills else unread
    return answer(f"nobody (it ended {state})", f"{SACCT}: State{logged}", note=note)


def _from_json(raw: dict, why: str) -> dict:
    """Answers from the collect-time sacct --json when the post-cancel sacct gave nothing."""
    j = _json_job(raw)
    src = f"{SACCT}: sacct --json at collect"
    if j is None:
        return {q: no(SACCT, f"no accounting record: {why}") for q in
                ("who_submitted", "what", "when", "where", "usage", "outcome", "who_cancelled")}
    t = j.get("time") or {}
    alloc = {(x.get("type") + ("/" + x["name"] if x.get("name") else "")): x.get("count", 0)
             for x in (j.get("tres") or {}).get("allocated") or []}
    el = float(t.get("elapsed") or 0)
    kill = j.get("kill_request_user") or ""
    state = ",".join((j.get("state") or {}).get("current") or [])
    return {
        "who_submitted": answer(f"{j.get('user')} (account {j.get('account') or '-'}, QOS {j.get('qos') or '-'})", src),
        "what": answer(f"the batch script as submitted ({len(j['script'].splitlines())} lines)", src)
        if j.get("script") else no(src, "no script in the record", value=j.get("submit_line")),
        "when": answer(f"submitted {iso(t.get('submission'))}, started {iso(t.get('start'))}, "
                       f"ended {iso(t.get('end'))}", src),
        "where": answer(j.get("nodes") or "?", src),
        "usage": answer(f"node-hours {alloc.get('node', 0) * el / 3600:.4f}, GPU-hours "
                        f"{alloc.get('gres/gpu', 0) * el / 3600:.4f}", src),
        "outcome": answer(state, src),
        "who_cancelled": no(src, f"read before the cancel; the post-cancel sacct failed: {why}",
                            value=f"kill requested by {kill}" if kill else None),
    }
