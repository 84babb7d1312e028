package inference

import (
	"errors"
	"fmt"
	"io"
)

// MaxResponseBytes bounds one answer a turn accepts: the unstreamed body, or the body a stream
// assembles to (512 KiB). An answer is held in the Infer activity's result with its parse
// (the calls' argument text again), and Temporal refuses a payload over 2 MB: a 1.1 MB answer
// failed its turn with a heartbeat timeout after the model was asked (and paid) five times.
// Far above any real tool-calling answer (the largest in the provider-traffic corpus is under
// 40 KiB) and above a maximal text answer of today's models (about 128k tokens).
const MaxResponseBytes = 512 << 10

// maxStreamWireBytes bounds the bytes of a stream read on the wire: chunks repeat their
// envelope (ids, model, usage) around each piece, so a stream is several times the body it
// assembles to; reading stops past this.
const maxStreamWireBytes = 8 * MaxResponseBytes

// ErrResponseTooLarge reports an answer over MaxResponseBytes (errors.Is). The error is a
// *ResponseTooLargeError that says the size and the limit. It is permanent: asking again
// costs another answer as large, so the Infer activity never retries it.
var ErrResponseTooLarge = errors.New("inference: response too large")

// ResponseTooLargeError is an answer refused for its size. Size is the bytes read when
// reading stopped (at least, for a stream cut off at the wire limit: AtLeast), Limit the bound.
type ResponseTooLargeError struct {
	Provider string
	Size     int64
	AtLeast  bool
	Limit    int64
	Streamed bool
}

// Error says what was refused, its size and the limit.
func (e *ResponseTooLargeError) Error() string {
	what := "answer"
	if e.Streamed {
		what = "streamed answer"
	}
	size := fmt.Sprintf("%d bytes", e.Size)
	if e.AtLeast {
		size = "more than " + size
	}
	return fmt.Sprintf("inference: %s: the %s is %s, over the limit of %d bytes (inference.MaxResponseBytes); it is refused and not asked for again", e.Provider, what, size, e.Limit)
}

// Is reports ErrResponseTooLarge.
func (e *ResponseTooLargeError) Is(target error) bool { return target == ErrResponseTooLarge }

// limitedBody reads a stream's body and fails once more than maxStreamWireBytes were read.
type limitedBody struct {
	r        io.Reader
	n        int64
	provider string
}

func limitBody(provider string, r io.Reader) io.Reader { return &limitedBody{r: r, provider: provider} }

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.n > maxStreamWireBytes {
		return 0, &ResponseTooLargeError{Provider: l.provider, Size: maxStreamWireBytes, AtLeast: true, Limit: MaxResponseBytes, Streamed: true}
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	return n, err
}

// readBody reads an unstreamed body of at most MaxResponseBytes.
func readBody(provider string, r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxResponseBytes {
		return nil, &ResponseTooLargeError{Provider: provider, Size: MaxResponseBytes, AtLeast: true, Limit: MaxResponseBytes}
	}
	return b, nil
}

// checkAssembled refuses an assembled stream body over MaxResponseBytes.
func checkAssembled(provider string, body []byte) error {
	if len(body) > MaxResponseBytes {
		return &ResponseTooLargeError{Provider: provider, Size: int64(len(body)), Limit: MaxResponseBytes, Streamed: true}
	}
	return nil
}
