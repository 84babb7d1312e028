package codec

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

const hostile = "a\u200bb\u202ec\u2066d\x7fe\U000E0041f — ok é"

// What Airlock writes to history carries hidden characters as \u escapes and decodes to the
// same value; with encryption on, the decrypted payload is escaped too.
func TestPayloadsCarryHiddenCharactersEscaped(t *testing.T) {
	key, _ := NewKey("k1")
	enc, err := New([]Key{key})
	if err != nil {
		t.Fatal(err)
	}
	for name, dc := range map[string]converter.DataConverter{"plain": DataConverter(nil), "encrypted": DataConverter(enc)} {
		p, err := dc.ToPayload(map[string]string{"result": hostile})
		if err != nil {
			t.Fatal(err)
		}
		data := p.GetData()
		if name == "encrypted" {
			ps, err := enc.Decode([]*commonpb.Payload{p})
			if err != nil {
				t.Fatal(err)
			}
			data = ps[0].GetData()
		}
		for _, raw := range []string{"\u200b", "\u202e", "\u2066", "\x7f", "\U000E0041"} {
			if bytes.Contains(data, []byte(raw)) {
				t.Errorf("%s: payload holds raw %q: %s", name, raw, data)
			}
		}
		if !bytes.Contains(data, []byte(`\u200b`)) || !bytes.Contains(data, []byte(`\udb40\udc41`)) || !bytes.Contains(data, []byte("— ok é")) {
			t.Errorf("%s: payload %s", name, data)
		}
		var back map[string]string
		if err := dc.FromPayload(p, &back); err != nil || back["result"] != hostile {
			t.Errorf("%s: decoded %q, %v", name, back["result"], err)
		}
	}
	// Payloads that are not JSON, or hold nothing hidden, are passed as they are.
	bin := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("binary/plain")}, Data: []byte("a\u200bb")}
	plainJSON := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)}, Data: []byte(`"héllo"`)}
	out, _ := Escape{}.Encode([]*commonpb.Payload{bin, plainJSON})
	if out[0] != bin || out[1] != plainJSON {
		t.Error("payloads without anything to escape were replaced")
	}
}

// The codec server hands the Temporal UI escaped payloads, also those written raw before
// Airlock escaped them.
func TestCodecServerDecodesEscaped(t *testing.T) {
	key, _ := NewKey("k1")
	enc, _ := New([]Key{key})
	raw := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data: []byte(`{"result":"` + hostile + `"}`)}
	sealed, err := enc.Encode([]*commonpb.Payload{raw})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(enc, "tok", nil))
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"payloads": []map[string]any{{"metadata": sealed[0].GetMetadata(), "data": sealed[0].GetData()}}})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/decode", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Payloads []struct {
			Data []byte `json:"data"`
		} `json:"payloads"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || len(got.Payloads) != 1 {
		t.Fatalf("decode response: %v %+v", err, got)
	}
	d := string(got.Payloads[0].Data)
	if strings.Contains(d, "\u200b") || !strings.Contains(d, `\u200b`) || !strings.Contains(d, `\u202e`) {
		t.Fatalf("the UI would be handed %q", d)
	}
}
