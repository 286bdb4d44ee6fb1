-- The DuckDB side of the store: schema, ids and the accounting (the normalizer every reader feeds,
-- stage 2's, is normalize/normalize.sql, run inside the store's append). Statements are named with "-- name:" and run by auditor/store/ with bound
-- parameters; nothing here is assembled by string formatting but the {{...}} column lists, column
-- names generated from the field registry when core/sql.py loads the file (core/columns.py).

-- name: schema
CREATE TABLE IF NOT EXISTS sources (
    source_id   INTEGER PRIMARY KEY,
    name        VARCHAR NOT NULL,
    digest      VARCHAR,           -- sha256 of the bytes read; NULL for standard input
    format      VARCHAR NOT NULL,
    lines_read  BIGINT NOT NULL,
    events      BIGINT NOT NULL,   -- new events this source added to the store
    duplicates  BIGINT NOT NULL,   -- normalized lines whose event_id was already known
    quarantined BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    -- Generated from the field registry (core/columns.py): every field's column and the store's own.
{{events_table}}
);
{{events_upgrade}}
CREATE TABLE IF NOT EXISTS quarantine (
    source_id INTEGER NOT NULL,
    line      BIGINT NOT NULL,
    reason    VARCHAR NOT NULL
);
-- Revision 3: lines a vocabulary's [ignore] entries declare irrelevant, counted per source (never
-- events, never quarantined), and per source and entry: how many, the first, and up to 10 values.
ALTER TABLE sources ADD COLUMN IF NOT EXISTS ignored BIGINT DEFAULT 0;
-- Whether the source gave an event_id that looks like a derived one and is not its own event's
-- derived id (null: not known yet, a store written before; see settle_given_ids and fill_ids).
ALTER TABLE sources ADD COLUMN IF NOT EXISTS given_derived_ids BOOLEAN;
CREATE TABLE IF NOT EXISTS ignore_entries (
    source_id   INTEGER NOT NULL,
    entry_table VARCHAR NOT NULL,  -- 'kinds' (an exact value) or 'kind_patterns' (a regular expression)
    entry       VARCHAR NOT NULL,  -- as written in the vocabulary
    lines       BIGINT NOT NULL,
    first_line  BIGINT NOT NULL,
    first_obs   BIGINT NOT NULL,
    samples     VARCHAR[] NOT NULL -- distinct values, in the order first seen
);

