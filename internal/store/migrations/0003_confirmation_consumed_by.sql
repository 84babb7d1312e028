-- Who consumed a confirmation's token: the identity of one presentation (workflow, run,
-- proposal, presentation number). A retry of that same presentation whose reply was lost
-- finds its own consumption instead of a replay; any other presentation is a replay.
ALTER TABLE confirmations ADD COLUMN consumed_by TEXT NOT NULL DEFAULT '';
