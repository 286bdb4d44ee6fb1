-- Lease health (SPEC section 7): is the lease configuration itself safe?
--
-- Read from the same events table as detection, by wall clock (ts) where the metric is a
-- duration, and in the authoritative order (seq) for everything that decides who owned what.
-- The statements run in order; every scratch table is prefixed lh_ and dropped at the end.
-- $paths: the JSON paths of the grouping dimensions in attrs (a VARCHAR[] parameter).

-- name: presence
-- Which of the candidate dimensions appear in any event's attrs (the default dimensions are used
-- only when present): the 1-based positions in $paths, as one list.
SELECT coalesce(list(DISTINCT i), []) FROM (
    SELECT unnest(v) AS x, generate_subscripts(v, 1) AS i
    FROM (SELECT json_extract_string(attrs, $paths::VARCHAR[]) AS v FROM events WHERE attrs IS NOT NULL))
WHERE x IS NOT NULL;

-- name: keys
-- Every workflow key with its dimension values: per dimension, the first non-null value in seq order.
CREATE OR REPLACE TEMP TABLE lh_keys AS
WITH kv AS (
    SELECT k, i, arg_min(v, s) AS v
    FROM (SELECT workflow_key AS k, ord AS s,
                 unnest(json_extract_string(attrs, $paths::VARCHAR[])) AS v,
                 generate_subscripts(json_extract_string(attrs, $paths::VARCHAR[]), 1) AS i
          FROM events WHERE attrs IS NOT NULL AND len($paths::VARCHAR[]) > 0)
    WHERE v IS NOT NULL
    GROUP BY k, i
), grid AS (
    SELECT k, i FROM (SELECT DISTINCT workflow_key AS k FROM events),
                     range(1, len($paths::VARCHAR[]) + 1) r(i)
)
SELECT k, list(v ORDER BY i) AS dims FROM grid LEFT JOIN kv USING (k, i) GROUP BY k
UNION ALL
SELECT DISTINCT workflow_key, []::VARCHAR[] FROM events WHERE len($paths::VARCHAR[]) = 0;

