package notify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// EnvFile names the notify file (AIRLOCK_NOTIFY_FILE); unset or empty means no notices.
const EnvFile = "AIRLOCK_NOTIFY_FILE"

// File is the notify file (YAML; JSON is YAML too): the channels notices go to and the routes
// that pick them by capability. Unknown keys are an error, so a typo never silently drops a
// channel. Secrets are never written in it: each names a file or an environment variable.
type File struct {
	// BaseURL is the approver page as approvers reach it (https://airlock.example); each notice
	// links to its card under it. Empty: notices carry no link.
	BaseURL string `yaml:"base_url"`
	// Channels are the places notices go, by unique name.
	Channels []ChannelConfig `yaml:"channels"`
	// Routes pick channels for a confirmation: every route whose capabilities match adds its
	// channels (each channel is told once per notice kind).
	Routes []Route `yaml:"routes"`
	// SlackInteractive, when set, lets Slack's Approve and Deny buttons decide the
	// confirmations of routes with slack_decide (served by `airlock web` at
	// /slack/interactions).
	SlackInteractive *SlackInteractive `yaml:"slack_interactive"`
}

// SlackInteractive configures deciding from Slack: the app's signing secret and the map from
// Slack user ids to approver names of the approvers file (an unmapped user decides nothing).
type SlackInteractive struct {
	SigningSecret Secret            `yaml:"signing_secret"`
	Users         map[string]string `yaml:"users"`
}

// SlackDecides reports whether a confirmation of capability id may be decided from Slack: a
// matching route sets slack_decide and slack_interactive is configured.
func (f *File) SlackDecides(id string) bool {
	if f == nil || f.SlackInteractive == nil {
		return false
	}
	for _, r := range f.Routes {
		if r.SlackDecide && r.Matches(id) {
			return true
		}
	}
	return false
}

// ChannelConfig is one channel. Type is webhook, slack or email; the other fields are the
// driver's (see each driver package).
type ChannelConfig struct {
	Name string `yaml:"name"`
	Type string `yaml:"type"`
	// URL: webhook target (webhook), chat.postMessage API base (slack, default https://slack.com/api).
	URL string `yaml:"url"`
	// Secret: the webhook's HMAC key (webhook); the incoming-webhook URL (slack, instead of Token).
	Secret Secret `yaml:"secret"`
	// Token: the bot token for chat.postMessage (slack), with SlackChannel.
	Token        Secret `yaml:"token"`
	SlackChannel string `yaml:"slack_channel"`
	// SMTP (email): host:port of a server that offers STARTTLS; From, To; Username and
	// Password for SMTP AUTH (optional); CAFile to trust a private CA.
	SMTP     string   `yaml:"smtp"`
	From     string   `yaml:"from"`
	To       []string `yaml:"to"`
	Username string   `yaml:"username"`
	Password Secret   `yaml:"password"`
	CAFile   string   `yaml:"ca_file"`
}

// Secret names where a secret is read: a file (its content, trailing newline trimmed) or an
// environment variable. Exactly one is set when the secret is required.
type Secret struct {
	File string `yaml:"file"`
	Env  string `yaml:"env"`
}

// Set reports whether s names a source.
func (s Secret) Set() bool { return s.File != "" || s.Env != "" }

// Value reads the secret. Errors name the source, never the value.
func (s Secret) Value() (string, error) {
	switch {
	case s.File != "" && s.Env != "":
		return "", errors.New("secret: set file or env, not both")
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("secret file: %w", err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("secret file %s is empty", s.File)
		}
		return v, nil
	case s.Env != "":
		v := os.Getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("secret: environment variable %s is empty or unset", s.Env)
		}
		return v, nil
	}
	return "", errors.New("secret: not configured (set file: or env:)")
}

// Route sends the notices of matching capabilities to Channels, reminds at RemindAt of the
// time to expiry and escalates to EscalateTo at EscalateAt (fractions in (0,1); 0 is off).
type Route struct {
	// Capabilities are capability ids or path.Match patterns ("*", "http.*"); empty matches all.
	Capabilities []string `yaml:"capabilities"`
	// Groups, when set, narrow the route to confirmations that approvers of one of these
	// approver groups may decide (the capability's policy approval/groups, issue 21); a
	// confirmation any approver may decide matches no group route.
	Groups     []string `yaml:"groups"`
	Channels   []string `yaml:"channels"`
	RemindAt   float64  `yaml:"remind_at"`
	EscalateAt float64  `yaml:"escalate_at"`
	EscalateTo []string `yaml:"escalate_to"`
	// SlackDecide puts Approve and Deny buttons on this route's Slack notices (needs
	// slack_interactive). Never set it for a capability that needs a passkey.
	SlackDecide bool `yaml:"slack_decide"`
}

// MatchesGroups reports whether r applies to a confirmation that approvers of groups may
// decide: always when r names no groups, else when the two share one.
func (r Route) MatchesGroups(groups []string) bool {
	if len(r.Groups) == 0 {
		return true
	}
	for _, g := range r.Groups {
		if slices.Contains(groups, g) {
			return true
		}
	}
	return false
}

// Matches reports whether r applies to capability id.
func (r Route) Matches(id string) bool {
	if len(r.Capabilities) == 0 {
		return true
	}
	for _, p := range r.Capabilities {
		if ok, _ := path.Match(p, id); ok || p == id {
			return true
		}
	}
	return false
}

