-- 0015_receipts: the receipts log (issue 36, internal/receipts). Every audit row appends its
-- records here in the transaction that writes the row, so a record exists exactly when its
-- row does.
--   receipts            one leaf of the RFC 6962 tree a row: idx is the leaf index, dense from
--                       0; (event_key, part) its identity (the audit row's key and the record's
--                       type), so a retried append writes nothing; record the leaf bytes; proof
--                       the inclusion proof of the leaf in the tree of size idx+1 (32-byte
--                       hashes, bottom up); checkpoint the signed note of that tree ('' when the
--                       appending process held no log key).
--   receipt_head        the one row appends lock: the tree's size and compact range (frontier).
--   receipt_checkpoints checkpoints signed besides the records' own (a key rotation's, one
--                       signed on demand or at export), kept for export and publishing.
-- confirmation_approvals.proof: how each approval of a quorum was proven (the wording of
-- approver_proof), so the authorization record names every approver's kind of proof.
CREATE TABLE receipts (
    idx        {{bigint}} NOT NULL PRIMARY KEY,
    event_key  TEXT       NOT NULL,
    part       TEXT       NOT NULL,
    record     {{bytes}}  NOT NULL,
    proof      {{bytes}},
    checkpoint TEXT       NOT NULL DEFAULT '',
    at         {{time}}   NOT NULL,
    UNIQUE (event_key, part)
) {{table}};

CREATE TABLE receipt_head (
    id       INTEGER    NOT NULL PRIMARY KEY CHECK (id = 1),
    size     {{bigint}} NOT NULL,
    frontier {{bytes}}
) {{table}};
INSERT INTO receipt_head (id, size, frontier) VALUES (1, 0, NULL);

CREATE TABLE receipt_checkpoints (
    id         {{id}},
    size       {{bigint}} NOT NULL,
    note       TEXT       NOT NULL,
    created_at {{time}}   NOT NULL
) {{table}};

ALTER TABLE confirmation_approvals ADD COLUMN proof TEXT NOT NULL DEFAULT '';