-- name: nullable_ids
-- A store written before derived ids were left unwritten (see fill_ids) has event_id NOT NULL; run
-- only then (an ALTER writes to the store's log, and opening a store writes nothing).
ALTER TABLE events ALTER COLUMN event_id DROP NOT NULL;

-- name: macros
-- Run on every connection (temporary: a read-only store has them too). A derived event id hashes
-- every canonical field by name, absent ones included (as null), so two different events never
-- share one; the optional fields of each later revision join the hash only when one of them is
-- given, so an event without them keeps the id an earlier revision derived (core/columns.py). e
-- is a row with the events table's columns, as a struct: `SELECT derived_id_of(e) FROM events e`.
CREATE OR REPLACE TEMP MACRO derived_id_of(e) AS
    md5(to_json(struct_pack({{revision_1_id:e}}))::VARCHAR
        {{later_id:e}});
-- An event's id: the one written, or its derived one.
CREATE OR REPLACE TEMP MACRO event_id_of(e) AS coalesce(e.event_id, derived_id_of(e));
-- An id written that looks like a derived one (32 hex digits) and is not its own event's: it could
-- name another event (see fill_ids).
CREATE OR REPLACE TEMP MACRO given_derived(e) AS
    e.event_id IS NOT NULL AND regexp_full_match(e.event_id, '[0-9a-f]{32}') AND e.event_id <> derived_id_of(e);
-- The events with every id (the store writes a derived id only where detection compares ids, see
-- fill_ids): what a person or a report reads ids from. A query that reads a few keys filters the
-- events table first and takes event_id_of(e) after: DuckDB does not push a join into this.
CREATE OR REPLACE TEMP MACRO identified_events() AS TABLE
    SELECT e.* REPLACE (event_id_of(e) AS event_id) FROM events e;

-- name: quarantine_staged
-- The lines stage rejected, from the sources from $1 on: into the quarantine with their reason.
-- The count it returns is the lines quarantined.
INSERT INTO quarantine SELECT source_id, line, reason FROM events WHERE kind = '' AND reason IS NOT NULL AND source_id >= $1;

-- name: ignored_staged
-- The lines stage ignored ([ignore], SPEC rev 3), from the sources from $1 on, per source and kind
-- value: how many, and the first (its line and obs). store/ignored.py counts them under the
-- [ignore] entry each value matches; drop_rejected removes them with the rejected lines.
SELECT source_id, worker AS value, count(*) AS lines, arg_min(line, obs) AS first_line, min(obs) AS first_obs
FROM events WHERE kind = '' AND reason IS NULL AND source_id >= $1
GROUP BY source_id, worker;

-- name: drop_rejected
DELETE FROM events WHERE kind = '' AND source_id >= $1;

-- name: staged_counts_by_source
-- For a batch of small sources staged together (Store.ingest_many), before quarantine_staged:
-- the lines each staged, and how many of them it rejected.
SELECT source_id, count(*) AS lines_read, count(*) FILTER (WHERE kind = '' AND reason IS NOT NULL) AS quarantined,
       count(*) FILTER (WHERE kind = '' AND reason IS NULL) AS ignored
FROM events WHERE source_id >= $1 GROUP BY source_id;

-- name: fill_ids
-- The derived ids detection reads, written after the sources from $1 on are staged (before their
-- sources rows exist): ids break ties between events at one place of one
-- key (same workflow_key and seq, a null seq counting as one value: a key ordered by observation
-- has all its events there), and exact duplicates share their (workflow_key, seq) too. So every
-- event in such a group of more than one, over the whole store, gets its id. The groups are found
-- by a 64-bit hash of the key: a collision only writes more ids (all of them exact), never fewer.
-- Should a source give an id that looks like a derived one (32 hex digits) and is not its own
-- event's, it could name another event: then every event gets its id, now and in every later
-- append, and id_conflicts sees them all. A place is one 64-bit hash of (workflow_key, seq) (a
-- null seq hashes as one value), grouped over the new sources' events and the earlier events of
-- the keys they touch: for a store's first sources the second part is empty and costs nothing (a
-- filter of every event on the new keys was half the statement's time at ten million events, and
-- the statement grew to 9.4 s at forty million).
UPDATE events SET event_id = derived_id_of(events)
WHERE event_id IS NULL AND (
    -- a source that gave such an id, or one of a store written before, not known yet
    EXISTS (SELECT 1 FROM sources WHERE given_derived_ids IS NOT FALSE)
    OR EXISTS (SELECT 1 FROM events e WHERE e.source_id >= $1 AND given_derived(e))
    OR hash(workflow_key, seq) IN (
        SELECT place FROM (
            SELECT hash(workflow_key, seq) AS place FROM events WHERE source_id >= $1
            UNION ALL
            SELECT hash(workflow_key, seq) FROM events WHERE source_id < $1
              AND hash(workflow_key) IN (SELECT hash(workflow_key) FROM events WHERE source_id >= $1))
        GROUP BY place HAVING count(*) > 1));

-- name: settle_given_ids
-- sources.given_derived_ids of every source not known yet (those just added, or all of a store
-- written before), once its sources row exists (see given_derived and fill_ids).
UPDATE sources SET given_derived_ids = coalesce((
    SELECT bool_or(given_derived(e)) FROM events e WHERE e.source_id = sources.source_id), false)
WHERE given_derived_ids IS NULL;

