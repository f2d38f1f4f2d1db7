-- The mailbox as tables in msgx's own PostgreSQL (twin default, or MSGX_PG_URL without MSGX_MAILBOX_URL).
-- Same upper-case names as the MySQL mailbox, quoted so PostgreSQL keeps their case.
CREATE TABLE IF NOT EXISTS "CMINMSGS" (
  "ID"              bigserial PRIMARY KEY,
  "MSG_TEXT"        text,
  "DATE_RECEIVED"   timestamptz NOT NULL DEFAULT now(),
  "DATE_PROCESSED"  timestamptz DEFAULT NULL,
  "PROC_STATUS"     varchar(16) DEFAULT NULL,
  "PROC_NOTE"       varchar(1000) DEFAULT NULL
);
CREATE INDEX IF NOT EXISTS "CMINMSGS_UNPROCESSED" ON "CMINMSGS" ("ID") WHERE "DATE_PROCESSED" IS NULL;

CREATE TABLE IF NOT EXISTS "COUTMSGS" (
  "ID"              bigserial PRIMARY KEY,
  "MSG_TEXT"        text,
  "DATE_RECEIVED"   timestamptz NOT NULL DEFAULT now(),
  "DATE_PROCESSED"  timestamptz DEFAULT NULL,
  "PROC_STATUS"     varchar(16) DEFAULT NULL,
  "PROC_NOTE"       varchar(1000) DEFAULT NULL
);
