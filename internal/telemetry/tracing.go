package telemetry

import (
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// TracingInterceptor is the Temporal SDK's OpenTelemetry tracing interceptor on the global
// tracer provider (otel.SetTracerProvider): a client's StartWorkflow, the turn workflow and
// each activity become spans of one trace, carried through Temporal headers across processes,
// with the workflow and run ids as attributes. With no tracer provider installed the spans are
// no-ops; install one (an exporter of your choice) before dialing to collect them.
func TracingInterceptor() (interceptor.Interceptor, error) {
	return TracingInterceptorWith(otel.GetTracerProvider())
}

// TracingInterceptorWith is TracingInterceptor on the tracer provider tp.
func TracingInterceptorWith(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("airlock")})
	if err != nil {
		return nil, fmt.Errorf("telemetry: tracing interceptor: %w", err)
	}
	return i, nil
}
