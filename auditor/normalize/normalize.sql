-- Stage 2 in SQL: the normalizer every line of a batch audit passes (its fast path, and the call
-- into normalize/reference.py for the rest). Named with "-- name:" and loaded by core/sql.py as
-- store/store.sql is (its {{...}} column lists generated from the field registry,
-- core/columns.py); run by auditor/store/appending.py inside the store's append, with bound
-- parameters.

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
        AND ((wk_type = 'VARCHAR' AND NOT contains($blank, left(wk, 1))) OR wk_type IN ('BIGINT', 'UBIGINT'))
        AND (j.effect_key IS NOT NULL OR NOT list_contains($effect_kinds, j.kind))
        AND (j.effect_key IS NULL OR (ek_type = 'VARCHAR' AND NOT contains($blank, left(ek, 1)))
             OR ek_type IN ('BIGINT', 'UBIGINT'))
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
    -- the key fields' JSON type and text, read once for the check and for picked
    FROM (SELECT *, CASE WHEN j IS NOT NULL THEN json_keys(s) END AS keys,
                 json_type(j.workflow_key) AS wk_type, j.workflow_key ->> '$' AS wk,
                 json_type(j.effect_key) AS ek_type, j.effect_key ->> '$' AS ek FROM parsed)
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
    SELECT line, pos, fast, j, wk, ek, skip,
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
           CASE WHEN fast THEN wk ELSE n.workflow_key END AS workflow_key,
           CASE WHEN fast THEN j.kind ELSE n.kind END AS kind,
           CASE WHEN NOT fast THEN n.epoch WHEN j.kind <> 'outcome_verified' THEN try_cast(j.epoch AS BIGINT) END AS epoch,
           CASE WHEN fast THEN coalesce(j.worker, 'unknown') ELSE n.worker END AS worker,
           CASE WHEN fast THEN ek ELSE n.effect_key END AS effect_key,
           CASE WHEN fast THEN j.sink ELSE n.sink END AS sink,
           CASE WHEN NOT fast THEN n.sink_result WHEN j.kind = 'effect_attempted' THEN j.sink_result END AS sink_result,
           CASE WHEN fast THEN j.reporter ELSE n.reporter END AS reporter,
           CASE WHEN fast THEN j.step_id ELSE n.step_id END AS step_id,
           CASE WHEN fast THEN j.ts ELSE n.ts END AS ts_given,
           CASE WHEN NOT fast THEN to_timestamp(n.ts_epoch) END AS ts_number,
           CASE WHEN fast THEN j.event_id ELSE n.event_id END AS event_id,
           -- an attrs value decoded by an earlier statement of this ingest is read back (known.raw:
           -- store/setup.py's known_attrs), not handed to Python again
           CASE WHEN NOT fast THEN n.attrs WHEN known.raw IS NOT NULL THEN known.attrs
                WHEN j.attrs IS NOT NULL THEN auditor_attrs('{"attrs":' || j.attrs || '}', $keep_payloads) END AS attrs,
           CASE WHEN fast THEN j.lease_until ELSE n.lease_until END AS lease_until_given,
           CASE WHEN fast THEN j.heartbeat ELSE n.heartbeat END AS heartbeat,
           CASE WHEN fast THEN j.reason ELSE n.reason END AS reason,
           CASE WHEN fast THEN j.authority_id ->> '$' ELSE n.authority_id END AS authority_id,
           CASE WHEN fast THEN j.expires_at ELSE n.expires_at END AS expires_at_given,
           CASE WHEN fast THEN j.scope ELSE n.scope END AS scope,
           CASE WHEN fast THEN j.decision ELSE n.decision END AS decision,
           CASE WHEN NOT fast THEN n.dropped END AS dropped_given{{added_picked}}
    FROM norm LEFT JOIN attrs_known known ON known.raw = j.attrs::VARCHAR
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