// Parse reads and checks a notify file: channel names unique and known types, routes naming
// known channels, fractions in [0,1), escalation with channels to escalate to.
func Parse(b []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("notify file: %w", err)
	}
	names := map[string]bool{}
	for i, c := range f.Channels {
		if c.Name == "" {
			return nil, fmt.Errorf("notify file: channel %d has no name", i+1)
		}
		if names[c.Name] {
			return nil, fmt.Errorf("notify file: channel %q is defined twice", c.Name)
		}
		names[c.Name] = true
		switch c.Type {
		case "webhook", "slack", "email":
		default:
			return nil, fmt.Errorf("notify file: channel %q: type %q: want webhook, slack or email", c.Name, c.Type)
		}
	}
	if si := f.SlackInteractive; si != nil {
		if !si.SigningSecret.Set() {
			return nil, errors.New("notify file: slack_interactive needs signing_secret ({file: …} or {env: …})")
		}
		if len(si.Users) == 0 {
			return nil, errors.New("notify file: slack_interactive needs users (Slack user id: approver name)")
		}
	}
	for i, r := range f.Routes {
		if r.SlackDecide && f.SlackInteractive == nil {
			return nil, fmt.Errorf("notify file: route %d: slack_decide needs slack_interactive", i+1)
		}
		if len(r.Channels) == 0 {
			return nil, fmt.Errorf("notify file: route %d names no channels", i+1)
		}
		for _, n := range append(append([]string{}, r.Channels...), r.EscalateTo...) {
			if !names[n] {
				return nil, fmt.Errorf("notify file: route %d: no channel named %q", i+1, n)
			}
		}
		for _, p := range r.Capabilities {
			if _, err := path.Match(p, ""); err != nil {
				return nil, fmt.Errorf("notify file: route %d: capability pattern %q: %w", i+1, p, err)
			}
		}
		if r.RemindAt < 0 || r.RemindAt >= 1 || r.EscalateAt < 0 || r.EscalateAt >= 1 {
			return nil, fmt.Errorf("notify file: route %d: remind_at and escalate_at are fractions of the expiry in [0, 1)", i+1)
		}
		if r.EscalateAt > 0 && len(r.EscalateTo) == 0 {
			return nil, fmt.Errorf("notify file: route %d: escalate_at needs escalate_to channels", i+1)
		}
		if r.EscalateAt == 0 && len(r.EscalateTo) > 0 {
			return nil, fmt.Errorf("notify file: route %d: escalate_to needs escalate_at", i+1)
		}
	}
	return &f, nil
}

// Channel returns the channel named name.
func (f *File) Channel(name string) (ChannelConfig, bool) {
	for _, c := range f.Channels {
		if c.Name == name {
			return c, true
		}
	}
	return ChannelConfig{}, false
}

// Plan is what one confirmation of a capability is owed: a notice now to each of Now, a
// reminder at fraction Remind[ch] of its time to expiry, an escalation at Escalate[ch].
type Plan struct {
	Now      []string
	Remind   map[string]float64
	Escalate map[string]float64
}

// PlanFor routes a confirmation of capability id that approvers of groups may decide (nil:
// any approver): the union of the matching routes, each channel once per kind (the earliest
// fraction wins).
func (f *File) PlanFor(id string, groups []string) Plan {
	p := Plan{Remind: map[string]float64{}, Escalate: map[string]float64{}}
	seen := map[string]bool{}
	earliest := func(m map[string]float64, ch string, at float64) {
		if old, ok := m[ch]; !ok || at < old {
			m[ch] = at
		}
	}
	for _, r := range f.Routes {
		if !r.Matches(id) || !r.MatchesGroups(groups) {
			continue
		}
		for _, ch := range r.Channels {
			if !seen[ch] {
				seen[ch] = true
				p.Now = append(p.Now, ch)
			}
			if r.RemindAt > 0 {
				earliest(p.Remind, ch, r.RemindAt)
			}
		}
		if r.EscalateAt > 0 {
			for _, ch := range r.EscalateTo {
				earliest(p.Escalate, ch, r.EscalateAt)
			}
		}
	}
	return p
}

// Source yields the current notify file, re-reading it when it changes on disk (so channels
// and routes change without a restart). A file that no longer parses keeps the last good one
// in force and Current returns it with the error, so notices still flow while the operator
// fixes the file. Safe for concurrent use.
type Source struct {
	path string
	mu   sync.Mutex
	f    *File
	sum  string
	fi   os.FileInfo
	err  error
}

// NewSource watches the notify file at path.
func NewSource(path string) *Source { return &Source{path: path} }

// SourceFromEnv watches the notify file EnvFile names and reads it once, so a process fails
// at start on a file that does not parse: (nil, nil, nil) when EnvFile is unset. The file is
// what it holds now; the Source follows later edits.
func SourceFromEnv() (*Source, *File, error) {
	path := os.Getenv(EnvFile)
	if path == "" {
		return nil, nil, nil
	}
	src := NewSource(path)
	f, _, err := src.Current()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", EnvFile, err)
	}
	return src, f, nil
}

// Path is the watched file.
func (s *Source) Path() string { return s.path }

// Current returns the file in force and its revision (SHA-256 of its bytes, 12 hex digits), and
// the error of the last reload, if it failed. With no good file ever read, f is nil.
func (s *Source) Current() (f *File, revision string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("notify file %s does not exist: %w", s.path, err)
		}
		s.err = err
		return s.f, s.sum, err
	}
	if s.fi != nil && os.SameFile(fi, s.fi) && fi.ModTime().Equal(s.fi.ModTime()) && fi.Size() == s.fi.Size() {
		return s.f, s.sum, s.err
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		s.err = fmt.Errorf("notify file: %w", err)
		return s.f, s.sum, s.err
	}
	s.fi = fi
	parsed, err := Parse(b)
	if err != nil {
		s.err = fmt.Errorf("%s: %w (the last good file stays in force)", s.path, err)
		return s.f, s.sum, s.err
	}
	h := sha256.Sum256(b)
	s.f, s.sum, s.err = parsed, hex.EncodeToString(h[:6]), nil
	return s.f, s.sum, nil
}
