-- The registry revision a confirmation was issued under: a change of registry or policy
-- between approval and execution voids the approval (DESIGN "Beyond the seeds").
ALTER TABLE confirmations ADD COLUMN registry_revision TEXT NOT NULL DEFAULT '';
