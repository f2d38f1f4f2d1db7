-- Inbox pipeline: one row per mailbox message, the FIFO head is the smallest open msg_id.
CREATE TABLE proc_state (
  msg_id            bigint PRIMARY KEY,           -- the mailbox CMINMSGS.ID
  status            text NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'FAILED', 'SUCCEEDED', 'SKIPPED', 'DEAD')),
  identity_key      text UNIQUE,                  -- SNDR|TYPE|STYP|SEQN, bound once after decoding
  msg_type          text,
  msg_subtype       text,
  attempts          integer NOT NULL DEFAULT 0,
  next_attempt_at   timestamptz NOT NULL,
  first_attempt_at  timestamptz,                  -- stable start of the head deadline
  error_class       text CHECK (error_class IN ('MALFORMED', 'PROTOCOL', 'CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'EXHAUSTED')),
  error_detail      text,
  note              text,                         -- reason of a SKIPPED message (duplicate-of:…, no-such-flight)
  raw_text          text,                         -- copy of the mailbox text, kept for replay and trace
  received_at       timestamptz,                  -- mailbox DATE_RECEIVED
  enqueued_at       timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  finished_at       timestamptz
);
-- The head query reads only open rows; terminal rows never slow it down.
CREATE INDEX proc_state_open ON proc_state (msg_id) WHERE status IN ('PENDING', 'FAILED');
CREATE INDEX proc_state_finished ON proc_state (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX proc_state_dead ON proc_state (error_class, msg_id) WHERE status IN ('DEAD', 'FAILED');

-- One row per processing attempt: the trace of a message, recorded as the work happens.
-- A replayed message starts counting attempts from 1 again; the id keeps every row in order.
CREATE TABLE proc_attempt (
  id            bigserial PRIMARY KEY,
  msg_id        bigint NOT NULL,
  attempt       integer NOT NULL,
  started_at    timestamptz NOT NULL,
  finished_at   timestamptz NOT NULL,
  outcome       text NOT NULL,
  error_class   text,
  error_detail  text
);
CREATE INDEX proc_attempt_msg ON proc_attempt (msg_id, id);

-- Terminal rows past retention; identity_key stays unique so archived messages still dedupe.
CREATE TABLE proc_state_hst (LIKE proc_state INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE proc_state_hst ADD PRIMARY KEY (msg_id);
CREATE UNIQUE INDEX proc_state_hst_identity ON proc_state_hst (identity_key);
ALTER TABLE proc_state_hst ADD COLUMN archived_at timestamptz NOT NULL DEFAULT now();

-- Mailbox back-fill intents, written in the same transaction as the terminal state.
CREATE TABLE backfill_todo (
  msg_id           bigint PRIMARY KEY,
  proc_status      text NOT NULL,
  proc_note        text,
  processed_at     timestamptz NOT NULL,
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL,
  last_error       text
);
CREATE INDEX backfill_todo_due ON backfill_todo (next_attempt_at);

-- Small durable facts: the poller's watermark, the pause flag.
CREATE TABLE msgx_state (
  key         text PRIMARY KEY,
  value       jsonb NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Operator actions (replay, resend, pause): who, when, what.
CREATE TABLE audit_log (
  id      bigserial PRIMARY KEY,
  at      timestamptz NOT NULL,
  actor   text NOT NULL,
  action  text NOT NULL,
  detail  jsonb NOT NULL
);
