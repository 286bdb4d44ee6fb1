-- Stage 4, detect: SPEC section 3 as set operations over the events table.
--
-- No sort or window runs over all events. Staleness needs, per (workflow_key, epoch), the seq at
-- which that epoch was displaced: a small table built from the acquisitions alone (their running
-- maximum gives the "records", acquisitions that raised the highest epoch, increasing in both seq
-- and epoch, so an ASOF join finds the earliest one above an epoch). Events are then hash-joined
-- against it. Windows run only over acquisitions and the commits of keys committed under two or
-- more epochs; only stale attempts are resolved; and the findings' events are picked from those
-- scratch tables, so the events table is scanned for the evidence columns once (evidence).

-- Unplaced events (SPEC rev 3: no seq in a key ordered by seq; ord is null) take no part in any
-- of it: they are never stale, never resolve, lower or verify anything. Positions (global
-- observation order) travel beside the order detection uses, for the *_position fields.

-- The scratch tables carry only the columns read after them: at ten million events they are
-- gigabytes, and what does not fit in memory is written out and read back.

-- Every join and group of detection is on a workflow key's 64-bit id, key_of(workflow_key) (k),
-- not on its string: the hash tables and sorts hold 8 bytes a key instead of a string (and its
-- pointer), and what detection hands explain has the strings joined back, in the strings' order.
-- The id is DuckDB's hash of the string, checked unique over the store's keys (key_ids): should
-- two keys share one, key_of is the string itself (string_keys), the same statements, exact.

-- name: hashed_keys
CREATE OR REPLACE TEMP MACRO key_of(w) AS hash(w);

-- name: string_keys
CREATE OR REPLACE TEMP MACRO key_of(w) AS w;

-- name: key_ids
-- Per workflow key: its id, events, acquisitions, whether any event lacks seq.
CREATE OR REPLACE TEMP TABLE key_counts AS
SELECT workflow_key, key_of(workflow_key) AS k, count(*) AS events,
       count(*) FILTER (WHERE kind = 'lease_acquired') AS acquisitions,
       bool_and(seq IS NULL) AS observed
FROM events GROUP BY workflow_key;

-- name: ids_collide
SELECT count(DISTINCT k) < count(*) FROM key_counts;