-- name: drop_duplicates
-- Exact duplicates collapse: the first observation of an event (one event_id, one content) wins,
-- and an event already in the store adds nothing, which is what makes ingest idempotent.
-- Observation positions grow with the source, so both rules keep the row with the lowest obs.
-- One event_id with different content is not a duplicate: both rows stay (id_conflicts reports
-- them). A 64-bit hash of the id finds the candidates (usually none) without a hash table of
-- every id string; the ids decide. $1 the first of the sources just appended (one, or a batch of small ones).
DELETE FROM events WHERE rowid IN (
    SELECT r FROM (
        SELECT r, obs, min(obs) OVER (PARTITION BY event_id, content) AS first
        FROM (SELECT rowid AS r, obs, event_id,
                     md5(to_json(struct_pack(*COLUMNS(* EXCLUDE (event_id, ord, obs, source_id, line, ts_utc, position))))) AS content
              FROM events
              -- counted only over the ids the new sources use: no hash table of the whole store
              -- (an event without an id written has no duplicate: fill_ids wrote the id of each that could)
              WHERE event_id IS NOT NULL
                AND hash(event_id) IN (SELECT h FROM (SELECT hash(event_id) AS h FROM events WHERE event_id IS NOT NULL)
                                       WHERE h IN (SELECT hash(event_id) FROM events
                                                   WHERE source_id >= $1 AND event_id IS NOT NULL)
                                       GROUP BY h HAVING count(*) > 1)))
    WHERE obs > first);

-- name: id_conflicts
-- Event ids that name more than one event (after exact duplicates collapsed): each row is kept.
SELECT e.event_id, list((s.name, e.line, e.workflow_key, e.seq, e.kind) ORDER BY e.obs)
FROM events e JOIN sources s USING (source_id)
WHERE e.event_id IS NOT NULL
  AND hash(e.event_id) IN (SELECT hash(event_id) FROM events WHERE event_id IS NOT NULL GROUP BY 1 HAVING count(*) > 1)
GROUP BY e.event_id HAVING count(*) > 1
ORDER BY min(e.obs);

-- name: position_base
-- The last position of the events stored before source $1 (0 for none).
SELECT coalesce(max(position), 0) FROM events WHERE source_id < $1;

-- name: numbered
-- Whether the events of the sources from $1 on are numbered $2 + 1 ... $2 + n already: the stage
-- numbers each line after the events stored before, so a source whose every line is an event needs
-- no renumbering (an UPDATE of every row of a big file: half the ingest at 40M events).
SELECT count(*) = 0 OR (count(*) = count(position) AND min(position) = $2 + 1 AND max(position) = $2 + count(*))
FROM events WHERE source_id >= $1;

-- name: positions
-- Every event of the sources from $1 on (those just appended) gets its position: 1-based in global
-- observation order (the files as given, then line order), after the events already stored ($2),
-- so positions never move. The source filter keeps a big store's older row groups unread.
UPDATE events SET position = p.position
FROM (SELECT obs, $2 + row_number() OVER (ORDER BY obs) AS position FROM events WHERE source_id >= $1) p
WHERE events.obs = p.obs AND events.position IS DISTINCT FROM p.position;

-- name: observed_order
-- The order detection uses (SPEC section 4, revision 3). A workflow key with any event carrying
-- seq is ordered by seq, decided over every event stored for it: its events without seq are
-- unplaced (ord null: kept and counted, never placed). Only a key none of whose events carries
-- seq is ordered by observation, ord = position. Run after every append: a later file can give
-- an observed key its first seq.
UPDATE events SET ord = o.ord
FROM (SELECT obs, CASE WHEN k.placed THEN seq ELSE position END AS ord
      FROM events JOIN (SELECT workflow_key, bool_or(seq IS NOT NULL) AS placed FROM events
                        WHERE workflow_key IN (SELECT DISTINCT workflow_key FROM events WHERE seq IS NULL)
                        GROUP BY workflow_key) k USING (workflow_key)) o
WHERE events.obs = o.obs AND events.ord IS DISTINCT FROM o.ord;

-- name: totals
SELECT coalesce(sum(lines_read), 0), coalesce(sum(events), 0), coalesce(sum(duplicates), 0),
       coalesce(sum(quarantined), 0), coalesce(sum(ignored), 0)
FROM sources;

