-- Strict FIFO by mailbox ID (docs/ordering.md). The poller keeps, in msgx_state 'mailbox.frontier',
-- the highest ID it has scanned and the highest ID below which every ID is accounted for; the pump
-- runs no message above the latter.

-- IDs skipped in the mailbox sequence, as ranges: an open gap is waited for up to MSGX_GAP_GRACE,
-- then becomes a hole (hole_at set) that is still re-checked by ID for MSGX_HOLE_RECHECK.
CREATE TABLE mailbox_gap (
  lo          bigint PRIMARY KEY,
  hi          bigint NOT NULL CHECK (hi >= lo),
  first_seen  timestamptz NOT NULL,
  hole_at     timestamptz
);
CREATE INDEX mailbox_gap_hole ON mailbox_gap (hole_at) WHERE hole_at IS NOT NULL;

-- Rows that committed after their ID was declared a hole, found by the poller or the re-scan.
CREATE TABLE mailbox_late (
  msg_id    bigint PRIMARY KEY,
  found_at  timestamptz NOT NULL,
  via       text NOT NULL CHECK (via IN ('poller', 'rescan'))
);

-- An upgrade starts the frontier at the old watermark (rows below it were enqueued by the old
-- poller; the re-scan finds any it missed).
INSERT INTO msgx_state (key, value, updated_at)
SELECT 'mailbox.frontier', jsonb_build_object('accounted', (value->>'id')::bigint, 'scanned', (value->>'id')::bigint), now()
FROM msgx_state WHERE key = 'poller.watermark'
ON CONFLICT (key) DO NOTHING;
