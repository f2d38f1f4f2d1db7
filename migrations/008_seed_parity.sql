-- Fields and keys of the system msgx replaces (docs/flights.md, docs/txmsg.md).

-- Route joint key: ROUT (planned route) and ERUT (the altered one) are two
-- collections of one flight, each keyed by leg SEQ; the table keys a leg by (flid, kind, seq).
ALTER TABLE flight_rout ADD COLUMN kind text NOT NULL DEFAULT 'ROUT' CHECK (kind IN ('ROUT', 'ERUT'));
ALTER TABLE flight_rout DROP CONSTRAINT flight_rout_pkey;
ALTER TABLE flight_rout ADD PRIMARY KEY (flid, kind, seq);
ALTER TABLE flight_rout ALTER COLUMN kind DROP DEFAULT;

-- Transactional message fields the replaced system's message table has: the business the message belongs to
-- (msg_name), who created it (create_msg_uid) and who resent it last, and when (resend_msg_uid/_time).
ALTER TABLE tx_message ADD COLUMN biz_name text, ADD COLUMN created_by text, ADD COLUMN resent_by text, ADD COLUMN resent_at timestamptz;
ALTER TABLE tx_message_hst ADD COLUMN biz_name text, ADD COLUMN created_by text, ADD COLUMN resent_by text, ADD COLUMN resent_at timestamptz;

-- The request's own audit: reconciliations against COUTMSGS and how an answer was
-- matched (exact by the echoed SEQN, or the accepted fallback), as [{at, what, …}] in order.
ALTER TABLE req_track ADD COLUMN audit jsonb NOT NULL DEFAULT '[]'::jsonb;