-- name: takeovers
-- Each acquisition that raised the key's highest epoch after the first, with what the displaced
-- owner (the previous highest epoch) had shown before it in seq order: any evidence, its last
-- granted lease_until and the ts of its last successful heartbeat.
CREATE OR REPLACE TEMP TABLE lh_takeovers AS
WITH acq AS (
    SELECT workflow_key AS k, ord AS s, epoch, ts_utc AS ts,
           max(epoch) OVER (PARTITION BY workflow_key ORDER BY ord, event_id
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max
    FROM events WHERE kind = 'lease_acquired'
), t AS (
    SELECT k, s, epoch, ts, prev_max AS displaced FROM acq WHERE epoch > prev_max
)
SELECT t.k, t.s, t.epoch, t.ts, t.displaced,
       coalesce(bool_or(e.kind <> 'lease_acquired'), false) AS reclaim,
       arg_max(e.lease_until, e.ord) FILTER (WHERE e.lease_until IS NOT NULL) AS last_until,
       arg_max(e.ts_utc, e.ord) FILTER (WHERE e.heartbeat = 'ok' AND e.ts_utc IS NOT NULL) AS last_ok
FROM t LEFT JOIN events e ON e.workflow_key = t.k AND e.epoch = t.displaced AND e.ord < t.s
GROUP BY t.k, t.s, t.epoch, t.ts, t.displaced;

-- name: gaps
-- Gaps between consecutive successful heartbeats of one (key, epoch), by ts.
CREATE OR REPLACE TEMP TABLE lh_gaps AS
SELECT k, epoch, s, gap FROM (
    SELECT workflow_key AS k, epoch, ord AS s,
           epoch(ts_utc) - epoch(lag(ts_utc) OVER (PARTITION BY workflow_key, epoch
                                                   ORDER BY ts_utc, ord)) AS gap
    FROM events WHERE heartbeat = 'ok' AND ts_utc IS NOT NULL)
WHERE gap IS NOT NULL;

-- name: grants
-- Every grant (an acquisition) or extension (any other event) carrying lease_until: the lease
-- length it gave and, for an extension, what was left of the previous lease of its epoch.
CREATE OR REPLACE TEMP TABLE lh_grants AS
SELECT workflow_key AS k, epoch, ord AS s, kind = 'lease_acquired' AS is_grant, lease_until,
       epoch(lease_until) - epoch(ts_utc) AS lease_s,
       CASE WHEN kind <> 'lease_acquired'
            THEN epoch(lag(lease_until) OVER (PARTITION BY workflow_key, epoch ORDER BY ord))
                 - epoch(ts_utc) END AS remaining_s
FROM events WHERE lease_until IS NOT NULL AND epoch IS NOT NULL;

-- name: key_metrics
-- The section 7 metrics per workflow key (keys with any lease evidence: a grant, a heartbeat,
-- or a takeover).
CREATE OR REPLACE TEMP TABLE lh_key_metrics AS
WITH base AS (
    SELECT workflow_key AS k,
           count(*) FILTER (WHERE kind = 'lease_acquired') AS leases,
           count(*) FILTER (WHERE heartbeat = 'lost') AS extension_failures,
           count(*) FILTER (WHERE heartbeat IS NOT NULL OR lease_until IS NOT NULL) AS timing_events
    FROM events GROUP BY workflow_key
), t AS (
    SELECT k, count(*) AS takeovers, count(*) FILTER (WHERE reclaim) AS reclaims,
           count(*) FILTER (WHERE last_until <= ts) AS expired_leases,
           median(epoch(ts) - epoch(last_ok)) AS age_median, max(epoch(ts) - epoch(last_ok)) AS age_max
    FROM lh_takeovers GROUP BY k
), g AS (
    SELECT k, count(*) AS gaps, median(gap) AS h, max(gap) AS h_max FROM lh_gaps GROUP BY k
), l AS (
    SELECT k, min(lease_s) AS lease_min, median(lease_s) AS lease_median,
           min(remaining_s) AS remaining_min
    FROM lh_grants GROUP BY k
)
SELECT b.k, ks.dims, b.leases, coalesce(t.reclaims, 0) AS reclaims,
       coalesce(t.expired_leases, 0) AS expired_leases, b.extension_failures,
       coalesce(g.gaps, 0) AS gaps, g.h, g.h_max, g.h_max - g.h AS jitter,
       l.lease_min, l.lease_median, l.remaining_min, t.age_median, t.age_max
FROM base b JOIN lh_keys ks ON ks.k = b.k
LEFT JOIN t ON t.k = b.k LEFT JOIN g ON g.k = b.k LEFT JOIN l ON l.k = b.k
WHERE b.timing_events > 0 OR t.takeovers > 0;

-- name: group_metrics
-- The same metrics per dimension group, pooled over the group's keys (medians over all of the
-- group's gaps and grants, not medians of medians), with the timing rule L <= R * H + J.
-- $1 R (heartbeats one is willing to miss).
CREATE OR REPLACE TEMP TABLE lh_group_metrics AS
WITH counts AS (
    SELECT dims, count(*) AS keys, sum(leases) AS leases, sum(reclaims) AS reclaims,
           sum(expired_leases) AS expired_leases, sum(extension_failures) AS extension_failures
    FROM lh_key_metrics GROUP BY dims
), g AS (
    SELECT ks.dims, count(*) AS gaps, median(gap) AS h, max(gap) AS h_max
    FROM lh_gaps JOIN lh_keys ks USING (k) GROUP BY ks.dims
), l AS (
    SELECT ks.dims, min(lease_s) AS lease_min, median(lease_s) AS lease_median,
           min(remaining_s) AS remaining_min
    FROM lh_grants JOIN lh_keys ks USING (k) GROUP BY ks.dims
), a AS (
    SELECT ks.dims, median(epoch(ts) - epoch(last_ok)) AS age_median,
           max(epoch(ts) - epoch(last_ok)) AS age_max
    FROM lh_takeovers JOIN lh_keys ks USING (k) GROUP BY ks.dims
)
SELECT c.*, coalesce(g.gaps, 0) AS gaps, g.h, g.h_max, g.h_max - g.h AS jitter,
       l.lease_min, l.lease_median, l.remaining_min, a.age_median, a.age_max,
       $1 * g.h + (g.h_max - g.h) AS threshold,
       coalesce(g.gaps >= 3 AND l.lease_min <= $1 * g.h + (g.h_max - g.h), false) AS at_risk
FROM counts c LEFT JOIN g USING (dims) LEFT JOIN l USING (dims) LEFT JOIN a USING (dims);

-- name: group_rows
SELECT dims, keys, leases, reclaims, expired_leases, extension_failures, gaps, h, h_max, jitter,
       lease_min, lease_median, remaining_min, age_median, age_max, threshold, at_risk
FROM lh_group_metrics;

-- name: key_rows
SELECT k, dims, leases, reclaims, expired_leases, extension_failures, gaps, h, h_max, jitter,
       lease_min, lease_median, remaining_min, age_median, age_max
FROM lh_key_metrics ORDER BY k;

-- name: gap_rows
-- The heartbeat gaps of one group, for its chart. $1 the group's dims.
SELECT gap FROM lh_gaps JOIN lh_keys ks USING (k) WHERE ks.dims = $1::VARCHAR[] ORDER BY gap;

-- name: diagnostic_rows
-- late_extension: an extension with less than one heartbeat interval H (of its group) left.
-- takeover_before_expiry: the displaced owner's lease was still running at the takeover's ts.
-- effect_after_lease_expiry: an attempt by an owner after its own last lease_until (by ts).
SELECT 'late_extension' AS kind, gr.k, gr.s, gr.epoch, gr.remaining_s AS a, m.h AS b
FROM lh_grants gr JOIN lh_keys ks USING (k) JOIN lh_group_metrics m ON m.dims = ks.dims
WHERE NOT gr.is_grant AND gr.remaining_s IS NOT NULL AND m.h IS NOT NULL AND gr.remaining_s < m.h
UNION ALL
SELECT 'takeover_before_expiry', k, s, displaced, epoch(last_until) - epoch(ts), epoch
FROM lh_takeovers WHERE last_until > ts
UNION ALL
SELECT 'effect_after_lease_expiry', e.workflow_key, e.ord, e.epoch,
       epoch(e.ts_utc) - epoch(gr.lease_until), NULL
FROM (SELECT * FROM events WHERE kind = 'effect_attempted' AND ts_utc IS NOT NULL
      AND workflow_key IN (SELECT k FROM lh_grants)) e
ASOF JOIN lh_grants gr ON gr.k = e.workflow_key AND gr.epoch = e.epoch AND e.ord > gr.s
WHERE e.ts_utc > gr.lease_until;

-- name: drop
DROP TABLE IF EXISTS lh_keys; DROP TABLE IF EXISTS lh_takeovers; DROP TABLE IF EXISTS lh_gaps;
DROP TABLE IF EXISTS lh_grants; DROP TABLE IF EXISTS lh_key_metrics;
DROP TABLE IF EXISTS lh_group_metrics;
