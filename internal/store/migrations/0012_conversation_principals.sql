-- 0012_conversation_principals: every conversation belongs to the principal of its first
-- proven turn (issue 21, found by an attack run: a client for bob could continue carol's
-- conversation and read her context, or plant "user" text that provenance then took for
-- carol's own words). A later turn for another principal is refused before anything is stored
-- or the model is asked.
CREATE TABLE conversation_principals (
    conversation TEXT        NOT NULL PRIMARY KEY,
    principal    TEXT        NOT NULL,
    workflow_id  TEXT        NOT NULL,
    at          {{time}} NOT NULL
) {{table}};
