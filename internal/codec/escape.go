package codec

import (
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/airlock-dev/airlock/internal/display"
)

// Escape is a payload codec that writes every hidden character of a JSON payload (invisible,
// bidirectional and control characters that JSON encoders leave raw: zero-width spaces, RLO,
// DEL, C1 controls, tag characters, … display.Flagged's) as a \u escape (display.JSON): the same
// JSON value, which the Temporal UI and `temporal workflow show` print without hiding,
// reordering or acting on anything (issue 19, item 4: the Temporal UI is an approver surface
// too). It escapes on Encode (what Airlock writes to history) and on Decode (what the codec
// server hands the UI, including payloads written before it existed); decoding an escaped
// payload gives the same Go value, so workers and clients see no difference. Payloads of other
// encodings pass unchanged.
type Escape struct{}

// Encode escapes hidden characters in JSON payloads.
func (Escape) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return escapePayloads(ps), nil
}

// Decode escapes hidden characters in JSON payloads (the value is unchanged).
func (Escape) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return escapePayloads(ps), nil
}

func escapePayloads(ps []*commonpb.Payload) []*commonpb.Payload {
	var out []*commonpb.Payload // copied on the first change: the input is never modified
	for i, p := range ps {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != converter.MetadataEncodingJSON || plain(p.GetData()) {
			continue
		}
		esc := display.JSON(p.GetData())
		if len(esc) == len(p.GetData()) {
			continue // nothing hidden (non-ASCII text only)
		}
		if out == nil {
			out = append([]*commonpb.Payload(nil), ps...)
		}
		out[i] = &commonpb.Payload{Metadata: p.GetMetadata(), Data: esc, ExternalPayloads: p.GetExternalPayloads()}
	}
	if out == nil {
		return ps
	}
	return out
}

// plain reports bytes that hold no hidden character for sure: printable ASCII and the C0
// controls an encoder has escaped already (a raw one is not valid JSON). DEL and everything
// non-ASCII take the full check.
func plain(b []byte) bool {
	for _, c := range b {
		if c >= 0x7f {
			return false
		}
	}
	return true
}
