// Package integration holds Airlock's tests against real parts: a Temporal dev server started
// from bin/temporal (the CLI the Makefile builds), PostgreSQL from AIRLOCK_TEST_DATABASE_URL
// (scripts/ensure-postgres.sh), the airlock binary run as a separate worker process, and
// real local HTTP servers for the model (OpenAI wire format) and for web.fetch targets.
package integration
