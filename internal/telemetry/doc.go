// Package telemetry is what an operator sees of a running Airlock process: the HTTP endpoint
// with /metrics (Prometheus text format: the Temporal SDK's metrics and Airlock's own
// counters) and /healthz (the process's dependencies answer), and the process's structured
// log (log/slog, text or JSON by AIRLOCK_LOG_FORMAT).
package telemetry
