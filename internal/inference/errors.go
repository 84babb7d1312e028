package inference

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrProviderRejected reports that the provider refused the request with an HTTP 4xx status
// other than 408, 409 and 429 (bad request, authentication, permission, unknown model, …).
// Retrying the same request cannot succeed: the Infer activity marks it non-retryable.
var ErrProviderRejected = errors.New("inference: provider rejected the request")

// ErrInvalidRequest reports a request that could not be sent at all (unknown role, a tool
// message without tool_call_id, a tool schema that is not a JSON object, no model, round < 1,
// no session for a replay). Like ErrProviderRejected it is not retryable.
var ErrInvalidRequest = errors.New("inference: invalid request")

// ProviderError is an HTTP-level failure reported by a provider. errors.Is(err,
// ErrProviderRejected) holds exactly when Retryable is false.
type ProviderError struct {
	// Provider names the adapter ("openai").
	Provider string
	// StatusCode is the HTTP status (200 for an error object in a successful response).
	StatusCode int
	// Message is a bounded excerpt of the provider's error body.
	Message string
	// Retryable is true for 408, 409, 429, 5xx and error bodies in 2xx responses.
	Retryable bool
	// Err is the underlying SDK or transport error, if any.
	Err error
}

// Error describes the failure without request details (URLs and headers may carry secrets).
func (e *ProviderError) Error() string {
	kind := "provider error"
	if !e.Retryable {
		kind = "provider rejected the request"
	}
	s := fmt.Sprintf("inference: %s: %s: HTTP %d %s", e.Provider, kind, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap returns the underlying error.
func (e *ProviderError) Unwrap() error { return e.Err }

// Is reports ErrProviderRejected for non-retryable failures.
func (e *ProviderError) Is(target error) bool {
	return target == ErrProviderRejected && !e.Retryable
}

// Permanent reports whether err cannot be cured by retrying the same request:
// ErrProviderRejected, ErrInvalidRequest, ErrSessionExhausted or ErrResponseTooLarge. The Infer activity returns
// these as non-retryable application errors; every other error is retried.
func Permanent(err error) bool {
	return errors.Is(err, ErrProviderRejected) || errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrSessionExhausted) ||
		errors.Is(err, ErrResponseTooLarge)
}

// retryableStatus reports whether an HTTP error status may succeed on retry.
func retryableStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooManyRequests:
		return true
	case code >= 400 && code < 500:
		return false
	default:
		return true
	}
}
