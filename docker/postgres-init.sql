-- Runs once, on the first start of the postgresql service (an empty data volume): the Airlock
-- store's role and database. Temporal's databases (temporal, temporal_visibility) are created
-- by temporal-history's auto-setup as the superuser POSTGRES_USER.
CREATE ROLE airlock LOGIN PASSWORD 'airlock';
CREATE DATABASE airlock OWNER airlock;
