-- Lease health (SPEC section 7): is the lease configuration itself safe?
--
-- Read from the same events table as detection, by wall clock (ts) where the metric is a
-- duration, and in the authoritative order (ord: seq, or observation order) for everything that
-- decides who owned what. Durations are whole milliseconds (epoch_ms), so the rule's comparisons
-- are exact; batch.py turns them into seconds. The statements run in order; every scratch table
-- is prefixed lh_ and dropped at the end.
-- $paths: the JSON paths of the grouping dimensions in attrs (a VARCHAR[] parameter).
-- $recorded: the kinds recorded outside an owner epoch (vocabulary.EPOCH_OPTIONAL_KINDS): never
-- an owner's evidence.

-- name: lease_events
-- The events of every workflow key with lease evidence (a lease_until or a heartbeat): the only
-- rows lease health reads, so a log without lease fields costs one scan of two columns.
-- s is the event's place in the key's authoritative order: its seq in a key where some event has
-- one, else its observation rank (ord). An event without seq in a key ordered by seq is unplaced
-- (SPEC section 4, revision 3): s is NULL, whatever ord says (today the whole key is ordered by
-- observation; from revision 3's store on, ord is NULL for it), and lease health reads its ts.
CREATE OR REPLACE TEMP TABLE lh_events AS
SELECT k, CASE WHEN sequenced THEN seq ELSE ord END AS s, sequenced AND seq IS NULL AS unplaced,
       event_id, obs, kind, epoch, worker, ts, lease_until, heartbeat, sink_result, effect_key, attrs,
       position AS pos, sequenced
FROM (SELECT workflow_key AS k, ord, seq, event_id, obs, kind, epoch, worker, ts_utc AS ts, lease_until,
             heartbeat, sink_result, effect_key, attrs, position,
             bool_or(seq IS NOT NULL) OVER (PARTITION BY workflow_key) AS sequenced
      FROM events
      WHERE workflow_key IN (SELECT DISTINCT workflow_key FROM events
                             WHERE lease_until IS NOT NULL OR heartbeat IS NOT NULL));

-- name: presence
-- Which of the candidate dimensions appear in the attrs of those events (the default dimensions
-- are used only when present): their 1-based positions in $paths, as one list.
SELECT coalesce(list(DISTINCT i), []) FROM (
    SELECT unnest(v) AS x, generate_subscripts(v, 1) AS i
    FROM (SELECT json_extract_string(attrs, $paths::VARCHAR[]) AS v FROM lh_events WHERE attrs IS NOT NULL))
WHERE x IS NOT NULL;

-- name: keys
-- Every workflow key with its dimension values: per dimension, the first non-null value in order.
CREATE OR REPLACE TEMP TABLE lh_keys AS
WITH kv AS (
    SELECT k, i, arg_min(v, (s, event_id, obs)) AS v
    FROM (SELECT k, s, event_id, obs,
                 unnest(json_extract_string(attrs, $paths::VARCHAR[])) AS v,
                 generate_subscripts(json_extract_string(attrs, $paths::VARCHAR[]), 1) AS i
          FROM lh_events WHERE attrs IS NOT NULL AND len($paths::VARCHAR[]) > 0)
    WHERE v IS NOT NULL
    GROUP BY k, i
), grid AS (
    SELECT k, i FROM (SELECT DISTINCT k FROM lh_events), range(1, len($paths::VARCHAR[]) + 1) r(i)
)
SELECT k, list(v ORDER BY i) AS dims FROM grid LEFT JOIN kv USING (k, i) GROUP BY k
UNION ALL
SELECT DISTINCT k, []::VARCHAR[] FROM lh_events WHERE len($paths::VARCHAR[]) = 0;

-- name: takeovers
-- Each placed acquisition that raised the key's highest epoch after the first, with what the
-- displaced owner (the previous highest epoch) had shown before it: any evidence of its own (a
-- reclaim), its last worker, its last granted lease_until and the ts of its last heartbeat=ok.
-- Before the takeover means lower in order for a placed event and an earlier ts for an unplaced
-- one; the latest is the last placed one unless an unplaced one has a later ts
-- (lease_rules: "Order relative to a takeover", and latest).
CREATE OR REPLACE TEMP TABLE lh_takeovers AS
WITH acq AS (
    SELECT k, s, epoch, worker, ts,
           max(epoch) OVER (PARTITION BY k ORDER BY s, event_id, obs
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max
    FROM lh_events WHERE kind = 'lease_acquired' AND epoch IS NOT NULL AND NOT unplaced
), t AS (
    SELECT k, s, epoch, worker, ts, prev_max AS displaced FROM acq WHERE epoch > prev_max
), seen AS (
    SELECT t.k, t.s, t.epoch, t.worker, t.ts, t.displaced,
           arg_max(e.worker, (e.s, e.event_id, e.obs)) FILTER (WHERE NOT e.unplaced) AS p_worker,
           arg_max(e.worker, (e.ts, e.obs)) FILTER (WHERE e.unplaced) AS u_worker,
           coalesce(bool_or(e.kind <> 'lease_acquired' AND NOT list_contains($recorded, e.kind)), false) AS reclaim,
           arg_max(e.lease_until, (e.s, e.event_id, e.obs))
               FILTER (WHERE e.lease_until IS NOT NULL AND NOT e.unplaced) AS p_until,
           arg_max_null(e.ts, (e.s, e.event_id, e.obs))
               FILTER (WHERE e.lease_until IS NOT NULL AND NOT e.unplaced) AS p_until_ts,
           arg_max(e.lease_until, (e.ts, e.obs)) FILTER (WHERE e.lease_until IS NOT NULL AND e.unplaced) AS u_until,
           max(e.ts) FILTER (WHERE e.lease_until IS NOT NULL AND e.unplaced) AS u_until_ts,
           arg_max(e.ts, (e.s, e.event_id, e.obs))
               FILTER (WHERE e.heartbeat = 'ok' AND e.ts IS NOT NULL AND NOT e.unplaced) AS p_ok,
           max(e.ts) FILTER (WHERE e.heartbeat = 'ok' AND e.unplaced) AS u_ok
    FROM t LEFT JOIN lh_events e
      ON e.k = t.k AND e.epoch = t.displaced
     AND CASE WHEN e.unplaced THEN e.ts < t.ts ELSE e.s < t.s END
    GROUP BY t.k, t.s, t.epoch, t.worker, t.ts, t.displaced
)
SELECT k, s, epoch, worker, ts, displaced, coalesce(p_worker, u_worker) AS displaced_worker, reclaim,
       CASE WHEN u_until_ts IS NOT NULL AND (p_until IS NULL OR p_until_ts IS NULL OR u_until_ts > p_until_ts)
            THEN u_until ELSE p_until END AS last_until,
       CASE WHEN u_ok IS NOT NULL AND (p_ok IS NULL OR u_ok > p_ok) THEN u_ok ELSE p_ok END AS last_ok
FROM seen;

-- name: gaps
-- Gaps between consecutive heartbeat attempts ($attempts: lease_rules.ATTEMPTS, ok and lost) of
-- one (key, epoch), by ts, in ms: placed or not, arrival order never matters.
CREATE OR REPLACE TEMP TABLE lh_gaps AS
SELECT k, epoch, gap FROM (
    SELECT k, epoch, epoch_ms(ts) - epoch_ms(lag(ts) OVER (PARTITION BY k, epoch ORDER BY ts)) AS gap
    FROM lh_events WHERE list_contains($attempts, heartbeat) AND ts IS NOT NULL AND epoch IS NOT NULL)
WHERE gap IS NOT NULL;

-- name: grants
-- Every grant (an acquisition) or extension (any other event) carrying lease_until: the lease
-- length it gave and, for an extension, what was left of the previous lease of its epoch (ms).
-- Previous by ts (an event without ts first, then placed order): an unplaced heartbeat's
-- extension is measured like any other.
CREATE OR REPLACE TEMP TABLE lh_grants AS
SELECT k, epoch, s, ts, obs, worker, kind = 'lease_acquired' AS is_grant, lease_until,
       epoch_ms(lease_until) - epoch_ms(ts) AS lease_ms,
       CASE WHEN kind <> 'lease_acquired'
            THEN epoch_ms(lag(lease_until) OVER (PARTITION BY k, epoch ORDER BY ts NULLS FIRST, s, event_id, obs))
                 - epoch_ms(ts) END AS remaining_ms
FROM lh_events WHERE lease_until IS NOT NULL AND epoch IS NOT NULL;

-- name: key_metrics
-- The section 7 metrics per workflow key.
CREATE OR REPLACE TEMP TABLE lh_key_metrics AS
WITH base AS (
    SELECT k, count(*) FILTER (WHERE kind = 'lease_acquired') AS leases,
           count(*) FILTER (WHERE heartbeat = 'lost') AS extension_failures
    FROM lh_events GROUP BY k
), t AS (
    SELECT k, count(*) FILTER (WHERE reclaim) AS reclaims,
           count(*) FILTER (WHERE last_until <= ts) AS expired_leases,
           median(epoch_ms(ts) - epoch_ms(last_ok)) AS age_median, max(epoch_ms(ts) - epoch_ms(last_ok)) AS age_max
    FROM lh_takeovers GROUP BY k
), g AS (
    SELECT k, count(*) AS gaps, median(gap) AS h, max(gap) AS h_max FROM lh_gaps GROUP BY k
), l AS (
    SELECT k, min(lease_ms) AS lease_min, median(lease_ms) AS lease_median, min(remaining_ms) AS remaining_min
    FROM lh_grants GROUP BY k
)
SELECT b.k, ks.dims, b.leases, coalesce(t.reclaims, 0) AS reclaims,
       coalesce(t.expired_leases, 0) AS expired_leases, b.extension_failures,
       coalesce(g.gaps, 0) AS gaps, g.h, g.h_max, l.lease_min, l.lease_median, l.remaining_min,
       t.age_median, t.age_max
FROM base b JOIN lh_keys ks ON ks.k = b.k
LEFT JOIN t ON t.k = b.k LEFT JOIN g ON g.k = b.k LEFT JOIN l ON l.k = b.k;

-- name: group_metrics
-- The same metrics per dimension group, pooled over the group's keys (medians over all of the
-- group's gaps and grants, not medians of medians), with the shortest grant (its key, position
-- and epoch: where a lease_timing_risk points), and for the chart every gap and every heartbeat
-- age at a takeover, sorted.
CREATE OR REPLACE TEMP TABLE lh_group_metrics AS
WITH counts AS (
    SELECT dims, count(*) AS keys, sum(leases) AS leases, sum(reclaims) AS reclaims,
           sum(expired_leases) AS expired_leases, sum(extension_failures) AS extension_failures
    FROM lh_key_metrics GROUP BY dims
), g AS (
    SELECT ks.dims, count(*) AS gaps, median(gap) AS h, max(gap) AS h_max, list(gap ORDER BY gap) AS all_gaps
    FROM lh_gaps JOIN lh_keys ks USING (k) GROUP BY ks.dims
), l AS (
    SELECT ks.dims, min(lease_ms) AS lease_min, median(lease_ms) AS lease_median,
           min(remaining_ms) AS remaining_min,
           arg_min(gr.k, (gr.lease_ms, gr.k, gr.s, gr.obs)) FILTER (WHERE lease_ms IS NOT NULL) AS at_k,
           arg_min_null(gr.s, (gr.lease_ms, gr.k, gr.s, gr.obs)) FILTER (WHERE lease_ms IS NOT NULL) AS at_s,
           arg_min(gr.epoch, (gr.lease_ms, gr.k, gr.s, gr.obs)) FILTER (WHERE lease_ms IS NOT NULL) AS at_epoch
    FROM lh_grants gr JOIN lh_keys ks USING (k) GROUP BY ks.dims
), a AS (
    SELECT ks.dims, median(age) AS age_median, max(age) AS age_max,
           list(age ORDER BY age) FILTER (WHERE age IS NOT NULL) AS all_ages
    FROM (SELECT k, epoch_ms(ts) - epoch_ms(last_ok) AS age FROM lh_takeovers) JOIN lh_keys ks USING (k)
    GROUP BY ks.dims
)
SELECT c.*, coalesce(g.gaps, 0) AS gaps, g.h, g.h_max, l.lease_min, l.lease_median, l.remaining_min,
       a.age_median, a.age_max, l.at_k, l.at_s, l.at_epoch, coalesce(g.all_gaps, []) AS all_gaps,
       coalesce(a.all_ages, []) AS all_ages
FROM counts c LEFT JOIN g USING (dims) LEFT JOIN l USING (dims) LEFT JOIN a USING (dims);

-- name: group_rows
SELECT dims, keys, leases, reclaims, expired_leases, extension_failures, gaps, h, h_max,
       lease_min, lease_median, remaining_min, age_median, age_max, at_k, at_s, at_epoch, all_gaps, all_ages
FROM lh_group_metrics;

-- name: key_rows
SELECT k, dims, leases, reclaims, expired_leases, extension_failures, gaps, h, h_max,
       lease_min, lease_median, remaining_min, age_median, age_max
FROM lh_key_metrics ORDER BY k;

-- name: takeover_rows
-- Every takeover of a key with lease evidence: the displaced owner's lease left at the
-- takeover's ts (negative: expired that long before) and its heartbeat age then (ms).
SELECT k, s, epoch, worker, displaced, displaced_worker, reclaim,
       epoch_ms(last_until) - epoch_ms(ts) AS remaining_ms, epoch_ms(ts) - epoch_ms(last_ok) AS age_ms,
       last_until
FROM lh_takeovers ORDER BY k, s;

-- name: late_leases
-- late_extension (lease_rules.is_late): an extension with less than one heartbeat interval H (of
-- its group, judged from $min_gaps gaps on) left. One row per lease (key, epoch) with late
-- extensions: how many, the least time left, and where that worst one was (s NULL: unplaced);
-- batch.py sums them per group (lease_rules.late_extensions).
SELECT ks.dims, gr.k, gr.epoch, count(*) AS extensions, min(gr.remaining_ms) AS least,
       arg_min_null(gr.s, (gr.remaining_ms, gr.ts, gr.s, gr.obs)) AS at_s,
       arg_min_null(gr.worker, (gr.remaining_ms, gr.ts, gr.s, gr.obs)) AS worker
FROM lh_grants gr JOIN lh_keys ks USING (k) JOIN lh_group_metrics m ON m.dims = ks.dims
WHERE NOT gr.is_grant AND gr.remaining_ms IS NOT NULL AND m.h IS NOT NULL AND m.gaps >= $min_gaps
  AND gr.remaining_ms < m.h
GROUP BY ks.dims, gr.k, gr.epoch;

-- name: diagnostic_rows
-- takeover_before_expiry: the displaced owner's lease was still running at the takeover's ts.
-- effect_after_lease_expiry: an attempt by an owner after its own last lease_until (the latest
-- by ts at or before the attempt's, unplaced extensions included). A rejection that answers an
-- earlier unresolved attempt of its (key, epoch, effect key) is that attempt's receipt (SPEC
-- section 3), not a new action: it is not counted again. An unplaced attempt (no seq in a key
-- ordered by seq) is judged by its ts too (SPEC revision 3.1: lease health reads ts for unplaced
-- events); it has no place, so it points at its global position (pos), never at an invented seq,
-- and, its order unknown, it is never taken for an earlier attempt's receipt.
-- Columns: kind, key, place (NULL: unplaced), epoch, worker, a, b (ms, or an epoch), lease_until,
-- effect_key, pos (an unplaced attempt's global position, else NULL).
SELECT 'takeover_before_expiry' AS kind, k, s, displaced AS epoch, displaced_worker AS worker,
       epoch_ms(last_until) - epoch_ms(ts) AS a, epoch AS b, last_until AS lease_until, NULL AS effect_key,
       NULL AS pos
FROM lh_takeovers WHERE last_until > ts
UNION ALL
SELECT 'effect_after_lease_expiry', k, s, epoch, worker, epoch_ms(ts) - epoch_ms(until), NULL, until,
       effect_key, CASE WHEN unplaced THEN pos END
FROM (
    SELECT *, lag(kind) OVER t AS prev_kind, lag(sink_result) OVER t AS prev_result
    FROM (SELECT *, last_value(lease_until IGNORE NULLS) OVER (
                        PARTITION BY k, epoch ORDER BY ts NULLS FIRST, s, event_id, obs
                        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS until
          FROM lh_events WHERE epoch IS NOT NULL)
    WHERE kind IN ('effect_attempted', 'effect_committed')
    WINDOW t AS (PARTITION BY k, epoch, effect_key, unplaced ORDER BY s, event_id, obs))
WHERE kind = 'effect_attempted' AND ts > until
  AND NOT (NOT unplaced AND sink_result IS NOT DISTINCT FROM 'rejected' AND prev_kind IS NOT DISTINCT FROM 'effect_attempted'
           AND prev_result IS DISTINCT FROM 'rejected');

-- name: places
-- Where the events at places ($keys[i], $places[i]) are: their seq (null in a key ordered by
-- observation, SPEC rev 3: no seq is invented) and their global position (the first, should two
-- share a seq).
SELECT e.k, e.s, CASE WHEN any_value(e.sequenced) THEN e.s END, min(e.pos)
FROM lh_events e
SEMI JOIN (SELECT unnest($keys::VARCHAR[]) AS k, unnest($places::BIGINT[]) AS s) w ON w.k = e.k AND w.s = e.s
GROUP BY e.k, e.s;

-- name: drop
DROP TABLE IF EXISTS lh_events; DROP TABLE IF EXISTS lh_keys; DROP TABLE IF EXISTS lh_takeovers;
DROP TABLE IF EXISTS lh_gaps; DROP TABLE IF EXISTS lh_grants; DROP TABLE IF EXISTS lh_key_metrics;
DROP TABLE IF EXISTS lh_group_metrics;
