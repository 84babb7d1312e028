-- 0013_page_sessions: the approver page's sign-in sessions live in the store (issue 21, item
-- 4), so several `airlock web` instances behind one address share them and a restart keeps
-- them. id_hash is the SHA-256 of the session id (hex): the cookie value itself is never
-- stored, so whoever reads the database cannot replay a session. stamp is the approver's
-- password stamp at sign-in (a password change ends the session at its next request).
-- last_answer is the JSON of the last decision the session sent, shown on the turn's page.
CREATE TABLE page_sessions (
    id_hash     TEXT     NOT NULL PRIMARY KEY,
    approver    TEXT     NOT NULL,
    stamp       TEXT     NOT NULL,
    last_answer TEXT     NOT NULL DEFAULT '',
    created_at  {{time}} NOT NULL,
    last_seen   {{time}} NOT NULL
) {{table}};
CREATE INDEX page_sessions_approver ON page_sessions (approver);
