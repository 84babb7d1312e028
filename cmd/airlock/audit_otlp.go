package main

// OTLP logs for `airlock audit export --siem --otlp` (issue 36, item 4), kept in the command
// so workers do not carry the log exporter.

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
)

// otlpLogsConfigured reports whether the standard OpenTelemetry variables ask for log export:
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_LOGS_ENDPOINT is set and
// OTEL_LOGS_EXPORTER is not "none".
func otlpLogsConfigured() bool {
	if strings.EqualFold(os.Getenv("OTEL_LOGS_EXPORTER"), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") != ""
}

// otlpLogs returns a logger that exports log records over OTLP/HTTP (http/protobuf; issue 36's
// SIEM export: `airlock audit export --siem --otlp`), configured by the standard variables
// the exporter reads itself (endpoint, headers, timeout, TLS, compression), with service.name
// service unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise, and the flush
// that delivers what was emitted (call it before exiting). Not configured
// (otlpLogsConfigured false), or a protocol other than http/protobuf, is an error.
func otlpLogs(ctx context.Context, service, scope string) (otellog.Logger, func(context.Context) error, error) {
	if !otlpLogsConfigured() {
		return nil, nil, fmt.Errorf("audit export: no OTLP logs exporter configured (set OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_LOGS_ENDPOINT)")
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, nil, fmt.Errorf("audit export: OTLP logs protocol %q is not supported (use http/protobuf)", proto)
	}
	exp, err := otlploghttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("audit export: OTLP logs exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return nil, nil, fmt.Errorf("audit export: resource: %w", err)
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)), sdklog.WithResource(res))
	flush := func(ctx context.Context) error {
		if err := lp.ForceFlush(ctx); err != nil {
			return fmt.Errorf("audit export: flush OTLP logs: %w", err)
		}
		return nil
	}
	return lp.Logger(scope), flush, nil
}
