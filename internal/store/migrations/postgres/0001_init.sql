-- 0001_init: Airlock's first schema (PostgreSQL).
-- Timestamps are TIMESTAMPTZ; the store writes them as UTC RFC 3339 text
-- truncated to microseconds, so values round-trip identically on both drivers.

CREATE TABLE audit_events (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_key     TEXT        NOT NULL UNIQUE,
    workflow_id   TEXT        NOT NULL DEFAULT '',
    run_id        TEXT        NOT NULL DEFAULT '',
    seq           INTEGER     NOT NULL DEFAULT 0,
    call_id       TEXT        NOT NULL DEFAULT '',
    capability_id TEXT        NOT NULL DEFAULT '',
    version       INTEGER     NOT NULL DEFAULT 0,
    outcome       TEXT        NOT NULL,
    stage         TEXT        NOT NULL DEFAULT '',
    reason        TEXT        NOT NULL DEFAULT '',
    detail        TEXT        NOT NULL DEFAULT '',
    args_digest   TEXT        NOT NULL DEFAULT '',
    approver      TEXT        NOT NULL DEFAULT '',
    at            TIMESTAMPTZ NOT NULL
);
CREATE INDEX audit_events_workflow_idx ON audit_events (workflow_id, id);

CREATE TABLE confirmations (
    id            TEXT        PRIMARY KEY,
    token_hash    BYTEA       NOT NULL UNIQUE,
    sealed_token  BYTEA,
    workflow_id   TEXT        NOT NULL DEFAULT '',
    run_id        TEXT        NOT NULL DEFAULT '',
    seq           INTEGER     NOT NULL DEFAULT 0,
    call_id       TEXT        NOT NULL DEFAULT '',
    capability_id TEXT        NOT NULL DEFAULT '',
    version       INTEGER     NOT NULL DEFAULT 0,
    args_digest   TEXT        NOT NULL DEFAULT '',
    arguments     JSON,
    display       TEXT        NOT NULL DEFAULT '',
    created_at    TIMESTAMPTZ NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    consumed_at   TIMESTAMPTZ,
    decision      TEXT        NOT NULL DEFAULT ''
                  CHECK (decision IN ('', 'approved', 'denied', 'expired')),
    approver      TEXT        NOT NULL DEFAULT '',
    reason        TEXT        NOT NULL DEFAULT '',
    decided_at    TIMESTAMPTZ
);
CREATE INDEX confirmations_pending_idx ON confirmations (created_at) WHERE decision = '';
CREATE INDEX confirmations_workflow_idx ON confirmations (workflow_id);

CREATE TABLE executions (
    exec_key      TEXT        PRIMARY KEY,
    workflow_id   TEXT        NOT NULL DEFAULT '',
    seq           INTEGER     NOT NULL DEFAULT 0,
    capability_id TEXT        NOT NULL DEFAULT '',
    version       INTEGER     NOT NULL DEFAULT 0,
    state         TEXT        NOT NULL CHECK (state IN ('started', 'completed', 'failed')),
    result        JSON,
    started_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ
);
CREATE INDEX executions_capability_idx ON executions (capability_id);

CREATE TABLE conversations (
    conversation  TEXT        PRIMARY KEY,
    last_seq      INTEGER     NOT NULL
);

CREATE TABLE context_entries (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation  TEXT        NOT NULL,
    entry_key     TEXT        NOT NULL,
    workflow_id   TEXT        NOT NULL DEFAULT '',
    payload       JSON        NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    UNIQUE (conversation, entry_key)
);
CREATE INDEX context_entries_conversation_idx ON context_entries (conversation, id);

CREATE TABLE turn_results (
    workflow_id   TEXT        PRIMARY KEY,
    conversation  TEXT        NOT NULL DEFAULT '',
    result        JSON        NOT NULL,
    saved_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX turn_results_conversation_idx ON turn_results (conversation);
