"""CSV quarantine reasons name physical lines, after quoted newlines and skipped empty lines, and
a stray (unterminated) quote costs nothing but its own cell (SPEC rev 2, "CSV and OTLP edges")."""

from __future__ import annotations

import gzip

import pytest

from auditor import audit

HEADER = "seq,workflow_key,kind,epoch,note\n"
QUOTED = (HEADER
          + '1,k,lease_acquired,1,"two\nlines"\n'          # lines 2-3
          + "\n"                                          # line 4: empty, not a row
          + "2,k,progress,1,x\n"                          # line 5
          + "   \n"                                       # line 6: blank row, not a line read
          + '3,k,progress,seven,"a\n\nb"\n'               # lines 7-9: the bad epoch is at line 7
          + "4,k,progress,1,y\n"                          # line 10
          + "5,k,progress,,z\n")                          # line 11: epoch missing
STRAY = (HEADER
         + "1,k,lease_acquired,1,ok\n"                    # line 2
         + '2,k,progress,1,"never closed\n'               # line 3: a stray quote, kept as text
         + "3,k,progress,x,fine\n"                        # line 4
         + "4,k,progress,1,fine\n")                       # line 5


def quarantined(path) -> tuple[list, int]:
    with audit(path, fail_on="double_commit") as result:
        return [(q.line, q.reason.split(",")[0]) for q in result.input.quarantine], result.input.events


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("compress", [False, True])
def test_quoted_newlines_and_empty_lines_keep_physical_line_numbers(tmp_path, newline, compress):
    text = QUOTED.replace("\n", newline) if newline != "\n" else QUOTED
    # CRLF inside the quoted cells too: a cell's own line break is kept as written.
    path = tmp_path / ("log.csv.gz" if compress else "log.csv")
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    lines, events = quarantined(path)
    assert lines == [(7, '"epoch" is "seven"'), (11, '"epoch" is missing; every progress needs the owner epoch it '
                                                     "was produced under")]
    assert events == 3


def test_a_stray_quote_costs_only_its_own_cell(tmp_path):
    path = tmp_path / "stray.csv"
    path.write_text(STRAY)
    lines, events = quarantined(path)
    assert lines == [(4, '"epoch" is "x"')]
    assert events == 3  # rows 1, 2 (the stray quote kept as note text) and 4


def test_plain_files_are_numbered_without_a_scan(tmp_path):
    from auditor.ingest.csv_lines import record_lines
    from auditor.ingest.sources import Source

    path = tmp_path / "plain.csv"
    path.write_text(HEADER + "1,k,lease_acquired,1,a\n2,k,progress,x,b\n")
    assert record_lines(Source("plain.csv", path, path.stat().st_size)) is None
    assert quarantined(path)[0] == [(3, '"epoch" is "x"')]


# A header naming one field twice, also as a case variant: DuckDB renames the second column
# (epoch_1, Epoch_1) and its value used to land in attrs, unread, so the row passed whatever it
# held. Read as a JSON line naming the field twice: one value is read once, two values are
# ambiguous (quarantined), an empty cell is absent.
TWICE = ("seq,workflow_key,kind,epoch,{second},worker,effect_key\n"
         "1,k,lease_acquired,1,,a,\n"                     # line 2: the second cell is empty
         "2,k,lease_acquired,2,2,b,\n"                    # line 3: the same value twice
         "3,k,effect_committed,2,1,a,x\n")                # line 4: two epochs: ambiguous


@pytest.mark.parametrize("second", ["epoch", "Epoch"])
def test_a_field_named_twice_in_the_header_is_read_as_named_twice(tmp_path, second):
    path = tmp_path / "twice.csv"
    path.write_text(TWICE.format(second=second))
    with audit(path) as result:
        assert [(q.line, q.reason.split(";")[0]) for q in result.input.quarantine] == [
            (4, f'"epoch" is given twice with different values ("epoch": "2" and "{second}": "1")')]
        assert (result.input.events, result.verdict.value) == (2, "incomplete")


def test_a_parquet_column_named_twice_is_read_as_named_twice(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "twice.parquet"
    pq.write_table(pa.Table.from_arrays(
        [pa.array([1, 2, 3]), pa.array(["k"] * 3), pa.array(["lease_acquired", "lease_acquired", "effect_committed"]),
         pa.array([1, 2, 2]), pa.array([None, 2, 1]), pa.array([None, None, "x"])],
        names=["seq", "workflow_key", "kind", "epoch", "Epoch", "effect_key"]), path)
    with audit(path) as result:
        assert [(q.line, q.reason.split(";")[0]) for q in result.input.quarantine] == [
            (3, '"epoch" is given twice with different values ("epoch": 2 and "Epoch": 1)')]
        assert (result.input.events, result.verdict.value) == (2, "incomplete")
