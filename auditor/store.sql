-- The DuckDB side of the store: schema, the one normalizer every reader feeds, and the
-- accounting. Statements are named with "-- name:" and run by auditor/store.py with bound
-- parameters; nothing here is assembled by string formatting.

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
    event_id     VARCHAR NOT NULL,
    ord          BIGINT,           -- the order detection uses: seq, or observation rank when seq is missing
    seq          BIGINT,
    obs          BIGINT NOT NULL,  -- observation position: source_id * 2^36 + line
    workflow_key VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,
    epoch        BIGINT,
    worker       VARCHAR NOT NULL,
    effect_key   VARCHAR,
    sink         VARCHAR,
    sink_result  VARCHAR,
    reporter     VARCHAR,
    step_id      VARCHAR,
    ts           VARCHAR,          -- as written, for display
    ts_utc       TIMESTAMPTZ,      -- parsed, for durations and freshness only, never for order
    attrs        VARCHAR,          -- JSON text; payload-like fields hashed
    source_id    INTEGER NOT NULL,
    line         BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS quarantine (
    source_id INTEGER NOT NULL,
    line      BIGINT NOT NULL,
    reason    VARCHAR NOT NULL
);

-- name: stage
-- One chunk of raw lines (an arrow table raw_chunk(line BIGINT, pos BIGINT, raw BLOB, bad VARCHAR);
-- pos numbers the records of a source uniquely, bad is a reason a reader already found) normalized into the
-- staged rows (the columns of events, and reason); a row with a reason is quarantined, a row
-- without one is an event. $1 source_id, $2 keep_payloads.
-- Speed matters here (every line of every log passes once): each line is parsed once by
-- json_transform on the fast path, a line that opens an object right away and whose keys are all
-- canonical and non-null, plus at most "attrs". Every other line (aliases given as null, duplicate
-- keys, other extra fields, leading whitespace) takes the slow path, json_extract_string and
-- json_type per field, whose answers the fast path reproduces exactly.
WITH decoded AS (
    -- trim scans the whole line, so only lines that do not open an object right away pay for it;
    -- JSON allows the whitespace (and the newline) the others keep.
    SELECT line, pos, given_bad,
           CASE WHEN starts_with(u, '{') THEN u ELSE ltrim(trim(u, E' \t\r\n'), chr(65279)) END AS s
    FROM (SELECT line, pos, bad AS given_bad, try(decode(raw)) AS u FROM raw_chunk)
), parsed AS (
    -- Fields as text, like json_extract_string (strings unescaped, anything else as JSON), the
    -- key aliases as JSON to keep their type; NULL when the line is not valid JSON.
    SELECT line, pos, s, given_bad,
           CASE WHEN given_bad IS NULL THEN try(json_transform(s, '{
               "seq": "VARCHAR", "workflow_key": "JSON", "job": "JSON", "job_id": "JSON",
               "run_id": "JSON", "kind": "VARCHAR", "event": "VARCHAR", "epoch": "VARCHAR",
               "token": "VARCHAR", "fencing_token": "VARCHAR", "owner_epoch": "VARCHAR",
               "lease_epoch": "VARCHAR", "worker": "VARCHAR", "effect_key": "VARCHAR",
               "idempotency_key": "VARCHAR", "sink": "VARCHAR", "sink_result": "VARCHAR",
               "reporter": "VARCHAR", "step_id": "VARCHAR", "ts": "VARCHAR", "event_id": "VARCHAR",
               "attrs": "JSON"}')) END AS j
    FROM decoded
    WHERE s IS NULL OR s <> '' OR given_bad IS NOT NULL
), checked AS (
    SELECT line, pos, s, j, coalesce(j.workflow_key, j.job, j.job_id, j.run_id) AS key_j,
           CASE WHEN given_bad IS NOT NULL THEN given_bad
                WHEN s IS NULL THEN 'line is not valid UTF-8; re-encode the file as UTF-8'
                WHEN j IS NOT NULL AND starts_with(s, '{') THEN NULL
                WHEN NOT json_valid(s) THEN 'line is not valid JSON; write one JSON object per line'
                WHEN json_type(s) <> 'OBJECT' THEN 'line is JSON but not an object; write one JSON object per line'
           END AS bad,
           (j.seq IS NOT NULL)::INT + (j.workflow_key IS NOT NULL)::INT + (j.job IS NOT NULL)::INT
             + (j.job_id IS NOT NULL)::INT + (j.run_id IS NOT NULL)::INT + (j.kind IS NOT NULL)::INT
             + (j.event IS NOT NULL)::INT + (j.epoch IS NOT NULL)::INT + (j.token IS NOT NULL)::INT
             + (j.fencing_token IS NOT NULL)::INT + (j.owner_epoch IS NOT NULL)::INT
             + (j.lease_epoch IS NOT NULL)::INT + (j.worker IS NOT NULL)::INT
             + (j.effect_key IS NOT NULL)::INT + (j.idempotency_key IS NOT NULL)::INT
             + (j.sink IS NOT NULL)::INT + (j.sink_result IS NOT NULL)::INT
             + (j.reporter IS NOT NULL)::INT + (j.step_id IS NOT NULL)::INT + (j.ts IS NOT NULL)::INT
             + (j.event_id IS NOT NULL)::INT AS canonical
    FROM parsed
), fields AS (
    -- attrs: the "attrs" object plus every non-canonical field, from Python (payload hashing).
    -- On the fast path it depends on the "attrs" value alone, which is all the UDF is handed.
    SELECT *,
           CASE WHEN NOT fast AND bad IS NULL THEN json_extract_string(s, [
               '$.seq', '$.workflow_key', '$.job', '$.job_id', '$.run_id',
               '$.kind', '$.event',
               '$.epoch', '$.token', '$.fencing_token', '$.owner_epoch', '$.lease_epoch',
               '$.worker', '$.effect_key', '$.idempotency_key', '$.sink', '$.sink_result',
               '$.reporter', '$.step_id', '$.ts', '$.event_id']) END AS v,
           CASE WHEN NOT fast AND bad IS NULL THEN json_type(s, [
               '$.seq', '$.epoch', '$.token', '$.fencing_token', '$.owner_epoch', '$.lease_epoch',
               '$.workflow_key', '$.job', '$.job_id', '$.run_id']) END AS t,
           CASE WHEN bad IS NOT NULL OR keys = canonical THEN NULL
                WHEN fast THEN '{"attrs":' || j.attrs || '}'
                WHEN len(list_filter(json_keys(s), lambda k: k NOT IN (
                     'seq', 'workflow_key', 'job', 'job_id', 'run_id', 'kind', 'event', 'epoch',
                     'token', 'fencing_token', 'owner_epoch', 'lease_epoch', 'worker', 'effect_key',
                     'idempotency_key', 'sink', 'sink_result', 'reporter', 'step_id', 'ts',
                     'event_id'))) > 0 THEN s
           END AS extra
    FROM (SELECT *, coalesce(keys = canonical OR (keys = canonical + 1 AND j.attrs IS NOT NULL),
                             false) AS fast
          FROM (SELECT *, CASE WHEN bad IS NULL AND starts_with(s, '{') THEN len(json_keys(s)) END AS keys
                FROM checked))
), picked AS (
    -- On the fast path no field is null, so the type checks of seq and epoch reduce to the
    -- integer pattern below, and the first non-null key alias is the first present one.
    SELECT line, pos, bad, CASE WHEN extra IS NOT NULL THEN auditor_attrs(extra, $2) END AS attrs,
           CASE WHEN fast THEN j.seq ELSE v[1] END AS seq_s,
           CASE WHEN fast THEN 'VARCHAR' ELSE t[1] END AS seq_t,
           CASE WHEN fast THEN json_extract_string(key_j, '$')
                ELSE coalesce(v[2], v[3], v[4], v[5]) END AS workflow_key,
           CASE WHEN fast THEN json_type(key_j) ELSE coalesce(t[7], t[8], t[9], t[10]) END AS key_t,
           CASE WHEN fast THEN coalesce(j.kind, j.event) ELSE coalesce(v[6], v[7]) END AS kind_s,
           CASE WHEN fast THEN coalesce(j.epoch, j.token, j.fencing_token, j.owner_epoch, j.lease_epoch)
                ELSE coalesce(v[8], v[9], v[10], v[11], v[12]) END AS epoch_s,
           CASE WHEN fast THEN 'VARCHAR' ELSE coalesce(t[2], t[3], t[4], t[5], t[6]) END AS epoch_t,
           coalesce(CASE WHEN fast THEN j.worker ELSE v[13] END, 'unknown') AS worker,
           CASE WHEN fast THEN coalesce(j.effect_key, j.idempotency_key)
                ELSE coalesce(v[14], v[15]) END AS effect_key,
           CASE WHEN fast THEN j.sink ELSE v[16] END AS sink,
           CASE WHEN fast AND j.sink_result IN ('accepted', 'rejected', 'unknown') THEN j.sink_result
                ELSE lower(trim(CASE WHEN fast THEN j.sink_result ELSE v[17] END)) END AS sink_result_s,
           CASE WHEN fast AND j.reporter IN ('coordinator', 'sink', 'worker', 'verifier') THEN j.reporter
                ELSE lower(trim(CASE WHEN fast THEN j.reporter ELSE v[18] END)) END AS reporter,
           CASE WHEN fast THEN j.step_id ELSE v[19] END AS step_id,
           CASE WHEN fast THEN j.ts ELSE v[20] END AS ts,
           CASE WHEN fast THEN j.event_id ELSE v[21] END AS event_id
    FROM fields
), kinds AS (
    SELECT *,
           CASE WHEN kind_s IN ('lease_acquired', 'progress', 'effect_attempted', 'effect_committed',
                                'outcome_verified') THEN kind_s  -- as written, skip the regex
                ELSE regexp_replace(lower(trim(kind_s)), '^.*\.', '') END AS kind_raw,
           CASE WHEN seq_t IN ('BIGINT', 'UBIGINT', 'VARCHAR')
                 AND regexp_full_match(trim(seq_s), '[+-]?[0-9]+')
                THEN try_cast(trim(seq_s) AS BIGINT) END AS seq,
           CASE WHEN epoch_t IN ('BIGINT', 'UBIGINT', 'VARCHAR')
                 AND regexp_full_match(trim(epoch_s), '[+-]?[0-9]+')
                THEN try_cast(trim(epoch_s) AS BIGINT) END AS epoch
    FROM picked
), canon AS (
    SELECT *,
           CASE kind_raw
               WHEN 'job_claimed' THEN 'lease_acquired'
               WHEN 'heartbeat_ok' THEN 'progress'
               WHEN 'heartbeat_lost' THEN 'progress'
               WHEN 'tool_request_started' THEN 'effect_attempted'
               WHEN 'result_rejected' THEN 'effect_attempted'
               ELSE kind_raw
           END AS kind,
           CASE WHEN kind_raw = 'result_rejected' THEN 'rejected' ELSE sink_result_s END AS sink_result
    FROM kinds
), judged AS (
    SELECT *,
           coalesce(bad,
               CASE WHEN workflow_key IS NULL OR trim(workflow_key) = '' OR key_t NOT IN ('VARCHAR', 'BIGINT', 'UBIGINT')
                        THEN '"workflow_key" is missing; add the unit that must have one effect owner (or job_id / run_id)'
                    WHEN kind_s IS NULL
                        THEN '"kind" is missing; expected one of lease_acquired, progress, effect_attempted, effect_committed, outcome_verified'
                    WHEN kind NOT IN ('lease_acquired', 'progress', 'effect_attempted', 'effect_committed', 'outcome_verified')
                        THEN '"kind" is "' || left(kind_s, 60) || '", expected one of lease_acquired, progress, effect_attempted, effect_committed, outcome_verified'
                    WHEN seq_s IS NOT NULL AND seq IS NULL
                        THEN '"seq" is "' || left(seq_s, 40) || '", expected an integer in int64 range'
                    WHEN epoch_s IS NOT NULL AND epoch IS NULL
                        THEN '"epoch" is "' || left(epoch_s, 40) || '", expected an integer in int64 range'
                    WHEN epoch < 0
                        THEN '"epoch" is ' || epoch || ', expected an integer >= 0'
                    WHEN epoch IS NULL AND kind <> 'outcome_verified'
                        THEN '"epoch" is missing; every ' || kind || ' needs the owner epoch it was produced under'
                    WHEN effect_key IS NULL AND kind IN ('effect_attempted', 'effect_committed', 'outcome_verified')
                        THEN '"effect_key" is missing; every ' || kind || ' needs the effect key it concerns'
                    WHEN sink_result IS NOT NULL AND sink_result NOT IN ('accepted', 'rejected', 'unknown')
                        THEN '"sink_result" is "' || left(sink_result, 40) || '", expected accepted, rejected or unknown'
                    WHEN reporter IS NOT NULL AND reporter NOT IN ('coordinator', 'sink', 'worker', 'verifier')
                        THEN '"reporter" is "' || left(reporter, 40) || '", expected coordinator, sink, worker or verifier'
               END) AS reason
    FROM canon
)
SELECT
    CASE WHEN reason IS NULL THEN coalesce(event_id, md5(concat_ws(chr(31),
        seq, workflow_key, kind, epoch, worker, effect_key, sink, sink_result, reporter, step_id, ts,
        attrs)))
    END AS event_id,
    seq, seq AS ord, $1::BIGINT * 68719476736 + pos AS obs,
    workflow_key, kind, epoch, worker, effect_key, sink,
    CASE WHEN kind = 'effect_attempted' THEN sink_result END AS sink_result,
    reporter, step_id, ts, try_cast(ts AS TIMESTAMPTZ) AS ts_utc, attrs,
    $1 AS source_id, line, reason
FROM judged;

-- name: quarantine_staged
INSERT INTO quarantine SELECT source_id, line, reason FROM staging WHERE reason IS NOT NULL;

-- name: staged_counts
SELECT count(*) AS lines_read, count(*) FILTER (WHERE reason IS NULL) AS normalized,
       count(*) FILTER (WHERE reason IS NOT NULL) AS quarantined
FROM staging;

-- name: staged_counts_by_source
-- staged_counts per source, for a batch of small sources staged together (Store.ingest_many).
SELECT source_id, count(*) AS lines_read, count(*) FILTER (WHERE reason IS NOT NULL) AS quarantined
FROM staging GROUP BY source_id;

-- name: append_staged
-- One chunk's events (staging: the arrow result of stage) go straight into the store, never the
-- whole file at once; drop_duplicates then collapses what the chunks repeated.
INSERT INTO events SELECT * EXCLUDE (reason) FROM staging WHERE reason IS NULL;

-- name: drop_duplicates
-- Exact duplicates collapse: the first observation of an event_id wins, and an event_id already
-- in the store adds nothing, which is what makes ingest idempotent. Observation positions grow
-- with the source, so both rules keep the row with the lowest obs. A 64-bit hash of the id finds
-- the candidates (usually none) without a hash table of every id string; the ids decide.
-- $1 the first of the sources just appended (one, or a batch of small ones).
DELETE FROM events WHERE rowid IN (
    SELECT r FROM (
        SELECT rowid AS r, obs, min(obs) OVER (PARTITION BY event_id) AS first
        FROM events
        WHERE hash(event_id) IN (SELECT hash(event_id) FROM events GROUP BY 1
                                 HAVING count(*) > 1 AND bool_or(source_id >= $1)))
    WHERE obs > first);

-- name: observed_order
-- A workflow key with any event lacking seq is ordered by observation (file order) throughout.
UPDATE events SET ord = o.rank
FROM (SELECT event_id, row_number() OVER (PARTITION BY workflow_key ORDER BY obs) AS rank
      FROM events
      WHERE workflow_key IN (SELECT DISTINCT workflow_key FROM events WHERE seq IS NULL)) o
WHERE events.event_id = o.event_id;

-- name: totals
SELECT coalesce(sum(lines_read), 0), coalesce(sum(events), 0), coalesce(sum(duplicates), 0),
       coalesce(sum(quarantined), 0)
FROM sources;

-- name: quarantine_first
SELECT s.name, q.line, q.reason
FROM quarantine q JOIN sources s USING (source_id)
ORDER BY q.source_id, q.line
LIMIT $1;

-- name: event_columns
SELECT ord AS seq, workflow_key, kind, epoch, worker, effect_key, sink, sink_result, reporter,
       step_id, ts, event_id, attrs
FROM events;