-- name: ignore_entries
-- Per [ignore] entry and source, in the order their first lines were read (SPEC rev 3).
SELECT i.entry_table, i.entry, i.lines, s.name, i.first_line, i.samples
FROM ignore_entries i JOIN sources s USING (source_id)
ORDER BY i.first_obs;

-- name: unplaced
-- Events without seq in keys ordered by seq (SPEC rev 3), by kind: kept, counted, never placed.
SELECT kind, count(*) FROM events WHERE ord IS NULL GROUP BY kind ORDER BY kind;

-- name: unplaced_first
-- The first $1 unplaced events, and the first of every other kind (SPEC rev 3.1: the first
-- unplaced event of each kind that blocks a pass is named, though harmless ones come before it),
-- in observation order, with where they are written.
WITH u AS (
    SELECT source_id, line, workflow_key, kind, obs, row_number() OVER (ORDER BY obs) AS n,
           row_number() OVER (PARTITION BY kind ORDER BY obs) AS k
    FROM events WHERE ord IS NULL
)
SELECT s.name, u.line, u.workflow_key, u.kind, u.obs
FROM u JOIN sources s USING (source_id)
WHERE u.n <= $1 OR u.k = 1
ORDER BY u.obs;

-- name: malformed
-- SPEC rev 3, malformed_field: per file and field, how many events had a value dropped, the
-- first of them (line, key, position), and how many of those drops lose evidence a finding
-- rule reads (section 8's expires_at on a grant, decision on a revalidation, an effect's
-- authority_id, and the ts of an effect in a key with an expiring mandate).
WITH expiring AS (
    SELECT DISTINCT workflow_key FROM events WHERE kind = 'authority_granted' AND expires_at IS NOT NULL
), d AS (
    SELECT e.source_id, e.obs, e.line, e.workflow_key, e.seq, e.position, e.kind, unnest(e.dropped) AS field
    FROM events e WHERE e.dropped IS NOT NULL
)
SELECT s.name, d.field, count(*) AS lines, arg_min(d.line, d.obs) AS first_line,
       arg_min(d.workflow_key, d.obs) AS workflow_key, arg_min(d.seq, d.obs) AS seq,
       arg_min(d.position, d.obs) AS position,
       count(*) FILTER (WHERE (d.field = 'expires_at' AND d.kind = 'authority_granted')
                           OR (d.field = 'decision' AND d.kind = 'revalidated')
                           OR (d.field = 'authority_id' AND d.kind IN ('effect_attempted', 'effect_committed'))
                           OR (d.field = 'ts' AND d.kind IN ('effect_attempted', 'effect_committed')
                               AND d.workflow_key IN (SELECT workflow_key FROM expiring))) AS lost,
       min(d.obs) AS first_obs
FROM d JOIN sources s USING (source_id)
GROUP BY d.source_id, s.name, d.field
ORDER BY d.source_id, d.field;

-- name: quarantine_reasons
-- Each distinct reason, most frequent first, with its first file and line; $1 of them.
WITH r AS (
    SELECT q.reason, count(*) OVER (PARTITION BY q.reason) AS lines, s.name, q.line, q.source_id,
           row_number() OVER (PARTITION BY q.reason ORDER BY q.source_id, q.line) AS rn
    FROM quarantine q JOIN sources s USING (source_id)
), n AS (SELECT count(DISTINCT reason) AS reasons FROM quarantine)
SELECT r.reason, r.lines, r.name, r.line, n.reasons
FROM r, n
WHERE r.rn = 1
ORDER BY r.lines DESC, r.source_id, r.line
LIMIT $1;

-- name: quarantine_first
SELECT s.name, q.line, q.reason
FROM quarantine q JOIN sources s USING (source_id)
ORDER BY q.source_id, q.line
LIMIT $1;

-- name: event_columns
-- Every event's fields as Store.events_of and events_frame read them (by name: core/rows.py).
SELECT ord AS seq, workflow_key, kind, epoch, worker, effect_key, sink, sink_result, reporter,
       step_id, ts, event_id, attrs, {{optional}}, position
FROM identified_events();
