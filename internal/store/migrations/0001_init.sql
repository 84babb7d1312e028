-- 0001_init: Airlock's first schema, one text for both drivers. The store substitutes the
-- dialect's types (store.go, dialects):
--   {{id}}     identity primary key   PostgreSQL BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
--                                     SQLite INTEGER PRIMARY KEY AUTOINCREMENT
--   {{time}}   timestamp              TIMESTAMPTZ / TEXT in one fixed-width UTC form
--                                     (2006-01-02T15:04:05.000000Z: text order is time order)
--   {{bytes}}  byte string            BYTEA / BLOB
--   {{json}}   JSON document          JSON (kept byte for byte) / TEXT
--   {{table}}  table options          nothing / STRICT
-- Values round-trip identically on both drivers (microsecond UTC times).

CREATE TABLE audit_events (
    id            {{id}},
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
    at            {{time}} NOT NULL
) {{table}};
CREATE INDEX audit_events_workflow_idx ON audit_events (workflow_id, id);

CREATE TABLE confirmations (
    id            TEXT        PRIMARY KEY,
    token_hash    {{bytes}}   NOT NULL UNIQUE,
    sealed_token  {{bytes}},
    workflow_id   TEXT        NOT NULL DEFAULT '',
    run_id        TEXT        NOT NULL DEFAULT '',
    seq           INTEGER     NOT NULL DEFAULT 0,
    call_id       TEXT        NOT NULL DEFAULT '',
    capability_id TEXT        NOT NULL DEFAULT '',
    version       INTEGER     NOT NULL DEFAULT 0,
    args_digest   TEXT        NOT NULL DEFAULT '',
    arguments     {{json}},
    display       TEXT        NOT NULL DEFAULT '',
    created_at    {{time}} NOT NULL,
    expires_at    {{time}} NOT NULL,
    consumed_at   {{time}},
    decision      TEXT        NOT NULL DEFAULT ''
                  CHECK (decision IN ('', 'approved', 'denied', 'expired')),
    approver      TEXT        NOT NULL DEFAULT '',
    reason        TEXT        NOT NULL DEFAULT '',
    decided_at    {{time}}
) {{table}};
CREATE INDEX confirmations_pending_idx ON confirmations (created_at) WHERE decision = '';
CREATE INDEX confirmations_workflow_idx ON confirmations (workflow_id);

CREATE TABLE executions (
    exec_key      TEXT        PRIMARY KEY,
    workflow_id   TEXT        NOT NULL DEFAULT '',
    seq           INTEGER     NOT NULL DEFAULT 0,
    capability_id TEXT        NOT NULL DEFAULT '',
    version       INTEGER     NOT NULL DEFAULT 0,
    state         TEXT        NOT NULL CHECK (state IN ('started', 'completed', 'failed')),
    result        {{json}},
    started_at    {{time}} NOT NULL,
    finished_at   {{time}}
) {{table}};
CREATE INDEX executions_capability_idx ON executions (capability_id);

CREATE TABLE conversations (
    conversation  TEXT        PRIMARY KEY,
    last_seq      INTEGER     NOT NULL
) {{table}};

CREATE TABLE context_entries (
    id            {{id}},
    conversation  TEXT        NOT NULL,
    entry_key     TEXT        NOT NULL,
    workflow_id   TEXT        NOT NULL DEFAULT '',
    payload       {{json}}        NOT NULL,
    created_at    {{time}} NOT NULL,
    UNIQUE (conversation, entry_key)
) {{table}};
CREATE INDEX context_entries_conversation_idx ON context_entries (conversation, id);

CREATE TABLE turn_results (
    workflow_id   TEXT        PRIMARY KEY,
    conversation  TEXT        NOT NULL DEFAULT '',
    result        {{json}}        NOT NULL,
    saved_at      {{time}} NOT NULL
) {{table}};
CREATE INDEX turn_results_conversation_idx ON turn_results (conversation);