-- name: acquisitions
CREATE OR REPLACE TEMP TABLE acq AS
SELECT key_of(workflow_key) AS k, ord AS s, epoch, worker, ts_utc, event_id, obs, seq, position AS pos,
       max(epoch) OVER (PARTITION BY key_of(workflow_key) ORDER BY ord, event_id, obs
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max
FROM events WHERE kind = 'lease_acquired' AND ord IS NOT NULL;

-- name: records
CREATE OR REPLACE TEMP TABLE records AS
SELECT k, s, epoch, worker, ts_utc, pos,
       prev_max IS NOT NULL AS handover
FROM acq WHERE prev_max IS NULL OR epoch > prev_max;

-- name: key_epochs
-- Each (key, epoch) of the evidence, in one pass for displacement and unacquired_epoch:
-- its first place, and whether it holds owner evidence (not only outcome_verified).
-- Recorded outside an owner epoch (SPEC section 8): an epoch there is not its evidence.
-- seq is the first place's given seq: a placed event's ord is its seq, and a key ordered by
-- observation has no seq at all (store.sql's observed_order), so it is min(seq). The first
-- event's position is looked up only for the few epochs never acquired (diagnostic_rows): an
-- arg_min over (ord, event_id, obs) here, for every (key, epoch), took two thirds of the statement.
CREATE OR REPLACE TEMP TABLE key_epochs AS
SELECT key_of(workflow_key) AS k, epoch AS p, min(ord) AS s, bool_or(kind <> 'outcome_verified') AS evidence,
       min(seq) AS seq
FROM events
WHERE kind NOT IN ('lease_acquired', 'authority_granted', 'authority_revoked', 'effect_compensated')
  AND ord IS NOT NULL
GROUP BY key_of(workflow_key), epoch;

-- name: displacement
-- For each (k, p) with evidence, the acquisition that displaced epoch p: the earliest record
-- with a higher epoch.
CREATE OR REPLACE TEMP TABLE displaced AS
SELECT ep.k, ep.p, r.s AS t_seq, r.pos AS t_pos
FROM (SELECT k, p FROM key_epochs WHERE evidence) ep
ASOF JOIN records r ON ep.k = r.k AND ep.p < r.epoch;

-- name: stale
-- Every stale event: a lower epoch's evidence at a seq above its displacement.
CREATE OR REPLACE TEMP TABLE stale AS
SELECT key_of(e.workflow_key) AS k, e.ord AS s, e.kind, e.epoch, e.effect_key, e.sink_result, d.t_seq,
       e.event_id, e.obs, d.t_pos, e.position AS pos
FROM events e JOIN displaced d ON key_of(e.workflow_key) = d.k AND e.epoch = d.p
WHERE e.kind IN ('progress', 'effect_attempted', 'effect_committed') AND e.ord > d.t_seq;

-- name: commits
-- The commits of the keys that committed under two or more epochs: only those can hold a double
-- commit (about a sixth of the keys of a big log), so the windows below run over them alone.
CREATE OR REPLACE TEMP TABLE commits AS
SELECT key_of(workflow_key) AS k, ord AS s, epoch, effect_key, step_id, event_id, obs
FROM events
WHERE kind = 'effect_committed' AND ord IS NOT NULL
  AND key_of(workflow_key) IN (SELECT key_of(workflow_key) FROM events WHERE kind = 'effect_committed'
                               AND ord IS NOT NULL GROUP BY key_of(workflow_key)
                               HAVING min(epoch) < max(epoch) OR count(epoch) < count(*));

-- name: resolutions
-- Each stale attempt's outcome is the next later rejection or commit of its (key, epoch, effect
-- key); only stale attempts are resolved (the others make no finding), against the resolvers of
-- their triples alone. Two resolvers at one seq (an ordering conflict): the first in (event_id,
-- obs) order, the order the live detector is fed them in; r_obs names it (the other is no
-- receipt: see findings).
CREATE OR REPLACE TEMP TABLE resolutions AS
WITH attempts AS (
    SELECT k, s, epoch, effect_key FROM stale
    WHERE kind = 'effect_attempted' AND sink_result IS DISTINCT FROM 'rejected'
), resolvers AS (
    SELECT key_of(e.workflow_key) AS k, e.epoch, e.effect_key, e.ord AS s,
           min({'event_id': e.event_id, 'obs': e.obs, 'committed': e.kind = 'effect_committed',
                'pos': e.position}) AS first
    FROM events e
    SEMI JOIN (SELECT DISTINCT k, epoch, effect_key FROM attempts) t
        ON key_of(e.workflow_key) = t.k AND e.epoch = t.epoch AND e.effect_key = t.effect_key
    WHERE (e.kind = 'effect_committed' OR (e.kind = 'effect_attempted' AND e.sink_result = 'rejected'))
      AND e.ord IS NOT NULL
    GROUP BY key_of(e.workflow_key), e.epoch, e.effect_key, e.ord
)
SELECT a.k, a.s, a.epoch, a.effect_key, r.s AS r_seq, r.first.event_id AS r_eid, r.first.obs AS r_obs,
       r.first.pos AS r_pos,
       CASE WHEN r.first.committed THEN 'committed' WHEN NOT r.first.committed THEN 'rejected' END AS resolved_as
FROM attempts a
ASOF LEFT JOIN resolvers r
    ON a.k = r.k AND a.epoch = r.epoch AND a.effect_key = r.effect_key AND a.s < r.s;

-- name: first_commits
-- The first commit of each epoch for each effect key, and for each step id (epochs whose first
-- commits share a seq, an ordering conflict, in epoch order: the higher one is the double commit).
-- Only a second epoch's first commit can be a double commit (findings reads nth > 1), so only the
-- effect keys and steps committed under two epochs or more (a null epoch is one) are grouped
-- by epoch and windowed, and only those rows kept: nearly every step of a big log commits under
-- one epoch, and grouping every commit by epoch made these the slowest statements of detection.
CREATE OR REPLACE TEMP TABLE first_commits AS
WITH firsts AS (
    SELECT c.k, c.effect_key, c.epoch, min(c.s) AS s FROM commits c
    SEMI JOIN (SELECT k, effect_key FROM commits GROUP BY k, effect_key
               HAVING min(epoch) < max(epoch) OR count(epoch) BETWEEN 1 AND count(*) - 1) m
        ON m.k = c.k AND m.effect_key IS NOT DISTINCT FROM c.effect_key
    GROUP BY c.k, c.effect_key, c.epoch
)
SELECT k, effect_key, epoch, s,
       row_number() OVER (PARTITION BY k, effect_key ORDER BY s, epoch) AS nth,
       list(epoch) OVER (PARTITION BY k, effect_key ORDER BY s, epoch
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS epochs
FROM firsts
QUALIFY nth > 1;

-- name: step_commits
CREATE OR REPLACE TEMP TABLE step_commits AS
WITH firsts AS (
    SELECT c.k, c.step_id, c.epoch, min(c.s) AS s, arg_min(c.effect_key, (c.s, c.event_id, c.obs)) AS effect_key
    FROM commits c
    SEMI JOIN (SELECT k, step_id FROM commits WHERE step_id IS NOT NULL GROUP BY k, step_id
               HAVING min(epoch) < max(epoch) OR count(epoch) BETWEEN 1 AND count(*) - 1) m
        ON m.k = c.k AND m.step_id = c.step_id
    GROUP BY c.k, c.step_id, c.epoch
)
SELECT k, step_id, epoch, s, effect_key,
       row_number() OVER (PARTITION BY k, step_id ORDER BY s, epoch) AS nth,
       list(epoch) OVER (PARTITION BY k, step_id ORDER BY s, epoch
                         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS epochs,
       list(effect_key) OVER (PARTITION BY k, step_id ORDER BY s, epoch
                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS earlier_keys
FROM firsts
QUALIFY nth > 1;

-- name: findings
-- One row per finding: grade, the event it sits on, and what resolved it. em_* is the event
-- that made an attempt a finding (its resolution or its own rejection) in feed order, null for
-- one only the end of the log settles: of two attempts at one seq that grade alike (an ordering
-- conflict, one finding) the one shown is the first the live detector reports.
CREATE OR REPLACE TEMP TABLE raw_findings AS
SELECT 'stale_activity' AS grade, k, s, t_seq, NULL::VARCHAR AS outcome, NULL::BIGINT AS receipt_seq,
       NULL::BIGINT[] AS epochs, false AS unstable, [epoch] AS on_epochs, event_id AS eid,
       NULL::BIGINT AS em_seq, NULL::VARCHAR AS em_eid, NULL::BIGINT AS em_obs,
       t_pos, NULL::BIGINT AS receipt_pos
FROM stale WHERE kind = 'progress'
UNION ALL
-- A stale attempt: what resolved it (if anything) goes to Python, where rules.attempt_grade
-- grades it; "attempt" stands for rejected_attempt or stale_attempt until then.
SELECT 'attempt', st.k, st.s, st.t_seq, r.resolved_as, r.r_seq, NULL, false, [st.epoch], st.event_id,
       r.r_seq, r.r_eid, r.r_obs, st.t_pos, r.r_pos
FROM stale st JOIN resolutions r ON st.k = r.k AND st.s = r.s AND st.epoch = r.epoch
    AND st.effect_key = r.effect_key
WHERE st.kind = 'effect_attempted' AND coalesce(st.sink_result, '') <> 'rejected'
UNION ALL
-- A stale rejection is a finding of its own unless it is the receipt of a stale attempt (the
-- resolution names it: a commit or another rejection at its seq may have resolved the attempt).
SELECT 'attempt', st.k, st.s, st.t_seq, 'rejected', st.s, NULL, false, [st.epoch], st.event_id,
       st.s, st.event_id, st.obs, st.t_pos, st.pos
FROM stale st
WHERE st.kind = 'effect_attempted' AND st.sink_result = 'rejected'
  AND NOT EXISTS (
      SELECT 1 FROM resolutions r JOIN stale a ON a.k = r.k AND a.s = r.s AND a.epoch = r.epoch
          AND a.effect_key = r.effect_key
      WHERE r.k = st.k AND r.r_seq = st.s AND r.epoch = st.epoch AND r.effect_key = st.effect_key
        AND r.r_obs = st.obs AND a.kind = 'effect_attempted')
UNION ALL
SELECT 'stale_commit', k, s, t_seq, 'committed', NULL, NULL, false, [epoch], event_id, NULL, NULL, NULL,
       t_pos, NULL
FROM stale WHERE kind = 'effect_committed'
UNION ALL
SELECT 'double_commit', k, s, NULL, 'committed', NULL,
       list_sort(list_distinct(flatten(list(epochs)))), bool_or(unstable), list(epoch), NULL, NULL, NULL, NULL,
       NULL, NULL
FROM (
    SELECT k, s, epochs, false AS unstable, epoch FROM first_commits WHERE nth > 1
    UNION ALL
    SELECT k, s, epochs, true, epoch FROM step_commits
    WHERE nth > 1 AND len(list_filter(earlier_keys, lambda x: x IS DISTINCT FROM effect_key)) > 0
)
GROUP BY k, s;

-- name: picked
-- The event each finding sits on: the stale event itself, or for a double commit a commit under
-- an epoch it added (not a retry of an earlier one); should two fit (an ordering conflict), the
-- first reported (em_*), then the least event_id. obs is the row's identity (two rows may share an event_id: an
-- event_id_conflict). Every candidate is in a scratch table already: an event at a stale event's
-- (key, seq, kind, epoch) is stale itself, and a double commit's key has all its commits in
-- commits; so no scan of the events table is needed.
-- It and the next step are tables of their own: planned as one query with finding_rows, the
-- joins against all events cost three times as much at ten million events.
CREATE OR REPLACE TEMP TABLE picked AS
SELECT f.*, e.obs
FROM raw_findings f JOIN (
    SELECT k, s, kind, epoch, event_id, obs, false AS twice FROM stale
    UNION ALL
    SELECT k, s, 'effect_committed', epoch, event_id, obs, true FROM commits) e
  ON e.k = f.k AND e.s = f.s AND e.twice = (f.grade = 'double_commit')
 AND e.kind = CASE f.grade WHEN 'stale_activity' THEN 'progress'
                           WHEN 'stale_commit' THEN 'effect_committed'
                           WHEN 'double_commit' THEN 'effect_committed'
                           ELSE 'effect_attempted' END
 AND list_contains(f.on_epochs, e.epoch) AND (f.eid IS NULL OR e.event_id = f.eid)
-- A window, not DISTINCT ON: that one is planned as an arg_min per column, each building the sort key.
QUALIFY row_number() OVER (PARTITION BY f.grade, f.k, f.s, f.outcome
                           ORDER BY f.em_seq NULLS LAST, f.em_eid, f.em_obs, e.event_id, e.obs) = 1;

-- name: evidence
CREATE OR REPLACE TEMP TABLE evidence AS
SELECT f.*, e.kind, e.epoch, e.worker, e.effect_key, e.step_id, e.sink, e.reporter, e.ts,
       e.ts_utc, e.attrs, e.sink_result, e.seq, e.source_id, e.line, e.position
FROM picked f JOIN events e ON e.obs = f.obs;

-- name: scratch
-- The tables explain reads as streams, each through its own cursor, sit in a database of their
-- own: a cursor is a connection of its own, and cannot see another connection's temp tables. $1
-- is a file in the store's own private directory, or ':memory:' for a store opened read-only
-- (``detect``); READ_WRITE whatever the store is.
ATTACH IF NOT EXISTS $1 AS auditor_detect (READ_WRITE);

-- name: owners
-- The owner at each (key, place) with a finding: the highest epoch acquired at a lower seq (the
-- latest record before it). It depends on the place alone, so it is found on narrow rows, in a
-- statement of its own: an ASOF join sorts both its sides, and with every evidence column on its
-- left (in finding_rows) it spilled: 3.6 s of 3.5 under the memory a 40M audit has, on the stored
-- 10M log; joined in finding_rows, the statement ran out of memory at 40M.
-- Two records can share a seq (an ordering conflict): the owner after it is the higher epoch.
CREATE OR REPLACE TEMP TABLE owners AS
SELECT p.k, p.s, c.epoch, c.worker
FROM (SELECT DISTINCT k, s FROM evidence) p
ASOF LEFT JOIN (SELECT k, s, max(epoch) AS epoch, arg_max(worker, epoch) AS worker
                FROM records WHERE k IN (SELECT k FROM finding_keys) GROUP BY k, s) c
    ON p.k = c.k AND p.s > c.s;

-- name: finding_rows
-- The findings with the evidence of the event they sit on (and where it is written: file, line;
-- its given seq, null in a key ordered by observation) and the owner at that point (owners). A double commit's
-- transition is its lowest epoch's displacement, when that came before the commit.
CREATE OR REPLACE TABLE auditor_detect.finding_rows AS
SELECT f.grade, fk.workflow_key AS k, f.s, f.kind, f.epoch, f.worker, c.epoch AS current_epoch,
       c.worker AS current_worker,
       coalesce(f.t_seq, CASE WHEN d.t_seq < f.s THEN d.t_seq END) AS transition_seq,
       f.effect_key, f.step_id, f.sink, f.reporter, f.ts, f.outcome, f.receipt_seq,
       -- ts_utc in microseconds: a time zone's Arrow column imports pandas when read into Python
       f.epochs, f.unstable, epoch_us(f.ts_utc) AS ts_utc,
       -- evidence whose attributes were cut (otel.capped): its incident's confidence is medium
       coalesce(contains(f.attrs, '"otel.capped": true'), false) AS capped,
       f.sink_result, f.seq, src.name, f.line,
       f.position, coalesce(f.t_pos, CASE WHEN d.t_seq < f.s THEN d.t_pos END) AS transition_position,
       f.receipt_pos, f.em_seq, f.em_eid, f.em_obs, f.obs
FROM evidence f
JOIN sources src ON src.source_id = f.source_id
JOIN finding_keys fk ON fk.k = f.k
LEFT JOIN owners c ON c.k = f.k AND c.s = f.s
LEFT JOIN displaced d ON d.k = f.k AND d.p = f.epochs[1]
-- Written in the order explain reads them (each key's order; two attempts of one seq that grade
-- alike are one finding, the first reported): a table keeps the order of the ORDER BY that wrote
-- it, and read_findings streams it as it lies (under Store.in_order). Sorted on read, every finding row was held in DuckDB's memory until the last
-- key was explained (309 MB of 1,361 at ten million events on 141,001 keys).
ORDER BY fk.workflow_key, f.s, f.em_seq NULLS LAST, f.em_eid, f.em_obs, f.obs;

-- name: read_findings
-- The table's own order (finding_rows), read under Store.in_order, with each finding's id and its
-- incident's (rules/ids.py: finding_id, incident_id; one sha256 each, on DuckDB's threads, not
-- Python's one: 5 % of explain at ten million events). An attempt's grade is its resolution's
-- (rules.attempt_grade: rejected, or else a stale attempt); a double commit joins the incident of
-- the lowest epoch that committed (rules.displaced_epoch, over rules.TWICE: no row here is
-- compensated yet, authorize compensates after and keeps the double commit's incident).
SELECT * EXCLUDE (em_seq, em_eid, em_obs, obs, g),
       'f-' || left(sha256(k || chr(31) || g || chr(31) || s::VARCHAR), 16) AS finding_id,
       'i-' || left(sha256(k || chr(31) || coalesce(
           (CASE WHEN g IN ('double_commit', 'compensated') AND len(epochs) > 0 THEN list_min(epochs)
                 ELSE epoch END)::VARCHAR, '')), 16) AS incident_id
FROM (SELECT *, CASE WHEN grade <> 'attempt' THEN grade WHEN outcome = 'rejected' THEN 'rejected_attempt'
                     ELSE 'stale_attempt' END AS g
      FROM auditor_detect.finding_rows);

-- name: release_key_epochs
DROP TABLE key_epochs;

-- name: release_evidence
-- The finding rows are in their own table now.
DROP TABLE evidence; DROP TABLE owners;

-- name: release_picked
-- The findings' events have their evidence now.
DROP TABLE picked; DROP TABLE raw_findings;

-- name: diagnostic_rows
-- The diagnostics, and below the per-key counts, are whole-store aggregates (ordering_conflict
-- groups every event by key and seq): they are built with the scratch tables.
CREATE OR REPLACE TEMP TABLE diagnostic_rows AS
SELECT 'epoch_regression' AS kind, k, s, epoch,
       'acquired epoch ' || epoch || ' (' || worker || ') while epoch ' || prev_max ||
       ' was already the highest' AS detail, seq, pos
FROM acq WHERE epoch <= prev_max
UNION ALL
-- its position: the first event's at that place (ties in event_id, obs order, as everywhere)
SELECT 'unacquired_epoch', u.k, u.s, u.p,
       'evidence under epoch ' || u.p || ' but this key never shows it acquired', u.seq,
       arg_min(e.position, (e.event_id, e.obs))
FROM (SELECT k, p, s, seq FROM key_epochs ke
      WHERE p IS NOT NULL AND NOT EXISTS (SELECT 1 FROM acq a WHERE a.k = ke.k AND a.epoch = ke.p)) u
JOIN events e ON key_of(e.workflow_key) = u.k AND e.epoch = u.p AND e.ord = u.s
WHERE e.kind NOT IN ('lease_acquired', 'authority_granted', 'authority_revoked', 'effect_compensated')
GROUP BY u.k, u.s, u.p, u.seq
UNION ALL
-- Only events whose id is written can share a seq: the store writes the id of every event in a
-- group of more than one at a (workflow_key, seq) (store.sql's fill_ids; a Spark partition and a
-- store written before hold every id). So the groups are counted over those rows alone, not over
-- a hash table of every event (0.69 s against 0.002 s at two million events, bench/RESULTS.md).
SELECT 'ordering_conflict', key_of(workflow_key), seq, NULL,
       count(*) || ' different events share seq ' || seq, seq, min(position)
FROM events WHERE seq IS NOT NULL AND ord IS NOT NULL AND event_id IS NOT NULL
GROUP BY key_of(workflow_key), seq HAVING count(*) > 1;

-- name: diagnostics
SELECT d.kind, w.workflow_key, d.s, d.epoch, d.detail, d.seq, d.pos
FROM diagnostic_rows d JOIN key_counts w ON w.k = d.k;

-- name: release
-- What only the findings needed goes before the wide joins against events below.
DROP TABLE stale; DROP TABLE commits; DROP TABLE resolutions; DROP TABLE first_commits;
DROP TABLE step_commits;

-- name: finding_keys
-- The workflow keys with findings, their ids and strings: the facts below are fetched for these
-- alone (an audit of ten million events has a million keys, most of them clean).
CREATE OR REPLACE TEMP TABLE finding_keys AS
SELECT w.k, w.workflow_key FROM key_counts w SEMI JOIN raw_findings f ON f.k = w.k;

-- name: acquirers
-- Who acquired each epoch, for the displaced and current owners of an incident.
CREATE OR REPLACE TABLE auditor_detect.acquirer_rows AS
SELECT fk.workflow_key AS k, a.epoch, arg_min(a.worker, (a.s, a.event_id, a.obs)) AS worker
FROM acq a JOIN finding_keys fk ON fk.k = a.k GROUP BY fk.workflow_key, a.epoch
ORDER BY fk.workflow_key, a.epoch;

-- name: key_facts
-- What the incidents of a key with findings say besides the findings, one row per fact, in key
-- order, each read as a stream beside the keys (under Store.in_order): the handovers (takeovers or
-- clean; the latest at a place is the higher epoch, as for the owner above), and the last
-- outcome_verified of each effect key (its place in the key's order, its position). Lists of
-- them aggregated per key were held whole in one statement's memory with the keys' joins: at
-- 40 million events on 564,001 keys the statement ran out of its memory, and took 85 s.
CREATE OR REPLACE TABLE auditor_detect.handover_rows AS
SELECT fk.workflow_key AS k, r.s, r.epoch, r.worker, epoch_us(r.ts_utc) AS ts
FROM records r JOIN finding_keys fk ON fk.k = r.k WHERE r.handover
ORDER BY fk.workflow_key, r.s, r.epoch;
CREATE OR REPLACE TABLE auditor_detect.verification_rows AS
SELECT workflow_key AS k, effect_key, max(ord) AS place, arg_max(position, (ord, obs)) AS position
FROM events WHERE kind = 'outcome_verified' AND ord IS NOT NULL
 AND workflow_key IN (SELECT workflow_key FROM finding_keys)
GROUP BY workflow_key, effect_key
ORDER BY k, effect_key;

-- name: keys
-- Every workflow key with its counts, in key order: marked when it has findings or falls under
-- the authority rules; authority: true for a key under the authority rules (SPEC section 8,
-- opt-in), false for one with compensation records only. Its facts are in key_facts' tables.
CREATE OR REPLACE TABLE auditor_detect.keys AS
WITH authority AS (
    SELECT k, bool_or(opted) AS authority FROM (
        SELECT DISTINCT key_of(workflow_key) AS k, true AS opted FROM events
        WHERE (kind IN ('authority_granted', 'authority_revoked', 'resumed', 'revalidated') OR authority_id IS NOT NULL)
          AND ord IS NOT NULL
        UNION ALL
        SELECT DISTINCT key_of(workflow_key), false FROM events WHERE kind = 'effect_compensated' AND ord IS NOT NULL)
    GROUP BY k
)
-- handovers: the records that raised the epoch
SELECT w.workflow_key, w.events, w.acquisitions, w.observed, coalesce(h.n, 0) AS handovers,
       fk.k IS NOT NULL OR a.authority IS NOT NULL AS marked, fk.k IS NOT NULL AS found, a.authority
FROM key_counts w
LEFT JOIN (SELECT k, count(*) AS n FROM records WHERE handover GROUP BY k) h ON h.k = w.k
LEFT JOIN finding_keys fk ON fk.k = w.k
LEFT JOIN authority a ON a.k = w.k
-- In key order, as finding_rows, for the same reason: read_keys streams it as it lies.
ORDER BY w.workflow_key;

-- name: read_keys
-- The table's own order (keys), read under Store.in_order.
SELECT * FROM auditor_detect.keys;

-- name: read_handovers
SELECT * FROM auditor_detect.handover_rows;

-- name: read_acquirers
SELECT * FROM auditor_detect.acquirer_rows;

-- name: read_verifications
SELECT * FROM auditor_detect.verification_rows;

-- name: newest_ts
SELECT max(ts_utc) FROM events;

-- name: drop
DROP TABLE IF EXISTS acq; DROP TABLE IF EXISTS records; DROP TABLE IF EXISTS displaced;
DROP TABLE IF EXISTS key_epochs; DROP TABLE IF EXISTS diagnostic_rows; DROP TABLE IF EXISTS key_counts;
DROP TABLE IF EXISTS stale; DROP TABLE IF EXISTS commits; DROP TABLE IF EXISTS resolutions;
DROP TABLE IF EXISTS first_commits; DROP TABLE IF EXISTS step_commits;
DROP TABLE IF EXISTS raw_findings; DROP TABLE IF EXISTS finding_keys; DROP TABLE IF EXISTS picked;
DROP TABLE IF EXISTS evidence; DROP TABLE IF EXISTS owners; DETACH DATABASE IF EXISTS auditor_detect;

-- name: event_rows
-- Every event with where it came from, in each key's order: the live detector's feed when it is
-- checked against this one. ord is the position (seq, or the observation rank of a key lacking seq).
-- Read by name (core/rows.py); the optional fields are generated from the registry (core/columns.py).
SELECT e.ord, e.workflow_key, e.kind, e.epoch, e.worker, e.effect_key, e.sink, e.sink_result,
       e.reporter, e.step_id, e.ts, e.event_id, e.attrs, src.name AS file, e.line, e.seq IS NULL AS observed,
       e.position, {{optional:e}}
FROM identified_events() e JOIN sources src USING (source_id)
WHERE e.ord IS NOT NULL
ORDER BY e.workflow_key, e.ord, e.event_id, e.obs;

-- name: timeline_rows
-- The first $2 events of each workflow key in $1, as event_rows, with what a timeline shows of
-- each: the key's event count, H(k, s) (the highest epoch acquired at a lower position: a
-- non-acquisition under a lower epoch is stale evidence, SPEC section 3), and for an acquisition
-- the highest epoch acquired before it in the order the acquisitions statement uses (a handover
-- raises it; an acquisition that does not is an epoch regression). H comes from one row per
-- position, so no window frame does arithmetic on a position (it may be any int64).
WITH ev AS (
    SELECT e.* REPLACE (event_id_of(e) AS event_id), src.name AS file FROM events e JOIN sources src USING (source_id)
    WHERE e.workflow_key IN (SELECT unnest($1::VARCHAR[])) AND e.ord IS NOT NULL
), per_position AS (
    SELECT workflow_key, ord,
           max(max(epoch) FILTER (WHERE kind = 'lease_acquired')) OVER (
               PARTITION BY workflow_key ORDER BY ord
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS highest_before
    FROM ev GROUP BY workflow_key, ord
)
SELECT * EXCLUDE (n, obs) FROM (
    SELECT e.ord, e.workflow_key, e.kind, e.epoch, e.worker, e.effect_key, e.sink, e.sink_result,
           e.reporter, e.step_id, e.ts, e.event_id, e.attrs, e.file, e.line, e.seq IS NULL AS observed,
           e.position, count(*) OVER (PARTITION BY e.workflow_key) AS total, p.highest_before,
           CASE WHEN e.kind = 'lease_acquired' THEN max(e.epoch) FILTER (WHERE e.kind = 'lease_acquired') OVER (
               PARTITION BY e.workflow_key ORDER BY e.ord, e.event_id, e.obs
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) END AS prev_max,
           {{optional:e}}, e.obs,
           row_number() OVER (PARTITION BY e.workflow_key ORDER BY e.ord, e.event_id, e.obs) AS n
    FROM ev e JOIN per_position p USING (workflow_key, ord))
WHERE n <= $2
ORDER BY workflow_key, ord, event_id, obs;

-- name: authority_events
-- Every event of the keys in $1 (those under the authority rules or with compensation records, SPEC
-- section 8) in each key's order, as event_rows with the parsed ts (ts_utc).
SELECT e.ord, e.workflow_key, e.kind, e.epoch, e.worker, e.effect_key, e.sink, e.sink_result,
       e.reporter, e.step_id, e.ts, event_id_of(e) AS event_id, e.attrs, src.name AS file, e.line, e.seq IS NULL AS observed,
       e.position, e.ts_utc, {{optional:e}}
FROM events e JOIN sources src USING (source_id)
WHERE e.workflow_key IN (SELECT unnest($1::VARCHAR[])) AND e.ord IS NOT NULL
ORDER BY e.workflow_key, e.ord, e.event_id, e.obs;
