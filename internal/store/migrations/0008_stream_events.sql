-- 0008_stream_events: the events client apps stream while a turn runs (issue 22): AG-UI
-- events (text deltas, tool calls, confirmations pending and decided, outcomes, run finished),
-- kept outside Temporal history so a turn's history stays bounded. seq numbers the events of
-- one stream (a turn's workflow id) from 1 and is the SSE event id clients resume after;
-- dedup makes a retried write (an activity retry) converge on one row.
CREATE TABLE stream_events (
    stream      TEXT        NOT NULL,
    seq         INTEGER     NOT NULL,
    dedup       TEXT        NOT NULL,
    type        TEXT        NOT NULL,
    payload     {{json}}    NOT NULL,
    created_at  {{time}} NOT NULL,
    PRIMARY KEY (stream, seq),
    UNIQUE (stream, dedup)
) {{table}};
