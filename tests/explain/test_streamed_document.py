"""The streamed document (explain.stream, explain.spool) against the one the earlier path wrote.

``tests/data/streamed_mix.expected.json`` was written by main at d840a80, before explain streamed:
every finding, incident and workflow summary built as a Python object and the document encoded
from the lists. The log mixes job-log aliases, case and camel-case field names, explicit event ids
(one naming two events), derived ids, exact duplicates, an ordering conflict and double commits.
"""

from __future__ import annotations

import json

import pytest

from auditor import audit
from auditor.detect.batch import rows
from auditor.explain import spool, workflows
from auditor.render.json import render_json

from ..conftest import ROOT

LOG = ROOT / "tests" / "data" / "streamed_mix.jsonl"
WRITTEN_AT = "/work/wt-scale/tests/data/streamed_mix.jsonl"  # the path the expected document names


def _expected() -> str:
    text = LOG.with_name("streamed_mix.expected.json").read_text()
    return text.replace(WRITTEN_AT, json.dumps(str(LOG))[1:-1])  # in files, and in the details


def _document() -> str:
    text = render_json(audit([LOG]))
    return text if isinstance(text, str) else text.decode()


def test_the_streamed_document_is_the_earlier_paths():
    assert _document() == _expected()


@pytest.mark.parametrize("batch", [1, 3])
def test_spooled_to_files_and_read_in_small_batches_it_is_the_same(monkeypatch, batch):
    monkeypatch.setattr(spool, "IN_MEMORY", 0)  # every list in a temporary file from its first line
    monkeypatch.setattr(rows, "FINDING_BATCH", batch)  # finding rows a few at a time
    monkeypatch.setattr(workflows, "SMALL_BATCH", 0)  # the summaries through pyarrow, as a big audit
    text = _document()
    assert text == _expected()
    found = json.loads(text)
    assert (len(found["findings"]), len(found["incidents"]), len(found["workflows"])) == (8, 4, 9)
    assert found["input"]["duplicates"] == 22 and found["evidence_lost"]["event_id_conflicts"] == 1
