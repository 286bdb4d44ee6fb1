-- auditor serve's own statements over the store (auditor/serve/durable.py, audit.py). Named with
-- "-- name:" and run with bound parameters, as auditor/store/store.sql.

-- name: alerts_schema
-- The alerts the receiver raised, one row per alert: a restarted receiver alerts an incident
-- again only when its grade changes (issue 36). Not read by audit or report.
CREATE TABLE IF NOT EXISTS serve_alerts (
    incident_id  VARCHAR NOT NULL,
    finding_id   VARCHAR NOT NULL,
    grade        VARCHAR NOT NULL,
    workflow_key VARCHAR NOT NULL,
    seq          BIGINT,
    alerted_at   TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);

-- name: position
-- The last spool entry appended ($1 the receiver's source name, $2 the digest pattern; digests
-- are zero-padded, so the greatest is the last) and the last line numbered under that name.
SELECT max(digest) FILTER (WHERE digest LIKE $2), sum(lines_read)
FROM sources WHERE name = $1;

-- name: alert
INSERT INTO serve_alerts (incident_id, finding_id, grade, workflow_key, seq) VALUES (?, ?, ?, ?, ?);

-- name: alerts
-- Every alert raised, oldest first.
SELECT incident_id, grade, workflow_key, seq FROM serve_alerts ORDER BY alerted_at, rowid;

-- name: observed_keys
-- Keys ordered by observation (no event with a seq): the live audit keeps numbering them from
-- their last. A key with some seq is ordered by it (SPEC revision 3), whatever its seq-less events.
SELECT workflow_key, max(ord) FROM events GROUP BY workflow_key HAVING count(seq) = 0 AND max(ord) IS NOT NULL;
