package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/lib/pq"
)

// Unavailable reports whether err says the store could not be reached or dropped the
// connection (PostgreSQL down, restarting or shutting down; the network to it gone), as
// opposed to a statement the store refused. A step that failed so did not change the store
// and may be tried again once the store is back (the turn's activities retry with backoff).
//
// A failed HTTP request (*url.Error: a model provider, a fetched page, an HTTP capability, an
// MCP server or webhook over HTTP) is never the store's, even when the network under it
// failed: neither store driver speaks HTTP, and an operator told "store unreachable" about a
// model's DNS failure debugs the wrong part. Nor is an error marked Elsewhere.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ue *url.Error
	var el *elsewhereError
	if errors.As(err, &ue) || errors.As(err, &el) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var pe *pq.Error
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01-57P03: admin or crash shutdown, cannot
		// connect now (starting up or shutting down).
		return pe.Code.Class() == "08" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "bad connection") ||
		strings.Contains(msg, "the database system is")
}

// Elsewhere marks err as known not to come from the store (a model provider's answer, read
// over a connection that broke mid-stream: io.ErrUnexpectedEOF, a reset): Unavailable is
// false for it whatever it wraps. errors.Is and errors.As still reach err; its message is
// err's. A nil err stays nil.
func Elsewhere(err error) error {
	if err == nil {
		return nil
	}
	return &elsewhereError{err: err}
}

// elsewhereError is Elsewhere's mark. It does not Unwrap (Is and As delegate): Temporal's
// failure converter writes each Unwrap link into history as a cause, and this link would only
// repeat err's message.
type elsewhereError struct{ err error }

func (e *elsewhereError) Error() string        { return e.err.Error() }
func (e *elsewhereError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *elsewhereError) As(target any) bool   { return errors.As(e.err, target) }
