-- The DuckDB side of the store: schema, the one normalizer every reader feeds, and the
-- accounting. Statements are named with "-- name:" and run by auditor/store/ with bound
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

-- name: stage
-- One chunk of raw lines (an arrow table raw_chunk(line BIGINT, pos BIGINT, raw BLOB, bad VARCHAR)
-- and of typed records (typed_chunk, see picked; empty for a file);
-- pos numbers the records of a source uniquely, bad is a reason a reader already found) normalized
-- straight into the events table, one row per line that is not blank: an event, or a rejected
-- line (kind '', the quarantine reason in reason) that quarantine_staged moves to the quarantine
-- and drop_rejected removes before the transaction ends, or an ignored line (kind '', reason null,
-- the kind value in worker: SPEC rev 3's [ignore]) that ignored_staged counts. One statement, no staged copy: handing
-- the rows to Python as arrow and appending them again cost a tenth of the ingest
-- (bench/RESULTS.md). The count it returns is the lines it staged. Named parameters, all from normalize/vocabulary.py through store/appending.py:
-- $source_id, $keep_payloads, $careful (every line through auditor_normalize: the reference the fast
-- path is pinned to), $fast_shape (json_transform structure of the canonical fields),
-- $effect_kinds, $sink_results, $reporters, $heartbeats, $decisions,
-- $slow_shape (auditor_normalize's output), $not_utf8, $not_json (reasons), $blank (the characters
-- str.strip removes: a text value starting with one may be blank, so it goes to auditor_normalize),
-- and the vocabulary's ($fast_kinds, the kinds its entries leave as they are; $fast_ok, false when
-- a path reads into attrs) and its [ignore] pre-decision ($prefilter and the $kind_* and $ignore_*
-- lists, store/prefilter.py: a line whose one kind value an [ignore] entry matches and no kind
-- entry does is ignored without the Python normalizer, exactly when the normalizer would ignore it).
-- Speed matters here (every line of every log passes once): a line that opens an object right
-- away, names each canonical field at most once, as written in the contract, with values (none
-- null) of the right type and nothing to fix, is parsed once by json_transform (the fast path). Every
-- other line goes to auditor_normalize (normalize.normalize_line: aliases, case variants,
-- empty strings, duplicate members, --map names, and every quarantine reason), whose answers the
-- fast path reproduces exactly.
INSERT INTO events BY NAME
WITH decoded AS (
    -- trim scans the whole line, so only lines that do not open an object right away pay for it;
    -- JSON allows the whitespace (and the newline) the others keep.
    SELECT line, pos, given_bad,
           CASE WHEN starts_with(u, '{') THEN u ELSE ltrim(trim(u, E' \t\r\n'), chr(65279)) END AS s
    FROM (SELECT line, pos, bad AS given_bad, try(decode(raw)) AS u FROM raw_chunk)
), parsed AS (
    SELECT line, pos, s, given_bad,
           CASE WHEN given_bad IS NULL AND starts_with(s, '{') THEN try(json_transform(s, $fast_shape)) END AS j
    FROM decoded
    WHERE s IS NULL OR s <> '' OR given_bad IS NOT NULL
), sorted AS (
    -- A text value is taken as written when it is not blank and cannot be an object or array
    -- (json_transform hands those over as their JSON text); integers when they read back as written.
    SELECT *, coalesce(NOT $careful AND $fast_ok AND given_bad IS NULL AND j IS NOT NULL
        -- Every member is a canonical field, named once, not null: json_transform fills one field
        -- per canonical name (case-sensitive), so the count of filled fields reaches the count of
        -- members only then (list_has_all and list_distinct cost a hash table per line: 40 % of this).
        AND len(keys) = (j.seq IS NOT NULL)::INTEGER + (j.workflow_key IS NOT NULL)::INTEGER
            + (j.kind IS NOT NULL)::INTEGER + (j.epoch IS NOT NULL)::INTEGER + (j.worker IS NOT NULL)::INTEGER
            + (j.effect_key IS NOT NULL)::INTEGER + (j.sink IS NOT NULL)::INTEGER
            + (j.sink_result IS NOT NULL)::INTEGER + (j.reporter IS NOT NULL)::INTEGER
            + (j.step_id IS NOT NULL)::INTEGER + (j.ts IS NOT NULL)::INTEGER + (j.event_id IS NOT NULL)::INTEGER
            + (j.lease_until IS NOT NULL)::INTEGER + (j.heartbeat IS NOT NULL)::INTEGER
            + (j.reason IS NOT NULL)::INTEGER + (j.authority_id IS NOT NULL)::INTEGER
            + (j.expires_at IS NOT NULL)::INTEGER + (j.scope IS NOT NULL)::INTEGER
            + (j.decision IS NOT NULL)::INTEGER + (j.attrs IS NOT NULL)::INTEGER
        AND list_contains($fast_kinds, j.kind)
        -- Integers as written in decimal, or 0x-prefixed hexadecimal (SPEC revision 3.1: a zxid, 0x24)
        -- that DuckDB's cast reads in int64 range (it reads 0x24, refuses 0xFFFFFFFFFFFFFFFF).
        AND (j.seq IS NULL OR try_cast(j.seq AS BIGINT)::VARCHAR = j.seq
             OR (regexp_full_match(j.seq, '0[xX][0-9a-fA-F]+') AND try_cast(j.seq AS BIGINT) IS NOT NULL))
        AND (j.kind = 'outcome_verified' OR try_cast(j.epoch AS BIGINT)::VARCHAR = j.epoch AND NOT starts_with(j.epoch, '-')
             OR (regexp_full_match(j.epoch, '0[xX][0-9a-fA-F]+') AND try_cast(j.epoch AS BIGINT) IS NOT NULL))
        AND ((json_type(j.workflow_key) = 'VARCHAR' AND NOT contains($blank, left(j.workflow_key ->> '$', 1)))
             OR json_type(j.workflow_key) IN ('BIGINT', 'UBIGINT'))
        AND (j.effect_key IS NOT NULL OR NOT list_contains($effect_kinds, j.kind))
        AND (j.effect_key IS NULL OR (json_type(j.effect_key) = 'VARCHAR' AND NOT contains($blank, left(j.effect_key ->> '$', 1)))
             OR json_type(j.effect_key) IN ('BIGINT', 'UBIGINT'))
        AND (j.worker IS NULL OR (NOT contains($blank, left(j.worker, 1)) AND NOT starts_with(j.worker, '{') AND NOT starts_with(j.worker, '[')))
        AND (j.sink IS NULL OR (NOT contains($blank, left(j.sink, 1)) AND NOT starts_with(j.sink, '{') AND NOT starts_with(j.sink, '[')))
        AND (j.step_id IS NULL OR (NOT contains($blank, left(j.step_id, 1)) AND NOT starts_with(j.step_id, '{') AND NOT starts_with(j.step_id, '[')))
        AND (j.event_id IS NULL OR (NOT contains($blank, left(j.event_id, 1)) AND NOT starts_with(j.event_id, '{') AND NOT starts_with(j.event_id, '[')))
        AND (j.sink_result IS NULL OR list_contains($sink_results, j.sink_result))
        AND (j.reporter IS NULL OR list_contains($reporters, j.reporter))
        AND (j.ts IS NULL OR try_cast(j.ts AS TIMESTAMPTZ) IS NOT NULL)
        AND (j.lease_until IS NULL OR try_cast(j.lease_until AS TIMESTAMPTZ) IS NOT NULL)
        AND (j.expires_at IS NULL OR try_cast(j.expires_at AS TIMESTAMPTZ) IS NOT NULL)
        AND (j.heartbeat IS NULL OR list_contains($heartbeats, j.heartbeat))
        AND (j.decision IS NULL OR list_contains($decisions, j.decision))
        AND (j.authority_id IS NULL OR (json_type(j.authority_id) = 'VARCHAR' AND NOT contains($blank, left(j.authority_id ->> '$', 1)))
             OR json_type(j.authority_id) IN ('BIGINT', 'UBIGINT'))
        AND (j.reason IS NULL OR (NOT contains($blank, left(j.reason, 1)) AND NOT starts_with(j.reason, '{') AND NOT starts_with(j.reason, '[')))
        AND (j.scope IS NULL OR (NOT contains($blank, left(j.scope, 1)) AND NOT starts_with(j.scope, '{') AND NOT starts_with(j.scope, '['))), false) AS fast
    FROM (SELECT *, CASE WHEN j IS NOT NULL THEN json_keys(s) END AS keys FROM parsed)
), relevant AS (
    -- SPEC rev 3, [ignore]: the members that could give the kind (any spelling whose letters and
    -- digits, lower case, are those of a kind name, path or container: a superset of what the
    -- normalizer reads as one). Only a line with exactly one, an ASCII key, is decided here.
    SELECT *, CASE WHEN $prefilter AND NOT fast AND j IS NOT NULL
                        AND strlen(array_to_string(keys, '')) = length(array_to_string(keys, ''))
                   THEN list_filter(keys, lambda k: list_contains($kind_relevant,
                                                                  lower(regexp_replace(k, '[^A-Za-z0-9]', '', 'g'))))
              END AS rel
    FROM sorted
), valued AS (
    -- The one kind value: a JSON string under a flat spelling ($kind_flat, read at $kind_flat_paths),
    -- or under the one path into the container $kind_container whose only relevant member is $kind_leaf.
    SELECT *, CASE WHEN len(rel) = 1 THEN CASE
                  WHEN list_contains($kind_flat, rel[1])
                       AND json_type(s, $kind_flat_paths)[list_position($kind_flat, rel[1])] = 'VARCHAR'
                  THEN json_extract_string(s, $kind_flat_paths)[list_position($kind_flat, rel[1])]
                  WHEN $kind_nested AND rel[1] = $kind_container AND json_type(s, $kind_container_path) = 'OBJECT'
                       AND len(list_filter(json_keys(s, $kind_container_path), lambda k:
                               strlen(k) <> length(k)
                               OR lower(regexp_replace(k, '[^A-Za-z0-9]', '', 'g')) = $kind_leaf_letters)) = 1
                       AND list_contains(json_keys(s, $kind_container_path), $kind_leaf)
                       AND json_type(s, $kind_path) = 'VARCHAR'
                  THEN s ->> $kind_path END END AS v
    FROM relevant
), decided AS (
    -- Ignored here only where the normalizer ignores it: printable ASCII (re and RE2 agree there),
    -- not blank, no exact kind name as written, by name_key or by its last dotted part, no kind
    -- pattern, and an [ignore] value (by name_key) or pattern.
    SELECT * EXCLUDE (rel, v, nk), CASE WHEN nk IS NOT NULL
                AND NOT list_contains($kind_keys, v) AND NOT list_contains($kind_keys, nk)
                AND NOT list_contains($kind_keys, regexp_extract(nk, '[^.]*$'))
                AND NOT coalesce(regexp_matches(v, $kind_union, 'i'), false)
                AND (list_contains($ignore_keys, nk) OR coalesce(regexp_matches(v, $ignore_union, 'i'), false))
           THEN v END AS skip
    FROM (SELECT *, CASE WHEN v <> '' AND NOT starts_with(v, ' ') AND NOT regexp_matches(v, '[^\x20-\x7e]')
                         THEN lower(regexp_replace(trim(v), '([a-z0-9])([A-Z])', '\1_\2', 'g')) END AS nk
          FROM valued)
), norm AS (
    SELECT line, pos, fast, j, skip,
           CASE WHEN given_bad IS NOT NULL THEN given_bad WHEN s IS NULL THEN $not_utf8
                WHEN NOT fast AND NOT json_valid(s) THEN $not_json END AS bad,
           -- json(s): DuckDB's reading of the line (trailing commas, NaN), duplicates kept.
           CASE WHEN NOT fast AND skip IS NULL AND given_bad IS NULL AND s IS NOT NULL AND json_valid(s)
                THEN json_transform(auditor_normalize(json(s), $keep_payloads), $slow_shape) END AS n
    FROM decided
), picked AS (
    SELECT line, pos,
           CASE WHEN fast OR skip IS NOT NULL THEN NULL ELSE coalesce(bad, n.rejected) END AS rejected,
           CASE WHEN skip IS NOT NULL THEN skip WHEN NOT fast THEN n.ignored END AS ignored,
           CASE WHEN fast THEN try_cast(j.seq AS BIGINT) ELSE n.seq END AS seq,
           CASE WHEN fast THEN j.workflow_key ->> '$' ELSE n.workflow_key END AS workflow_key,
           CASE WHEN fast THEN j.kind ELSE n.kind END AS kind,
           CASE WHEN NOT fast THEN n.epoch WHEN j.kind <> 'outcome_verified' THEN try_cast(j.epoch AS BIGINT) END AS epoch,
           CASE WHEN fast THEN coalesce(j.worker, 'unknown') ELSE n.worker END AS worker,
           CASE WHEN fast THEN j.effect_key ->> '$' ELSE n.effect_key END AS effect_key,
           CASE WHEN fast THEN j.sink ELSE n.sink END AS sink,
           CASE WHEN NOT fast THEN n.sink_result WHEN j.kind = 'effect_attempted' THEN j.sink_result END AS sink_result,
           CASE WHEN fast THEN j.reporter ELSE n.reporter END AS reporter,
           CASE WHEN fast THEN j.step_id ELSE n.step_id END AS step_id,
           CASE WHEN fast THEN j.ts ELSE n.ts END AS ts_given,
           CASE WHEN NOT fast THEN to_timestamp(n.ts_epoch) END AS ts_number,
           CASE WHEN fast THEN j.event_id ELSE n.event_id END AS event_id,
           CASE WHEN NOT fast THEN n.attrs
                WHEN j.attrs IS NOT NULL THEN auditor_attrs('{"attrs":' || j.attrs || '}', $keep_payloads) END AS attrs,
           CASE WHEN fast THEN j.lease_until ELSE n.lease_until END AS lease_until_given,
           CASE WHEN fast THEN j.heartbeat ELSE n.heartbeat END AS heartbeat,
           CASE WHEN fast THEN j.reason ELSE n.reason END AS reason,
           CASE WHEN fast THEN j.authority_id ->> '$' ELSE n.authority_id END AS authority_id,
           CASE WHEN fast THEN j.expires_at ELSE n.expires_at END AS expires_at_given,
           CASE WHEN fast THEN j.scope ELSE n.scope END AS scope,
           CASE WHEN fast THEN j.decision ELSE n.decision END AS decision,
           CASE WHEN NOT fast THEN n.dropped END AS dropped_given{{added_picked}}
    FROM norm
    -- Records Store.append_records took as typed columns (typed_chunk: line, pos and the fast
    -- path's values, what it would read from their JSON text; no optional field given): the
    -- same rows the fast path would pick, from here on through the same ts, hash and id.
    UNION ALL BY NAME
    SELECT line, pos, NULL::VARCHAR AS rejected, NULL::VARCHAR AS ignored, seq, workflow_key, kind, epoch, worker, effect_key, sink,
           sink_result, reporter, step_id, ts AS ts_given, NULL::TIMESTAMPTZ AS ts_number, event_id, attrs,
           NULL::VARCHAR AS lease_until_given, NULL::VARCHAR AS heartbeat, NULL::VARCHAR AS reason,
           NULL::VARCHAR AS authority_id, NULL::VARCHAR AS expires_at_given, NULL::VARCHAR AS scope,
           NULL::VARCHAR AS decision, NULL::VARCHAR[] AS dropped_given{{added_typed}}
    FROM typed_chunk
), timed AS (
    -- The instants: text is a time only in the shape both engines read alike ($instant_shape:
    -- RFC 3339; normalize.instant is the live side). An unparsable one is dropped, the event
    -- stays (SPEC rev 2); ts is shown as written when it is read.
    SELECT * EXCLUDE (ts_given, ts_number, ts_read, lease_until_given, expires_at_given, dropped_given),
           coalesce(ts_number, ts_read) AS ts_utc,
           CASE WHEN ts_number IS NOT NULL OR ts_read IS NOT NULL THEN ts_given END AS ts,
           -- What was given and could not be read (SPEC rev 3, malformed_field): the normalizer's
           -- drops, and the instants the shape or the cast refused.
           CASE WHEN dropped_given IS NOT NULL
                     OR (ts_given IS NOT NULL AND ts_number IS NULL AND ts_read IS NULL)
                     OR (lease_until_given IS NOT NULL AND lease_until IS NULL)
                     OR (expires_at_given IS NOT NULL AND expires_at IS NULL)
                THEN list_sort(list_distinct(list_concat(
                         coalesce(dropped_given, []),
                         CASE WHEN ts_given IS NOT NULL AND ts_number IS NULL AND ts_read IS NULL THEN ['ts'] ELSE [] END,
                         CASE WHEN lease_until_given IS NOT NULL AND lease_until IS NULL THEN ['lease_until'] ELSE [] END,
                         CASE WHEN expires_at_given IS NOT NULL AND expires_at IS NULL THEN ['expires_at'] ELSE [] END)))
           END AS dropped
    FROM (SELECT *,
                 CASE WHEN regexp_full_match(ts_given, $instant_shape)
                      THEN try_cast(upper(ts_given) AS TIMESTAMPTZ) END AS ts_read,
                 CASE WHEN regexp_full_match(lease_until_given, $instant_shape)
                      THEN try_cast(upper(lease_until_given) AS TIMESTAMPTZ) END AS lease_until,
                 CASE WHEN regexp_full_match(expires_at_given, $instant_shape)
                      THEN try_cast(upper(expires_at_given) AS TIMESTAMPTZ) END AS expires_at
          FROM picked)
), derived AS (
    -- A derived id (an event without an id of its own) is written here only when $derive_ids asks
    -- for it: md5 of every row cost a quarter of this statement, and an id is read only where two
    -- events could tie (fill_ids writes those) or be shown (identified_events derives it then).
    SELECT *, CASE WHEN $derive_ids AND event_id IS NULL AND rejected IS NULL AND ignored IS NULL THEN
                   derived_id_of(timed) END AS derived
    FROM timed
)
SELECT
    -- A rejected line is marked by an empty kind (no event has one) and fills the columns an
    -- event must have with empty text; its reason travels in reason.
    -- An ignored line is marked the same way with a null reason, its kind value in worker.
    CASE WHEN rejected IS NULL AND ignored IS NULL THEN coalesce(event_id, derived) ELSE '' END AS event_id,
    seq, seq AS ord, $source_id::BIGINT * 68719476736 + pos AS obs,
    CASE WHEN rejected IS NULL AND ignored IS NULL THEN workflow_key ELSE '' END AS workflow_key,
    CASE WHEN rejected IS NULL AND ignored IS NULL THEN kind ELSE '' END AS kind,
    epoch, CASE WHEN ignored IS NOT NULL THEN ignored WHEN rejected IS NULL THEN worker ELSE '' END AS worker,
    effect_key, sink, sink_result, reporter, step_id, ts, ts_utc,
    -- A batch of small sources (Store.ingest_many) moves each one's pos to its own 2^36 block.
    attrs, ($source_id + (pos >> 36))::INTEGER AS source_id, line,
    lease_until, heartbeat, coalesce(rejected, reason) AS reason, authority_id, expires_at, scope, decision{{added}},
    -- Numbered as the line's place after the events stored before ($position_base): exact unless a
    -- line of the source is not an event (blank, quarantined, a duplicate); positions renumbers then.
    $position_base + pos AS position, CASE WHEN rejected IS NULL THEN dropped END AS dropped
FROM derived;

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
-- append, and id_conflicts sees them all.
UPDATE events SET event_id = derived_id_of(events)
WHERE event_id IS NULL AND (
    -- a source that gave such an id, or one of a store written before, not known yet
    EXISTS (SELECT 1 FROM sources WHERE given_derived_ids IS NOT FALSE)
    OR EXISTS (SELECT 1 FROM events e WHERE e.source_id >= $1 AND given_derived(e))
    -- row values compare as structs here: a null seq equals a null seq
    OR (hash(workflow_key), seq) IN (
        SELECT (h, seq) FROM (SELECT hash(workflow_key) AS h, seq FROM events)
        WHERE h IN (SELECT hash(workflow_key) FROM events WHERE source_id >= $1)
        GROUP BY h, seq HAVING count(*) > 1));

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
