package registry

import (
	"errors"
	"strings"
	"testing"
)

// A registry document or policy that repeats a member (`"side-effect": "external-write",
// "side-effect": "none"`) means two things: a reviewer reading the file sees the first, a JSON
// decoder keeps the last. Load refuses it with a clear diagnostic (RuleDocumentParse /
// RulePolicyParse), at any depth, instead of silently keeping one.
func TestLoadRefusesDuplicateMembers(t *testing.T) {
	base := string(Embedded)
	dupEntry := strings.Replace(base, `"side-effect": "none",`, `"side-effect": "external-write", "side-effect": "none",`, 1)
	dupTop := strings.Replace(base, `"revision": "2026-12-02.2",`, `"revision": "2026-12-02.2", "revision": "other",`, 1)
	dupEscaped := strings.Replace(base, `"side-effect": "none",`, `"side-effect": "external-write", "side\u002deffect": "none",`, 1)
	if dupEntry == base || dupTop == base || dupEscaped == base {
		t.Fatal("the test's replacements did not apply: the embedded registry changed")
	}
	pol := BasePolicy()
	polDup := Source{Name: "policy-dup", Data: []byte(strings.Replace(string(pol.Data), `{`, `{"schema/v": "x", `, 1))}
	for _, c := range []struct {
		name string
		src  []Source
		want string
	}{
		{"entry member twice", []Source{{"dup", []byte(dupEntry)}, pol}, "duplicate"},
		{"top-level member twice", []Source{{"dup", []byte(dupTop)}, pol}, "duplicate"},
		{"member twice, once escaped", []Source{{"dup", []byte(dupEscaped)}, pol}, "duplicate"},
		{"policy member twice", []Source{Base(), polDup}, "duplicate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Load(c.src, baseImpls())
			if err == nil || r != nil {
				t.Fatalf("a document with a repeated member loaded")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("diagnostic %v does not say %q", err, c.want)
			}
		})
	}
}
