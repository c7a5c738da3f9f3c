"""Every credential shape of the corpus (tests/support/secret_shapes.py: ~100 shapes of cloud, CI, registry,
chat-bot, SaaS and database credentials, keys and tokens, each in up to seven contexts) through every path by
which the harness stores or prints something: a real Store (campaign.json, runs.jsonl records with the error's
message, tip and traceback, logs, events.jsonl, rendered files, raw.json.gz), a replay's store, and a real
`poc run` (its ERROR/TIP lines, its --log-file, the campaign.json of a --set). None survives anywhere.
scripts/secret_survivors.py prints the same counts per path."""
from __future__ import annotations

import collections

from support.paths import RESULTS
from support.secret_paths import PATHS, push_everywhere
from support.secret_shapes import CONTEXTS, SHAPES, cases

TRACE = RESULTS / "smoke-2026-12-05" / "smoke-poc" / "scale" / "verdict-64n" / "trace.jsonl"
# the shapes issue 39's review found surviving every path, the raw evidence included
REVIEW_MISSED = ("gcp api key", "gitlab runner token", "stripe secret key", "pypi token", "vault service token",
                 "google refresh token", "telegram bot token", "age secret key", "mysql -pSECRET", "mysql -p SECRET",
                 "openssl pass:", "sshpass -p")


def test_the_corpus_is_broad():
    all_cases = cases()
    names = {s.name for s in SHAPES}
    assert len(names) == len(SHAPES) >= 65
    assert set(REVIEW_MISSED) <= names
    assert {s.kind for s in SHAPES} == {"token", "named", "url", "block", "command"}
    per_shape = collections.Counter(c.shape for c in all_cases)
    assert min(per_shape.values()) >= 4, per_shape.most_common()[-5:]   # each shape in several contexts
    assert {c.context for c in all_cases} == set(CONTEXTS)
    assert len({c.core for c in all_cases}) == len(all_cases)           # a survivor names its own pair


def test_no_secret_shape_survives_any_store_path(tmp_path):
    found = push_everywhere(tmp_path, TRACE)
    assert list(found) == list(PATHS)
    left = {path: sorted({f"{c.shape} [{c.context}]" for c in survivors}) for path, survivors in found.items()
            if survivors}
    assert left == {}, left
