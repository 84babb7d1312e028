-- 0006_agent_proposals: agent proposals (seed 2). Every table is append-only except
-- memory_current (the pointer to a memory document's current immutable version). Ids are
-- deterministic (internal/proposals), so a retry or replay converges on the same row.

-- The context snapshot a turn's proposal offer was built from, retry-stable: the first
-- stored body wins and every later read returns it.
CREATE TABLE proposal_snapshots (
    snapshot_id   TEXT        PRIMARY KEY,
    workflow_id   TEXT        NOT NULL,
    round         INTEGER     NOT NULL,
    body          {{bytes}}   NOT NULL,
    sha256        TEXT        NOT NULL,
    created_at    {{time}} NOT NULL
) {{table}};

-- Captured proposals: inert records awaiting a human decision (payload: the strict record).
CREATE TABLE agent_proposals (
    proposal_id   TEXT        PRIMARY KEY,
    kind          TEXT        NOT NULL CHECK (kind IN ('memory-change', 'self-correction', 'focus-declaration')),
    workflow_id   TEXT        NOT NULL,
    conversation  TEXT        NOT NULL,
    output_id     TEXT        NOT NULL,
    snapshot_id   TEXT        NOT NULL REFERENCES proposal_snapshots (snapshot_id),
    payload       {{json}}    NOT NULL,
    created_at    {{time}} NOT NULL
) {{table}};
CREATE INDEX agent_proposals_workflow_idx ON agent_proposals (workflow_id);

-- One decision per proposal (decision_id is derived from the proposal id): the same payload
-- retried converges, a different one conflicts.
CREATE TABLE proposal_decisions (
    decision_id   TEXT        PRIMARY KEY,
    proposal_id   TEXT        NOT NULL UNIQUE REFERENCES agent_proposals (proposal_id),
    disposition   TEXT        NOT NULL CHECK (disposition IN ('accept', 'edit', 'reject')),
    replacement   TEXT        NOT NULL DEFAULT '',
    actor         TEXT        NOT NULL,
    submission_id TEXT        NOT NULL,
    digest        TEXT        NOT NULL,
    attestation   {{json}}    NOT NULL,
    created_at    {{time}} NOT NULL
) {{table}};

-- Human-authorized judgments (a projected correction). feedback_source is the decision.
CREATE TABLE judgments (
    judgment_id       TEXT    PRIMARY KEY,
    kind              TEXT    NOT NULL,
    criterion         TEXT    NOT NULL,
    criterion_version INTEGER NOT NULL,
    actor             TEXT    NOT NULL,
    target_workflow_id TEXT   NOT NULL,
    target_output_id  TEXT    NOT NULL,
    feedback_source   TEXT    NOT NULL UNIQUE,
    replacement       TEXT    NOT NULL,
    quality_eligible  INTEGER NOT NULL,
    external_export_eligible INTEGER NOT NULL,
    created_at        {{time}} NOT NULL
) {{table}};
CREATE INDEX judgments_target_idx ON judgments (target_output_id);

-- Receipts of what a decision led to (projected, rejected, materialized, materialization
-- failed with a content-free reason code): one per decision.
CREATE TABLE proposal_receipts (
    receipt_id    TEXT        PRIMARY KEY,
    decision_id   TEXT        NOT NULL UNIQUE,
    proposal_id   TEXT        NOT NULL,
    kind          TEXT        NOT NULL,
    reason        TEXT        NOT NULL DEFAULT '',
    detail        {{json}}    NOT NULL,
    created_at    {{time}} NOT NULL
) {{table}};

-- Immutable versions of memory documents, and the current version of each memory source
-- (a configured memory root).
CREATE TABLE memory_versions (
    version_id    TEXT        PRIMARY KEY,
    document_id   TEXT        NOT NULL,
    source        TEXT        NOT NULL,
    path          TEXT        NOT NULL,
    content_type  TEXT        NOT NULL,
    size          INTEGER     NOT NULL,
    sha256        TEXT        NOT NULL,
    content       {{bytes}}   NOT NULL,
    created_at    {{time}} NOT NULL
) {{table}};
CREATE TABLE memory_current (
    source        TEXT        PRIMARY KEY,
    document_id   TEXT        NOT NULL,
    version_id    TEXT        NOT NULL REFERENCES memory_versions (version_id),
    updated_at    {{time}} NOT NULL
) {{table}};
