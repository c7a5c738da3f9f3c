"""Property tests: what Slurm's commands print is parsed without ever raising.

Every parser in harness/slurm_parse.py gets arbitrary text, arbitrary JSON, and the real outputs
recorded from Slurm 22.05.8 and 24.11.5 (tests/fixtures/slurm/) cut, spliced with junk or with
fields of the wrong type. Each property also pins what the real part of the input must still give,
so a parser that returned nothing for everything would fail.
"""
from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s
from support.paths import FIXTURES

from harness import slurm_parse as sp
from harness.states import JobState

FIX = FIXTURES / "slurm"
RELEASES = ("bookworm", "trixie")
fast = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = s.recursive(s.none() | s.booleans() | s.integers() | s.floats() | s.text(max_size=20),
                          lambda kids: s.lists(kids, max_size=4) | s.dictionaries(s.text(max_size=12), kids,
                                                                                   max_size=5), max_leaves=20)
JOB_KEYS = ["job_id", "name", "job_state", "state", "state_reason", "submit_time", "eligible_time", "start_time",
            "end_time", "time", "nodes", "restart_cnt", "comment", "exit_code"]
job_like = s.dictionaries(s.sampled_from(JOB_KEYS), json_values, max_size=10)


def fixture(release: str, name: str) -> str:
    return (FIX / release / name).read_text()


def well_typed(jobs: list[sp.SlurmJob]) -> None:
    for j in jobs:
        assert isinstance(j.job_id, str) and j.job_id
        assert all(isinstance(v, str) for v in (j.name, j.native_state, j.reason, j.nodes, j.exit_code, j.comment))
        assert isinstance(j.state, JobState) and all(isinstance(f, str) for f in j.flags)
        assert all(v is None or (isinstance(v, int) and v) for v in (j.submit, j.eligible, j.start, j.end))
        assert isinstance(j.restarts, int)


@fast
@given(s.text(max_size=400))
def test_every_parser_takes_any_text(text):
    for parse in (sp.squeue_json, sp.sacct_json, sp.sacct_attempts):
        well_typed(parse(text))
    assert all(isinstance(r, dict) for r in sp.parsable(text))
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in sp.show_config(text).items())
    assert all(n["node"] for n in sp.sinfo_nodes(text))
    assert isinstance(sp.node_usable(text), bool)
    assert all(isinstance(n, int) for n in sp.parse_version(text))


@fast
@given(json_values)
def test_json_parsers_take_any_json_document(doc):
    text = json.dumps(doc)
    well_typed(sp.squeue_json(text))
    well_typed(sp.sacct_json(text))


@fast
@given(s.sampled_from(RELEASES), s.sampled_from(["squeue.json", "squeue_requeued.json", "sacct.json"]),
       s.lists(s.one_of(json_values, job_like), max_size=6), s.randoms(use_true_random=False))
def test_junk_jobs_beside_real_ones_leave_the_real_ones_as_they_were(release, name, junk, rnd):
    parse = sp.sacct_json if name.startswith("sacct") else sp.squeue_json
    real = json.loads(fixture(release, name))
    want = parse(json.dumps(real))
    assert want
    doc = copy.deepcopy(real)
    for j in junk:
        doc["jobs"].insert(rnd.randrange(len(doc["jobs"]) + 1), j)
    got = parse(json.dumps(doc))
    well_typed(got)
    real_ids = {w.job_id for w in want}
    assert [g for g in got if g.job_id in real_ids and g in want] == want


@fast
@given(s.sampled_from(RELEASES), s.sampled_from(["squeue.json", "sacct.json"]), s.data())
def test_a_real_job_with_one_field_of_the_wrong_type_is_still_read(release, name, data):
    parse = sp.sacct_json if name.startswith("sacct") else sp.squeue_json
    doc = json.loads(fixture(release, name))
    job = doc["jobs"][0]
    key = data.draw(s.sampled_from(sorted(k for k in job if k != "job_id")))
    job[key] = data.draw(json_values)
    (got, *_) = parse(json.dumps(doc))
    well_typed([got])
    assert got.job_id == str(json.loads(fixture(release, name))["jobs"][0]["job_id"])


@fast
@given(s.sampled_from(RELEASES), s.sampled_from(["squeue.json", "sacct.json", "sacct_D_X_P.txt",
                                                 "sacct_D_requeue.txt", "scontrol_show_config.txt"]),
       s.integers(min_value=0), s.text(max_size=40))
def test_real_output_cut_anywhere_and_followed_by_junk_never_raises(release, name, cut, junk):
    text = fixture(release, name)
    text = text[:cut % (len(text) + 1)] + junk
    well_typed(sp.squeue_json(text))
    well_typed(sp.sacct_json(text))
    well_typed(sp.sacct_attempts(text))
    sp.show_config(text)


@fast
@given(s.sampled_from(RELEASES), s.integers(min_value=1), s.text(alphabet=s.characters(blacklist_characters="\n\r"),
                                                               max_size=60))
def test_sacct_rows_survive_a_garbled_row_between_them(release, where, garbage):
    lines = fixture(release, "sacct_D_requeue.txt").splitlines()
    want = sp.sacct_attempts("\n".join(lines))
    at = 1 + where % len(lines)   # after the header
    got = sp.sacct_attempts("\n".join([*lines[:at], garbage, *lines[at:]]))
    well_typed(got)
    assert [g for g in got if g in want] == want


@fast
@given(s.one_of(s.text(max_size=30), s.lists(json_values, max_size=4), json_values),
       s.one_of(s.none(), s.lists(json_values, max_size=3), json_values))
def test_map_state_takes_anything(native, flags):
    assert isinstance(sp.map_state(native, flags), JobState)


@fast
@given(s.sampled_from(["idle", "mixed", "allocated", "idle*", "down*", "drained", "idle~", "allocated#",
                       "mixed-", "idle$", "down", "unknown"]), s.sampled_from(["", "\n", " \n"]))
def test_node_usable_only_when_it_answers_and_takes_jobs(state, tail):
    assert sp.node_usable(state + tail) == (state in ("idle", "mixed", "allocated", "mixed-", "idle$"))


@fast
@given(s.sampled_from(RELEASES), s.text(alphabet=s.characters(blacklist_characters="{"), max_size=40),
       s.text(max_size=40))
def test_a_message_around_the_json_document_is_skipped(release, before, after):
    text = fixture(release, "squeue.json")
    assert sp.squeue_json(before + text + after) == sp.squeue_json(text) != []
