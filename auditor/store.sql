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
-- One chunk of raw lines (registered as raw_chunk(line BIGINT, pos BIGINT, raw BLOB, bad VARCHAR);
-- pos numbers the records of a source uniquely, bad is a reason a reader already found) normalized into the
-- staging table; a row with a reason is quarantined, a row without one is an event.
-- $1 source_id, $2 keep_payloads.
INSERT INTO staging
WITH decoded AS (
    SELECT line, pos, bad AS given_bad, ltrim(trim(try(decode(raw)), E' \t\r\n'), chr(65279)) AS s
    FROM raw_chunk
), parsed AS (
    SELECT line, pos, s,
           CASE WHEN given_bad IS NOT NULL THEN given_bad
                WHEN s IS NULL THEN 'line is not valid UTF-8; re-encode the file as UTF-8'
                WHEN NOT json_valid(s) THEN 'line is not valid JSON; write one JSON object per line'
                WHEN json_type(s) <> 'OBJECT' THEN 'line is JSON but not an object; write one JSON object per line'
           END AS bad
    FROM decoded
    WHERE s IS NULL OR s <> '' OR given_bad IS NOT NULL
), fields AS (
    SELECT line, pos, s, bad,
           CASE WHEN bad IS NULL THEN json_extract_string(s, [
               '$.seq', '$.workflow_key', '$.job', '$.job_id', '$.run_id',
               '$.kind', '$.event',
               '$.epoch', '$.token', '$.fencing_token', '$.owner_epoch', '$.lease_epoch',
               '$.worker', '$.effect_key', '$.idempotency_key', '$.sink', '$.sink_result',
               '$.reporter', '$.step_id', '$.ts', '$.event_id']) END AS v,
           CASE WHEN bad IS NULL THEN json_type(s, [
               '$.seq', '$.epoch', '$.token', '$.fencing_token', '$.owner_epoch', '$.lease_epoch',
               '$.workflow_key', '$.job', '$.job_id', '$.run_id', '$.kind', '$.event']) END AS t,
           CASE WHEN bad IS NULL
                 AND len(list_filter(json_keys(s), lambda k: k NOT IN (
                     'seq', 'workflow_key', 'job', 'job_id', 'run_id', 'kind', 'event', 'epoch',
                     'token', 'fencing_token', 'owner_epoch', 'lease_epoch', 'worker', 'effect_key',
                     'idempotency_key', 'sink', 'sink_result', 'reporter', 'step_id', 'ts',
                     'event_id'))) > 0
                THEN auditor_attrs(s, $2) END AS attrs
    FROM parsed
), picked AS (
    SELECT line, pos, bad, attrs,
           v[1] AS seq_s, t[1] AS seq_t,
           coalesce(v[2], v[3], v[4], v[5]) AS workflow_key,
           coalesce(t[7], t[8], t[9], t[10]) AS key_t,
           coalesce(v[6], v[7]) AS kind_s,
           coalesce(v[8], v[9], v[10], v[11], v[12]) AS epoch_s,
           coalesce(t[2], t[3], t[4], t[5], t[6]) AS epoch_t,
           coalesce(v[13], 'unknown') AS worker,
           coalesce(v[14], v[15]) AS effect_key,
           v[16] AS sink, lower(trim(v[17])) AS sink_result_s, lower(trim(v[18])) AS reporter,
           v[19] AS step_id, v[20] AS ts, v[21] AS event_id
    FROM fields
), kinds AS (
    SELECT *,
           regexp_replace(lower(trim(kind_s)), '^.*\.', '') AS kind_raw,
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

-- name: create_staging
CREATE OR REPLACE TEMP TABLE staging AS
SELECT *, NULL::VARCHAR AS reason FROM events LIMIT 0;

-- name: quarantine_staged
INSERT INTO quarantine SELECT source_id, line, reason FROM staging WHERE reason IS NOT NULL;

-- name: staged_counts
SELECT count(*) AS lines_read, count(*) FILTER (WHERE reason IS NULL) AS normalized,
       count(*) FILTER (WHERE reason IS NOT NULL) AS quarantined
FROM staging;

-- name: append_staged
-- Exact duplicates collapse: the first observation of an event_id wins, and an event_id already
-- in the store adds nothing, which is what makes ingest idempotent.
INSERT INTO events
SELECT * EXCLUDE (reason) FROM staging s
WHERE reason IS NULL
  AND obs = (SELECT min(obs) FROM staging d WHERE d.event_id = s.event_id AND d.reason IS NULL)
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.event_id = s.event_id);

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
