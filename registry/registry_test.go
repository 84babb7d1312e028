package registry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

type fetchArgs struct {
	URL string `json:"url" validate:"required,url"`
}

type noArgs struct{}

func okInvoke(context.Context, Invocation) (Output, error) {
	return Output{Data: json.RawMessage(`{}`)}, nil
}

func baseImpls() []Implementation {
	return []Implementation{
		Typed("system.health", 1, func(context.Context, *noArgs, Invocation) (Output, error) { return Output{}, nil }),
		Typed("web.fetch", 1, func(context.Context, *fetchArgs, Invocation) (Output, error) { return Output{}, nil }),
		Typed("capability.catalog.list", 1, func(context.Context, *noArgs, Invocation) (Output, error) { return Output{}, nil }),
		Typed("capability.catalog.describe", 1, func(context.Context, *noArgs, Invocation) (Output, error) { return Output{}, nil }),
	}
}

func TestLoadEmbeddedBase(t *testing.T) {
	r, err := Load([]Source{Base(), BasePolicy()}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	cat := r.Catalog(nil, time.Now())
	if len(cat) != 4 || cat[0].CapabilityID != "capability.catalog.describe" || cat[1].CapabilityID != "capability.catalog.list" ||
		cat[2].CapabilityID != "system.health" || cat[3].Name != "web_fetch" {
		t.Fatalf("catalog = %+v", cat)
	}
	cat = cat[2:]
	var schema map[string]any
	if err := json.Unmarshal(cat[1].Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["additionalProperties"] != false || schema["type"] != "object" {
		t.Fatalf("generated schema must be a closed object: %s", cat[1].Parameters)
	}
	c, _ := r.ByToolName("web_fetch")
	if c.Automatic() {
		t.Fatal("web.fetch is external: it must need confirmation")
	}
	h, _ := r.ByToolName("system_health")
	if !h.Automatic() {
		t.Fatal("system.health is local and read-only: automatic")
	}
}

func TestLoadFailsClosed(t *testing.T) {
	base := string(Embedded)
	pol := BasePolicy()
	cases := []struct {
		name  string
		src   []Source
		impls []Implementation
		want  string
	}{
		{"no sources", nil, baseImpls(), "[non-empty] no registry document"},
		{"no policy", []Source{Base()}, baseImpls(), "[policy-missing]"},
		{"malformed", []Source{{"x", []byte(`{"schema/v":`)}, pol}, baseImpls(), "[document-parse] malformed JSON"},
		{"unknown field", []Source{{"x", []byte(`{"schema/v":"capability-registry.v1","entries":[],"extra":1}`)}, pol}, nil, "[strict-shape] at /: additional properties 'extra' not allowed"},
		{"empty", []Source{{"x", []byte(`{"schema/v":"capability-registry.v1","entries":[]}`)}, pol}, nil, "[non-empty]"},
		{"wrong schema/v", []Source{{"x", []byte(strings.Replace(base, `"capability-registry.v1"`, `"capability-registry.v2"`, 1))}, pol}, baseImpls(), "[schema-version]"},
		{"entry without implementation", []Source{Base(), pol}, baseImpls()[:1], "web.fetch@1: [implementation-bound] entry has no implementation"},
		{"implementation without entry", []Source{Base(), pol}, append(baseImpls(), Typed("shell.run", 1, func(context.Context, *noArgs, Invocation) (Output, error) { return Output{}, nil })), "shell.run@1: [implementation-registered] implementation has no registry entry"},
		{"surfaces contradict flags", []Source{{"x", []byte(strings.Replace(base, `"surfaces": [
        "host-local"
      ],
      "wire/name": "app/web.fetch"`, `"surfaces": ["federated"], "wire/name": "app/web.fetch"`, 1))}, pol}, baseImpls(), "[surfaces-derived]"},
		{"bad id", []Source{{"x", []byte(strings.Replace(base, `"web.fetch"`, `"Web_Fetch"`, 1))}, pol}, baseImpls(), "P072 id shapes"},
		{"duplicate tool name", []Source{{"x", []byte(strings.Replace(base, `"web_fetch"`, `"system_health"`, 1))}, pol}, baseImpls(), "already used"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Load(c.src, c.impls)
			if err == nil || r != nil {
				t.Fatalf("want a load failure, got registry %v", r)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error must wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("diagnostic %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestValidateArgumentsStrict(t *testing.T) {
	r, err := Load([]Source{Base(), BasePolicy()}, baseImpls())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.ByToolName("web_fetch")
	cases := []struct {
		args, code string
	}{
		{`{"url":"https://example.org/"}`, ""},
		{`{"url":"https://example.org/","extra":1}`, "schema_mismatch"},
		{`{"URL":"https://example.org/"}`, "schema_mismatch"},
		{`{"url":42}`, "schema_mismatch"},
		{`{"url":"not a url"}`, "rule_failed"},
		{`{"url":"https://a/","url":"https://b/"}`, "duplicate_key"},
		{`{}`, "schema_mismatch"},
	}
	for _, tc := range cases {
		dec, err := c.ValidateArguments(json.RawMessage(tc.args))
		if tc.code == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.args, err)
			} else if dec.(*fetchArgs).URL != "https://example.org/" {
				t.Errorf("decoded %+v", dec)
			}
			continue
		}
		var ae *ArgumentError
		if !errors.As(err, &ae) || ae.Code != tc.code {
			t.Errorf("%s: got %v, want code %s", tc.args, err, tc.code)
		}
	}
}

func TestLayersLoadWithSchemaImplementations(t *testing.T) {
	for _, name := range LayerNames() {
		src, err := Layer(name)
		if err != nil {
			t.Fatal(err)
		}
		ents, err := Entries(src)
		if err != nil {
			t.Fatal(err)
		}
		var impls []Implementation
		for _, e := range ents {
			impls = append(impls, Implementation{ID: e.ID, Version: e.Version, Schema: json.RawMessage(`{"type":"object"}`), Invoke: okInvoke})
		}
		pol, err := LayerPolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Load([]Source{src, pol}, impls); err != nil {
			t.Errorf("layer %s: %v", name, err)
		}
	}
	if _, err := Layer("nope"); err == nil || !strings.Contains(err.Error(), "agentdojo-banking") {
		t.Fatalf("unknown layer error should list known layers: %v", err)
	}
}

// The strict decode into a Go-typed capability's arguments tells a value the Go type cannot hold
// (the schema says "number"; float64 cannot hold 1e400) from a field the type lacks.
func TestDecodeErrorNamesTheField(t *testing.T) {
	type args struct {
		N     float64 `json:"n"`
		Count int32   `json:"count"`
		Inner struct {
			K int `json:"k"`
		} `json:"inner"`
	}
	for _, tc := range []struct{ raw, code, detail string }{
		{`{"n":1e400}`, "schema_mismatch", "/n: number 1e400 does not fit the capability's Go type float64"},
		{`{"count":3000000000}`, "schema_mismatch", "/count: number 3000000000 does not fit the capability's Go type int32"},
		{`{"inner":{"k":1.5}}`, "schema_mismatch", "/inner/k: number 1.5 does not fit the capability's Go type int"},
		{`{"other":1}`, "unknown_field", `json: unknown field "other"`},
		{`{"n":1` + strings.Repeat("0", 500) + `e400}`, "schema_mismatch", "/n: number 1" + strings.Repeat("0", 40) + "… does not fit the capability's Go type float64"},
	} {
		dec := json.NewDecoder(strings.NewReader(tc.raw))
		dec.DisallowUnknownFields()
		err := dec.Decode(new(args))
		if err == nil {
			t.Fatalf("%s: decoded", tc.raw)
		}
		got := decodeError(err)
		if got.Code != tc.code || got.Detail != tc.detail {
			t.Errorf("%s: %s %q, want %s %q", tc.raw, got.Code, got.Detail, tc.code, tc.detail)
		}
	}
}
