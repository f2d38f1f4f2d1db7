-- Transactional (half) messages (docs/txmsg.md). One row per message while it is live; terminal rows
-- move to tx_message_hst after retention so the sweeps only ever scan live work.
CREATE TABLE tx_message (
  id                  text PRIMARY KEY,
  topic               text NOT NULL,
  msg_key             text,
  payload             text NOT NULL,             -- the record value exactly as it will be sent
  headers             jsonb NOT NULL DEFAULT '{}'::jsonb,
  check_url           text NOT NULL,
  check_after_ms      integer NOT NULL,
  check_timeout_ms    integer NOT NULL,
  status              text NOT NULL
                      CHECK (status IN ('PREPARED', 'COMMITTED', 'DELIVERED', 'CONSUMED', 'ROLLED_BACK', 'DEAD')),
  checks              integer NOT NULL DEFAULT 0, -- check-back calls made (answered or not)
  next_check_at       timestamptz,               -- PREPARED only: when the next check-back is due
  attempts            integer NOT NULL DEFAULT 0, -- deliveries handed to the relay under the current schedule
  in_flight_event_id  bigint,                    -- the msg_event row of the delivery not yet SENT
  redeliver_after_ms  integer,                   -- wait after the in-flight delivery is sent (schedule snapshot)
  next_delivery_at    timestamptz,               -- when the next (re)delivery, or death, is due
  dead_phase          text CHECK (dead_phase IN ('check', 'delivery')), -- where a DEAD message died; picks the resend target
  dead_reason         text,
  last_error          text,                      -- last check-back or delivery error, for operators
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL,
  committed_at        timestamptz,
  delivered_at        timestamptz,               -- last delivery recorded SENT
  finished_at         timestamptz                -- CONSUMED / ROLLED_BACK: the retention clock starts here
);
CREATE INDEX tx_message_check_due ON tx_message (next_check_at) WHERE status = 'PREPARED';
-- Redelivery sweeps the messages nearest their limit first: those are the ones about to be given up.
CREATE INDEX tx_message_delivery_due ON tx_message (attempts DESC, next_delivery_at)
  WHERE status IN ('COMMITTED', 'DELIVERED');
CREATE INDEX tx_message_finished ON tx_message (finished_at) WHERE status IN ('CONSUMED', 'ROLLED_BACK');
CREATE INDEX tx_message_dead ON tx_message (id) WHERE status = 'DEAD';

CREATE TABLE tx_message_hst (LIKE tx_message INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE tx_message_hst ADD PRIMARY KEY (id);
ALTER TABLE tx_message_hst ADD COLUMN archived_at timestamptz NOT NULL;

-- The trace of a message: every transition, check-back and delivery, recorded as it happens.
-- Kept when the message is archived, so a trace outlives the live row.
CREATE TABLE tx_message_log (
  seq       bigserial PRIMARY KEY,
  tx_id     text NOT NULL,
  at        timestamptz NOT NULL,
  kind      text NOT NULL,      -- prepare | commit | rollback | check | enqueue | sent | ack | dead | resend | delivery-failed
  status    text,               -- the message's status after this entry
  detail    jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX tx_message_log_tx ON tx_message_log (tx_id, seq);

-- Idempotency-Key → message. A table of its own (no foreign key) so a key keeps answering with
-- the same message after that message has moved to history.
CREATE TABLE tx_idempotency (
  idem_key      text PRIMARY KEY,
  tx_id         text NOT NULL,
  request_hash  text NOT NULL,
  created_at    timestamptz NOT NULL
);
