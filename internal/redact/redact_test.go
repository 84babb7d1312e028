package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
)

func TestURLMasksSecretsAndKeepsTheRest(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"postgres://airlock:hunter22@127.0.0.1:5432/airlock?sslmode=disable", "postgres://airlock:xxxxx@127.0.0.1:5432/airlock?sslmode=disable"},
		{"POSTGRES://u:pw123@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db?sslmode=require&password=hunter22&sslpassword=k3yp4ss", "postgres://h/db?sslmode=require&password=xxxxx&sslpassword=xxxxx"},
		{"postgres://h/db?password=hun&ter22&x=1", "postgres://h/db?password=xxxxx&xxxxx&x=1"},
		{"https://api.example/v1?api_key=sk-abcdef&model=m", "https://api.example/v1?api_key=xxxxx&model=m"},
		{"https://api.example/v1#tok3n", "https://api.example/v1#xxxxx"},
		{"sqlite:.airlock/airlock.db", "sqlite:.airlock/airlock.db"},
		{"sqlite:///abs/a.db?_pragma=x", "sqlite:///abs/a.db?_pragma=x"},
		{"host=h password=hunter22", "xxxxx (not a URL)"},
		{"hunter22", "xxxxx (not a URL)"},
	}
	for _, c := range cases {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// malformed are URLs whose password ("pa" + something) breaks URL parsing in every way an
// operator can write it; the key is every fragment of the password that must never show.
var malformed = map[string][]string{
	"postgres://u:pa/ss99@h:5432/db":             {"pa/ss99", "ss99"},
	"postgres://u:pa?ss99@h/db":                  {"pa?ss99", "ss99"},
	"postgres://u:pa#ss99@h/db":                  {"pa#ss99", "ss99"},
	"postgres://u:pa%zzss99@h/db":                {"pa%zzss99", "zzss99"},
	"postgres://u:pa@ss99@h/db":                  {"pa@ss99", "ss99"},
	"postgres://u:pa:ss99@h/db":                  {"pa:ss99", "ss99"},
	"postgres://u:1234/ss99@h/db":                {"1234/ss99", "ss99"},
	"postgres://u:pa ss99@h/db":                  {"pa ss99", "ss99"},
	"postgres://u:pa[ss99]@h/db":                 {"pa[ss99]", "ss99"},
	"postgres://h/db?password=pa@ss99":           {"pa@ss99", "ss99"},
	"postgres://h/db?password=pa#ss99":           {"pa#ss99", "ss99"},
	"postgres://u:pass99@[::1/db":                {"pass99"},
	"postgres://u:pass99\x7f@h/db":               {"pass99"},
	"postgres:/u:pass99@h/db":                    {"pass99"},
	"postgres:u:pass99@h/db":                     {"pass99"},
	"u:pass99@h/db":                              {"pass99"},
	"postgres://u:pass99@h:notaport/db?x=1#frag": {"pass99"},
}

func TestURLNeverShowsAPasswordOfAMalformedURL(t *testing.T) {
	for in, secrets := range malformed {
		got := URL(in)
		for _, s := range secrets {
			if strings.Contains(got, s) {
				t.Errorf("URL(%q) = %q shows %q", in, got, s)
			}
		}
	}
}

func TestErrorScrubsAndKeepsTheChain(t *testing.T) {
	raw := "postgres://u:pa%2Fss99@h/db?sslpassword=k3y99"
	inner := fmt.Errorf("parse %q: %w (pa/ss99, k3y99)", raw, fs.ErrNotExist)
	err := Error(inner, URLSecrets(raw)...)
	for _, s := range []string{"pa%2Fss99", "pa/ss99", "k3y99"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("scrubbed error %q shows %q", err, s)
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("the chain is lost")
	}
	plain := errors.New("nothing secret")
	if Error(plain, "k3y99") != plain || Error(nil, "x") != nil {
		t.Error("an error without secrets must come back unchanged")
	}
}

func FuzzURLNeverShowsThePassword(f *testing.F) {
	for in := range malformed {
		f.Add(in)
	}
	f.Add("postgres://u:p@h/db")
	f.Fuzz(func(t *testing.T, s string) {
		// Build a URL around a password drawn from s; whatever it holds, no 4-byte run of it
		// (beyond what the URL shows anyway) may appear in URL's output.
		pass := "Zq" + s + "Zq"
		raw := "postgres://user:" + pass + "@host/db?sslmode=disable"
		got := URL(raw)
		if strings.Contains(got, pass) {
			t.Fatalf("URL(%q) = %q shows the password", raw, got)
		}
		if strings.Contains(got, "Zq") {
			t.Fatalf("URL(%q) = %q shows part of the password", raw, got)
		}
	})
}

// A parameter whose value nests a secret parameter (libpq's options=-c password=…) is masked.
func TestURLMasksSecretsNestedInOtherParameters(t *testing.T) {
	for _, raw := range []string{
		"postgres://u@db/x?options=-c%20password%3Dsecretopt",
		"postgres://u@db/x?sslmode=disable&options=-c password=secretopt",
	} {
		if got := URL(raw); strings.Contains(got, "secretopt") {
			t.Errorf("URL(%q) = %q shows the nested secret", raw, got)
		}
	}
	if got := URL("postgres://u@db/x?options=-c%20search_path%3Dapp"); !strings.Contains(got, "search_path") {
		t.Errorf("a harmless options value is kept: %q", got)
	}
}

// Whatever walks a scrubbed error's chain by Unwrap and prints each link (Temporal's failure
// converter writes every link into history as a cause, and from there turn show, the audit and
// the receipts read it) finds no secret; errors.As still reaches the typed errors inside.
func TestErrorChainWalkersSeeNoSecret(t *testing.T) {
	base := "https://llm.internal.example/v1?token=t0psecret99"
	_, reqErr := http.Get(strings.Replace(base, "llm.internal.example", "llm.invalid", 1))
	if reqErr == nil {
		t.Fatal("a request to .invalid must fail")
	}
	err := fmt.Errorf("infer round 1: %w", Error(fmt.Errorf("inference: openai: %w", reqErr), URLSecrets(base)...))
	for link := error(err); link != nil; link = errors.Unwrap(link) {
		if strings.Contains(link.Error(), "t0psecret99") {
			t.Errorf("a link of the chain shows the secret: %q", link.Error())
		}
	}
	f := temporal.GetDefaultFailureConverter().ErrorToFailure(err)
	for depth := 0; f != nil; f, depth = f.GetCause(), depth+1 {
		if strings.Contains(f.GetMessage(), "t0psecret99") || strings.Contains(f.GetStackTrace(), "t0psecret99") {
			t.Errorf("history cause %d shows the secret: %q", depth, f.GetMessage())
		}
	}
	var ue *url.Error
	var ne net.Error
	if !errors.As(err, &ue) || !errors.As(err, &ne) {
		t.Errorf("errors.As must still reach *url.Error and net.Error: %v %v", ue, ne)
	}
}
