-- 0001_init: Airlock's first schema (SQLite). Keep in step with
-- migrations/postgres/0001_init.sql: same tables, columns and constraints.
-- Timestamps are TEXT in one fixed-width UTC form, 2006-01-02T15:04:05.000000Z,
-- so that text order is time order and values round-trip identically with
-- PostgreSQL's microsecond TIMESTAMPTZ. JSON is TEXT; byte strings are BLOB.

CREATE TABLE audit_events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    event_key     TEXT    NOT NULL UNIQUE,
    workflow_id   TEXT    NOT NULL DEFAULT '',
    run_id        TEXT    NOT NULL DEFAULT '',
    seq           INTEGER NOT NULL DEFAULT 0,
    call_id       TEXT    NOT NULL DEFAULT '',
    capability_id TEXT    NOT NULL DEFAULT '',
    version       INTEGER NOT NULL DEFAULT 0,
    outcome       TEXT    NOT NULL,
    stage         TEXT    NOT NULL DEFAULT '',
    reason        TEXT    NOT NULL DEFAULT '',
    detail        TEXT    NOT NULL DEFAULT '',
    args_digest   TEXT    NOT NULL DEFAULT '',
    approver      TEXT    NOT NULL DEFAULT '',
    at            TEXT    NOT NULL
) STRICT;
CREATE INDEX audit_events_workflow_idx ON audit_events (workflow_id, id);

CREATE TABLE confirmations (
    id            TEXT    PRIMARY KEY,
    token_hash    BLOB    NOT NULL UNIQUE,
    sealed_token  BLOB,
    workflow_id   TEXT    NOT NULL DEFAULT '',
    run_id        TEXT    NOT NULL DEFAULT '',
    seq           INTEGER NOT NULL DEFAULT 0,
    call_id       TEXT    NOT NULL DEFAULT '',
    capability_id TEXT    NOT NULL DEFAULT '',
    version       INTEGER NOT NULL DEFAULT 0,
    args_digest   TEXT    NOT NULL DEFAULT '',
    arguments     TEXT,
    display       TEXT    NOT NULL DEFAULT '',
    created_at    TEXT    NOT NULL,
    expires_at    TEXT    NOT NULL,
    consumed_at   TEXT,
    decision      TEXT    NOT NULL DEFAULT ''
                  CHECK (decision IN ('', 'approved', 'denied', 'expired')),
    approver      TEXT    NOT NULL DEFAULT '',
    reason        TEXT    NOT NULL DEFAULT '',
    decided_at    TEXT
) STRICT;
CREATE INDEX confirmations_pending_idx ON confirmations (created_at) WHERE decision = '';
CREATE INDEX confirmations_workflow_idx ON confirmations (workflow_id);

CREATE TABLE executions (
    exec_key      TEXT    PRIMARY KEY,
    workflow_id   TEXT    NOT NULL DEFAULT '',
    seq           INTEGER NOT NULL DEFAULT 0,
    capability_id TEXT    NOT NULL DEFAULT '',
    version       INTEGER NOT NULL DEFAULT 0,
    state         TEXT    NOT NULL CHECK (state IN ('started', 'completed', 'failed')),
    result        TEXT,
    started_at    TEXT    NOT NULL,
    finished_at   TEXT
) STRICT;
CREATE INDEX executions_capability_idx ON executions (capability_id);

CREATE TABLE conversations (
    conversation  TEXT    PRIMARY KEY,
    last_seq      INTEGER NOT NULL
) STRICT;

CREATE TABLE context_entries (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation  TEXT    NOT NULL,
    entry_key     TEXT    NOT NULL,
    workflow_id   TEXT    NOT NULL DEFAULT '',
    payload       TEXT    NOT NULL,
    created_at    TEXT    NOT NULL,
    UNIQUE (conversation, entry_key)
) STRICT;
CREATE INDEX context_entries_conversation_idx ON context_entries (conversation, id);

CREATE TABLE turn_results (
    workflow_id   TEXT    PRIMARY KEY,
    conversation  TEXT    NOT NULL DEFAULT '',
    result        TEXT    NOT NULL,
    saved_at      TEXT    NOT NULL
) STRICT;
CREATE INDEX turn_results_conversation_idx ON turn_results (conversation);
