package registry

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"

	"github.com/airlock-dev/airlock/internal/display"
)

// Disclosure is what every approver surface shows about a call before anyone approves it
// (issue 19, item 4: what leaves the machine is declared, not guessed): the capability's
// description and classes from the registry, its declared destination, the hosts it contacts
// in the form the HTTP client resolves them, and the values of the declared fields this call
// sends. It is computed by the worker from the registry the call was admitted under; values
// are the call's own (hostile) JSON, which surfaces show escaped like every argument.
type Disclosure struct {
	Description string      `json:"description"`
	SideEffect  SideEffect  `json:"side_effect"`
	Network     Network     `json:"network"`
	Destination Destination `json:"destination"`
	// Hosts are the hosts contacted (kind host): the declared one, the URL host of an HTTP
	// capability, or for AnyHost the host of every URL the declared fields hold.
	Hosts []DisclosedHost `json:"hosts,omitempty"`
	// Leaving are the declared fields present in this call, with their values, in the order
	// the destination lists them.
	Leaving []LeavingField `json:"leaving,omitempty"`
}

// DisclosedHost is one host a call contacts.
type DisclosedHost struct {
	// Host is the form the HTTP client resolves and dials (display.DialHost): lower-case
	// ASCII, IDNA labels as xn--, IP literals canonical.
	Host string `json:"host"`
	// Written is the host as the arguments or the registry wrote it, set only when it differs
	// from Host (compatibility characters, non-ASCII labels, percent-escapes, hidden
	// characters): surfaces flag such a host.
	Written string `json:"written,omitempty"`
	// Field is the argument the host came from ("" for a host the registry fixes).
	Field string `json:"field,omitempty"`
	// Error says why no host could be derived (an unparsable URL or host): the call is shown
	// as going to an unknown host, never to a guessed one.
	Error string `json:"error,omitempty"`
}

// Differs reports whether the host was written in another form than the one contacted.
func (h DisclosedHost) Differs() bool { return h.Written != "" || h.Error != "" }

// LeavingField is one declared field this call sends, with its JSON value.
type LeavingField struct {
	Field string          `json:"field"`
	Value json.RawMessage `json:"value"`
}

// Disclose computes the Disclosure of a call of c with args (the validated arguments). Args
// that are not a JSON object leave Leaving and any argument hosts empty.
func (c *Capability) Disclose(args json.RawMessage) Disclosure {
	d := Disclosure{Description: c.Airlock.Description, SideEffect: c.Airlock.SideEffect, Network: c.Airlock.Network,
		Destination: c.DestinationOf()}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(args, &obj)
	for _, f := range d.Destination.Fields {
		if v, ok := obj[f]; ok {
			d.Leaving = append(d.Leaving, LeavingField{Field: f, Value: v})
		}
	}
	if d.Destination.Kind != DestinationHost {
		return d
	}
	switch {
	case c.Airlock.HTTP != nil:
		u := c.Airlock.HTTP.BaseURL()
		d.Hosts = append(d.Hosts, hostOf(rawHostOf(c.Airlock.HTTP.URL), u.Hostname(), ""))
	case d.Destination.Name == AnyHost:
		for _, lf := range d.Leaving {
			var s string
			if json.Unmarshal(lf.Value, &s) != nil {
				continue
			}
			d.Hosts = append(d.Hosts, urlHost(s, lf.Field))
		}
	default:
		d.Hosts = append(d.Hosts, hostOf(d.Destination.Name, d.Destination.Name, ""))
	}
	return d
}

// urlHost is the host a URL value contacts, as net/http derives it (url.Parse decodes
// percent-escapes in the host, then the transport maps it with IDNA lookup).
func urlHost(raw, field string) DisclosedHost {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		why := "not a URL with a host"
		var ue *url.Error
		if errors.As(err, &ue) {
			why = ue.Err.Error() // the url.Error repeats the URL
		}
		return DisclosedHost{Written: rawHostOf(raw), Field: field, Error: display.Visible(why)}
	}
	return hostOf(rawHostOf(raw), u.Hostname(), field)
}

// hostOf pairs the written host with the one dialed (DialHost of the parsed host).
func hostOf(written, parsed, field string) DisclosedHost {
	h, err := display.DialHost(parsed)
	if err != nil {
		return DisclosedHost{Written: written, Field: field, Error: err.Error()}
	}
	out := DisclosedHost{Host: h, Field: field}
	if w := strings.TrimSuffix(strings.TrimPrefix(written, "["), "]"); !strings.EqualFold(w, h) {
		out.Written = written
	}
	return out
}
