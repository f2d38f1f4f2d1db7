-- Flight state (docs/flights.md). Wire values are kept as text exactly as received; every
-- time also has a timestamptz twin (airport local time read in MSGX_TIMEZONE) for queries.
-- A column that is NULL was never received; '' was received empty (it clears).
CREATE TABLE flight_schd (
  flid             text PRIMARY KEY,
  operation_day    text NOT NULL CHECK (operation_day ~ '^[0-9]{8}$'),   -- OPDY, fixed once set
  awcd             text,
  flno             text,
  fltk             text,
  adid             text,
  actp             text,
  acno             text,
  term             text,
  stat             text,
  canx             text,
  divt             text,
  retn             text,
  sobt             text,
  sobt_at          timestamptz,
  sibt             text,
  sibt_at          timestamptz,
  eobt             text,
  eobt_at          timestamptz,
  eibt             text,
  eibt_at          timestamptz,
  etot             text,
  etot_at          timestamptz,
  atot             text,
  atot_at          timestamptz,
  eldt             text,
  eldt_at          timestamptz,
  aldt             text,
  aldt_at          timestamptz,
  aibt             text,
  aibt_at          timestamptz,
  aobt             text,
  aobt_at          timestamptz,
  bord             text,
  bord_at          timestamptz,
  gtcl             text,
  gtcl_at          timestamptz,
  extra            jsonb NOT NULL DEFAULT '[]'::jsonb,  -- unknown elements as ordered [name, value] pairs
  status           text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'DELETED')),
  state_version    integer NOT NULL CHECK (state_version >= 1),
  last_msg_id      bigint,
  src_dttm         timestamptz,                          -- DTTM of the newest message applied: snapshots older than it do not roll back
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX flight_schd_day ON flight_schd (operation_day, flid);
CREATE INDEX flight_schd_updated ON flight_schd (updated_at);

-- One detail table per resource kind, keyed naturally within the flight. `item` is the whole
-- <ITEM> as ordered [name, value] pairs (unknown children included); `ord` is its received position.
-- No foreign key to flight_schd: the one write entry point and the history sweep own both sides,
-- and a flight's rows are replaced together in one statement.
CREATE TABLE flight_rout (
  flid text NOT NULL, seq text NOT NULL, ord integer NOT NULL, apcd text, item jsonb NOT NULL,
  PRIMARY KEY (flid, seq)
);
CREATE TABLE flight_csfl (
  flid text NOT NULL, awcd text NOT NULL, flno text NOT NULL, ord integer NOT NULL, item jsonb NOT NULL,
  PRIMARY KEY (flid, awcd, flno)
);
CREATE TABLE flight_dlay (
  flid text NOT NULL, code text NOT NULL, ord integer NOT NULL, min text, item jsonb NOT NULL,
  PRIMARY KEY (flid, code)
);
CREATE TABLE flight_gate (
  flid text NOT NULL, code text NOT NULL, ord integer NOT NULL,
  beg text, "end" text, beg_at timestamptz, end_at timestamptz, item jsonb NOT NULL,
  PRIMARY KEY (flid, code)
);
CREATE TABLE flight_stnd (
  flid text NOT NULL, code text NOT NULL, ord integer NOT NULL,
  beg text, "end" text, beg_at timestamptz, end_at timestamptz, item jsonb NOT NULL,
  PRIMARY KEY (flid, code)
);
CREATE TABLE flight_belt (
  flid text NOT NULL, code text NOT NULL, ord integer NOT NULL,
  beg text, "end" text, beg_at timestamptz, end_at timestamptz, item jsonb NOT NULL,
  PRIMARY KEY (flid, code)
);
CREATE TABLE flight_chkc (
  flid text NOT NULL, code text NOT NULL, ord integer NOT NULL,
  beg text, "end" text, beg_at timestamptz, end_at timestamptz, item jsonb NOT NULL,
  PRIMARY KEY (flid, code)
);
CREATE TABLE flight_brdg (
  flid text NOT NULL, code text NOT NULL, ord integer NOT NULL,
  beg text, "end" text, beg_at timestamptz, end_at timestamptz, item jsonb NOT NULL,
  PRIMARY KEY (flid, code)
);
CREATE TABLE flight_lnge (
  flid text NOT NULL, code text NOT NULL, ord integer NOT NULL,
  beg text, "end" text, beg_at timestamptz, end_at timestamptz, item jsonb NOT NULL,
  PRIMARY KEY (flid, code)
);

-- Flights past retention, copied here by the history sweep before they leave the live tables.
-- Unique per flight version so that a sweep repeated after a crash copies nothing twice.
CREATE TABLE flight_hst (
  id             bigserial PRIMARY KEY,
  flid           text NOT NULL,
  operation_day  text NOT NULL,
  state_version  integer NOT NULL,
  status         text NOT NULL,
  state          jsonb NOT NULL,          -- the flight as the read API showed it
  last_msg_id    bigint,
  updated_at     timestamptz NOT NULL,
  archived_at    timestamptz NOT NULL,
  UNIQUE (flid, operation_day, state_version)
);

-- One row per snapshot package (DNLD/RESP/ADFT) that was applied; kept MSGX_SNAP_LOG_RETENTION_DAYS.
CREATE TABLE schd_snap_log (
  id           bigserial PRIMARY KEY,
  msg_id       bigint NOT NULL,
  styp         text NOT NULL,
  scope        text,                     -- the operation day of the package
  dttm         timestamptz,              -- META/DTTM
  received_at  timestamptz NOT NULL,
  declared     integer,                  -- CNT
  flights      integer NOT NULL,
  created      integer NOT NULL,
  updated      integer NOT NULL,
  unchanged    integer NOT NULL,
  stale        integer NOT NULL,         -- older than the flight's state: not rolled back
  request_id   bigint                    -- the RQFD a RESP answered
);
CREATE INDEX schd_snap_log_received ON schd_snap_log (received_at);

-- Requests msgx sends upstream (RQFD day plans, RQRF reference data).
CREATE TABLE req_track (
  id             bigserial PRIMARY KEY,
  kind           text NOT NULL,          -- RQFD | RQRF
  scope          text NOT NULL,          -- the day (RQFD) or the reference type (RQRF)
  status         text NOT NULL CHECK (status IN ('REGISTERED', 'SENT', 'DONE', 'EXPIRED')),
  registered_at  timestamptz NOT NULL,
  sent_at        timestamptz,            -- when the COUTMSGS row was written (confirmed afterwards)
  outbound_id    bigint,                 -- COUTMSGS.ID
  closed_at      timestamptz,
  close_reason   text,                   -- superseded | timeout | answered
  resp_msg_id    bigint
);
-- One open request per kind: a new one expires the old one first.
CREATE UNIQUE INDEX req_track_one_open ON req_track (kind) WHERE status IN ('REGISTERED', 'SENT');

-- Reference data; an answer replaces the whole set of its rtype.
CREATE TABLE ref_master (
  rtype       text NOT NULL,
  rkey        text NOT NULL,
  payload     jsonb NOT NULL,            -- the record as ordered [name, value] pairs
  version     integer NOT NULL,
  msg_id      bigint,
  updated_at  timestamptz NOT NULL,
  PRIMARY KEY (rtype, rkey)
);
