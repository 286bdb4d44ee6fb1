"""The store's accounting of ignored lines (SPEC rev 3, ``[ignore]``): lines a vocabulary declares
irrelevant are counted per source (``lines read = events + duplicates + quarantined + ignored``) and
listed per ``[ignore]`` entry with their count, the first file and line, and up to 10 values, so
that nothing hides behind an entry.

The stage marks an ignored line with its kind value; here each distinct value is counted under
the ``[ignore]`` entry it matches (``KindRules.ignored_by``: exact values first, then patterns,
in file order), once per value rather than once per line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.summary import IgnoredEntry
from ..core.sql import statements
from ..normalize.vocabulary import Vocabulary

if TYPE_CHECKING:
    import duckdb

SQL = statements("store/store.sql")
#: Values kept per entry and source (the document shows 10), each cut to this many characters.
SAMPLES = 10
SAMPLE_CHARS = 200


def count_ignored(con: "duckdb.DuckDBPyConnection", first: int, vocabulary: Vocabulary) -> dict[int, int]:
    """Count the lines the stage ignored in the sources from ``first`` on into ``ignore_entries``;
    returns the lines ignored per source. Call before ``drop_rejected`` removes them."""
    rows = con.execute(SQL["ignored_staged"], [first]).fetchall()
    if not rows:
        return {}
    by_value: dict[str, tuple[str, str]] = {}
    entries: dict[tuple[int, str, str], list] = {}
    totals: dict[int, int] = {}
    for source_id, value, lines, first_line, first_obs in sorted(rows, key=lambda r: r[4]):
        entry = by_value.get(value)
        if entry is None:
            entry = by_value[value] = vocabulary.rules.ignored_by(value) or ("kinds", value)
        totals[source_id] = totals.get(source_id, 0) + lines
        have = entries.get((source_id, *entry))
        if have is None:
            entries[(source_id, *entry)] = [lines, first_line, first_obs, [value[:SAMPLE_CHARS]]]
            continue
        have[0] += lines
        if len(have[3]) < SAMPLES:
            have[3].append(value[:SAMPLE_CHARS])
    columns = list(zip(*[(sid, table, entry, n, line, obs, samples)
                         for (sid, table, entry), (n, line, obs, samples) in entries.items()]))
    con.execute("INSERT INTO ignore_entries SELECT unnest(?::INTEGER[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
                "unnest(?::BIGINT[]), unnest(?::BIGINT[]), unnest(?::BIGINT[]), unnest(?::VARCHAR[][])",
                [list(c) for c in columns])
    return totals


def ignore_summary(con: "duckdb.DuckDBPyConnection") -> list[IgnoredEntry]:
    """Every ``[ignore]`` entry that matched a line, over every source stored (``summarize``)."""
    return summarize(con.execute(SQL["ignore_entries"]).fetchall())


def summarize(rows) -> list[IgnoredEntry]:
    """Entries from rows ``(table, entry, lines, file, first line, samples)`` per source, in the
    order their first lines were read: lines summed, the first file and line, up to 10 distinct
    values. The Spark engine merges its files' rows with it too."""
    out: dict[tuple[str, str], list] = {}
    for table, entry, lines, name, first_line, samples in rows:
        have = out.get((table, entry))
        if have is None:
            out[(table, entry)] = [lines, name, first_line, list(dict.fromkeys(samples))[:SAMPLES]]
            continue
        have[0] += lines
        have[3] = list(dict.fromkeys(have[3] + list(samples)))[:SAMPLES]
    return [IgnoredEntry(table, entry, lines, name, line, samples)
            for (table, entry), (lines, name, line, samples) in out.items()]
