package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// OTLPConfigured reports whether the standard OpenTelemetry variables ask for trace export:
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and
// OTEL_TRACES_EXPORTER is not "none".
func OTLPConfigured() bool {
	if strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// InstallOTLPTracing installs, when OTLPConfigured, a global tracer provider that exports
// spans over OTLP (issue 19, item 1: `airlock worker` and a team's worker alike). Everything
// else comes from the standard variables, read by the OpenTelemetry exporters themselves:
// the protocol (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
// "http/protobuf", the default, or "grpc"), endpoint, headers, timeout, TLS and compression;
// the service name (OTEL_SERVICE_NAME, default service) and OTEL_RESOURCE_ATTRIBUTES. It
// returns the shutdown that flushes pending spans (a no-op when nothing was installed) and
// whether it installed one. An unknown protocol is an error naming it.
func InstallOTLPTracing(ctx context.Context, service string) (shutdown func(context.Context) error, installed bool, err error) {
	noop := func(context.Context) error { return nil }
	if !OTLPConfigured() {
		return noop, false, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return noop, false, fmt.Errorf("telemetry: OTLP protocol %q is not supported (use http/protobuf or grpc)", proto)
	}
	if err != nil {
		return noop, false, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return noop, false, fmt.Errorf("telemetry: resource: %w", err)
	}
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, true, nil
}
