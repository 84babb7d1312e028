package main

import (
	"strings"
	"testing"
)

// TestDoctorModel: doctor says which provider, API and model a worker with this environment
// serves, never its key; a provider the worker would refuse fails with the reason (issue 31
// item 3).
func TestDoctorModel(t *testing.T) {
	for _, k := range []string{"AIRLOCK_OPENAI_BASE_URL", "AIRLOCK_ANTHROPIC_API_KEY", "AIRLOCK_ANTHROPIC_API_KEY_FILE", "AIRLOCK_ANTHROPIC_BASE_URL", "AIRLOCK_ANTHROPIC_MODEL", "AIRLOCK_OPENAI_API_KEY"} {
		t.Setenv(k, "")
	}
	t.Setenv("AIRLOCK_PROVIDER", "groq")
	t.Setenv("GROQ_API_KEY", "gsk-secret-value")
	t.Setenv("AIRLOCK_OPENAI_MODEL", "openai/gpt-oss-120b")
	c := doctorModel()
	if !c.OK || c.Warn || !strings.Contains(c.Detail, "groq chat.completions, model openai/gpt-oss-120b, at https://api.groq.com/openai/v1") || !strings.Contains(c.Detail, "key from GROQ_API_KEY") || strings.Contains(c.Detail, "gsk-secret") {
		t.Fatalf("groq: %+v", c)
	}
	t.Setenv("GROQ_API_KEY", "")
	if c := doctorModel(); !c.OK || !c.Warn || !strings.Contains(c.Detail, "no key") {
		t.Fatalf("groq without a key: %+v", c)
	}
	t.Setenv("AIRLOCK_PROVIDER", "openai-responses")
	if c := doctorModel(); !c.OK || !strings.Contains(c.Detail, "openai responses") {
		t.Fatalf("responses: %+v", c)
	}
	t.Setenv("AIRLOCK_PROVIDER", "mistral")
	if c := doctorModel(); c.OK || !strings.Contains(c.Detail, `"mistral"`) || !strings.Contains(c.Detail, "openai-responses") {
		t.Fatalf("unknown provider: %+v", c)
	}
	t.Setenv("AIRLOCK_PROVIDER", "")
	if c := doctorModel(); !c.OK || !c.Warn || !strings.Contains(c.Detail, "no live model") {
		t.Fatalf("none: %+v", c)
	}
}
