package web

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/presentation"
)

// Truncation limits, in runes of the visible form.
const (
	fieldLimit   = 160
	literalLimit = 600
)

// shown is one hostile string as the page shows it (internal/display): Text is the visible
// form (hidden runes as <U+XXXX>), cut to a limit when Truncated, with Full the whole visible
// form; Flags name what was made visible or deserves a second look (display.Flag values);
// Note gives the ASCII (punycode) form of non-ASCII hosts in it.
type shown struct {
	Text      string
	Full      string
	Truncated bool
	Flags     []string
	Note      string
}

// show renders s for the page, truncated at limit runes (0: display.DefaultLimit).
func show(s string, limit int) shown {
	return fromValue(display.Show(s, limit))
}

func fromValue(v display.Value) shown {
	out := shown{Text: v.Short, Full: v.Full, Truncated: v.Has(display.FlagTruncated)}
	for _, f := range v.Flags {
		out.Flags = append(out.Flags, string(f))
	}
	if len(v.Hosts) > 0 {
		out.Note = "host is " + strings.Join(v.Hosts, ", ")
	}
	return out
}

// shownOf is a presentation value as the page's templates show it.
func shownOf(t presentation.Text) shown {
	out := shown{Text: t.Text, Full: t.Full, Truncated: t.Truncated(), Flags: t.Flags}
	if out.Full == "" {
		out.Full = t.Text
	}
	if len(t.Hosts) > 0 {
		out.Note = "host is " + strings.Join(t.Hosts, ", ")
	}
	return out
}

// disclosedOf is the card's "what leaves the machine" block of p (declared, not guessed).
func disclosedOf(p presentation.Confirmation) *disclosed {
	d := &disclosed{Description: shownOf(p.Description), SideEffect: p.SideEffect, Network: p.Network, Kind: p.Destination.Kind}
	if p.Destination.Name != nil {
		d.Name = shownOf(*p.Destination.Name)
	}
	for _, h := range p.Destination.Hosts {
		dh := disclosedHost{Host: shownOf(h.Host), Field: h.Field, Differs: h.Written != nil || h.Error != nil}
		if h.Written != nil {
			dh.Written = shownOf(*h.Written)
		}
		if h.Error != nil {
			dh.Error = shownOf(*h.Error)
		}
		if dh.Differs {
			dh.Host.Flags = append(dh.Host.Flags, FlagHostDiffers)
		}
		d.Hosts = append(d.Hosts, dh)
	}
	for _, f := range p.Destination.Sends {
		d.Leaving = append(d.Leaving, field{Name: shown{Text: f.Path}, Value: shownOf(f.Value)})
	}
	return d
}

// field is one argument leaf as the page shows it: its path (keys made visible and quoted
// when not plain) and its value.
type field struct {
	Name  shown
	Value shown
}

// leave is one thing that leaves the machine if the call runs (display.Egress): a URL, a
// host, a recipient, an amount.
type leave struct {
	Kind  string
	Name  shown
	Value shown
}

// origin is where one argument value came from (internal/provenance, issue 24): Untrusted
// marks a value found only in capability results, the mark of a planted value.
type origin struct {
	Path         shown
	Label        shown
	Untrusted    bool
	Unattributed bool
}

// editable is the JSON for the edit form's textarea: the literal arguments, indented, with
// every rune display would make visible written as a \uXXXX escape, so the textarea shows
// the same value without hidden or reordering characters (decoding it gives the same value).
func editable(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return display.Visible(string(raw))
	}
	s := b.String()
	if !display.Flagged(s) {
		return s
	}
	var o strings.Builder
	for _, r := range s {
		if r != '\n' && display.Flagged(string(r)) {
			if r > 0xffff {
				r1, r2 := utf16Pair(r)
				o.WriteString(jsonEscape(r1) + jsonEscape(r2))
				continue
			}
			o.WriteString(jsonEscape(r))
			continue
		}
		o.WriteRune(r)
	}
	return o.String()
}

func jsonEscape(r rune) string {
	const hex = "0123456789abcdef"
	return `\u` + string([]byte{hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf]})
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// disclosed is a call's registry.Disclosure as the card shows it: the capability's description
// and classes, the declared destination, each host contacted (flagged host_differs when the
// arguments or the registry wrote it in another form), and the declared fields' values.
type disclosed struct {
	Description shown
	SideEffect  string
	Network     string
	Kind        string
	Name        shown
	Hosts       []disclosedHost
	Leaving     []field
}

type disclosedHost struct {
	Host    shown
	Written shown
	Field   string
	Differs bool
	Error   shown
}

// FlagHostDiffers marks a host whose written form is not the one contacted.
const FlagHostDiffers = "host_differs"
