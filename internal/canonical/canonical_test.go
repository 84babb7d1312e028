package canonical

import (
	"errors"
	"testing"
)

func TestCanonicalize(t *testing.T) {
	cases := []struct {
		in, want string
		err      error
	}{
		{`{"b":1, "a":[true,null,"x"]}`, `{"a":[true,null,"x"],"b":1}`, nil},
		{`{"n":12345678901234567890123}`, `{"n":12345678901234567890123}`, nil},
		{`{"n":1.0}`, `{"n":1.0}`, nil},
		{`{"a":{"d":1,"c":2}}`, `{"a":{"c":2,"d":1}}`, nil},
		{`{"a":1,"a":2}`, "", ErrDuplicateKey},
		{`{"a":1} {}`, "", ErrInvalid},
		{`{"a":`, "", ErrInvalid},
	}
	for _, c := range cases {
		got, err := Canonicalize([]byte(c.in))
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%s: err %v, want %v", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s, %v; want %s", c.in, got, err, c.want)
		}
	}
}

func TestDigestStableAcrossKeyOrder(t *testing.T) {
	a, _ := Digest([]byte(`{"to":"x","amount":50.0}`))
	b, _ := Digest([]byte(`{ "amount": 50.0, "to": "x" }`))
	c, _ := Digest([]byte(`{"to":"x","amount":50.00}`))
	if a != b {
		t.Fatalf("key order changed the digest")
	}
	if a == c {
		t.Fatalf("a different literal must change the digest")
	}
}
