// Package email delivers Airlock notices (internal/notify) over SMTP with STARTTLS required
// (issue 23), through github.com/wneessen/go-mail: a text/plain part and an HTML alternative in
// which every value is HTML-escaped. The Message-ID derives from the delivery id, so a retry of
// one delivery is recognisably the same message; the subject holds only the notice's fixed
// title (the capability id).
package email

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"html"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/airlock-dev/airlock/internal/notify"
)

// Channel sends notices by e-mail.
type Channel struct {
	Host     string
	Port     int
	From     string
	To       []string
	Username string
	Password string
	TLS      *tls.Config
	Timeout  time.Duration
}

// New builds the e-mail channel of c: smtp (host:port), from, to required; username with
// password (a secret) for SMTP AUTH; ca_file to trust a private CA. STARTTLS is mandatory.
func New(c notify.ChannelConfig) (*Channel, error) {
	host, port, err := net.SplitHostPort(c.SMTP)
	if err != nil {
		return nil, fmt.Errorf("email channel %q: smtp %q: want host:port", c.Name, c.SMTP)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return nil, fmt.Errorf("email channel %q: smtp port %q", c.Name, port)
	}
	if c.From == "" || len(c.To) == 0 {
		return nil, fmt.Errorf("email channel %q: from and to are required", c.Name)
	}
	ch := &Channel{Host: host, Port: p, From: c.From, To: c.To, Username: c.Username, Timeout: 30 * time.Second,
		TLS: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
	if c.Username != "" {
		pw, err := c.Password.Value()
		if err != nil {
			return nil, fmt.Errorf("email channel %q: password: %w", c.Name, err)
		}
		ch.Password = pw
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("email channel %q: ca_file: %w", c.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("email channel %q: ca_file %s holds no PEM certificate", c.Name, c.CAFile)
		}
		ch.TLS.RootCAs = pool
	}
	return ch, nil
}

// Text is the text/plain body of n.
func Text(n notify.Notice) string {
	var b strings.Builder
	b.WriteString(n.Title() + "\n\n")
	for _, sec := range sections(n) {
		b.WriteString(sec.label + "\n")
		for _, l := range sec.lines {
			b.WriteString("  " + l + "\n")
		}
		b.WriteString("\n")
	}
	if n.Link != "" {
		b.WriteString(linkText(n) + ": " + n.Link + "\n")
	}
	b.WriteString("\nThis notice carries no token: deciding happens on the signed-in approver page.\n")
	return b.String()
}

// HTML is the text/html body of n, every value escaped.
func HTML(n notify.Notice) string {
	var b strings.Builder
	e := html.EscapeString
	b.WriteString("<!doctype html><html><body><h2>" + e(n.Title()) + "</h2>")
	for _, sec := range sections(n) {
		b.WriteString("<h3>" + e(sec.label) + "</h3><ul>")
		for _, l := range sec.lines {
			b.WriteString("<li><code>" + e(l) + "</code></li>")
		}
		b.WriteString("</ul>")
	}
	if n.Link != "" {
		b.WriteString(`<p><a href="` + e(n.Link) + `">` + e(linkText(n)) + `</a></p>`)
	}
	b.WriteString("<p>This notice carries no token: deciding happens on the signed-in approver page.</p></body></html>")
	return b.String()
}

type section struct {
	label string
	lines []string
}

// sections is n's human text (notify.Notice.Sections: the presentation's lines).
func sections(n notify.Notice) []section {
	var out []section
	for _, sec := range n.Sections() {
		if len(sec.Lines) > 0 {
			out = append(out, section{sec.Title, sec.Lines})
		}
	}
	return out
}

// linkText is what the card link says: decide while it waits, look afterwards.
func linkText(n notify.Notice) string {
	switch n.Kind {
	case notify.EventRequested, notify.EventReminder, notify.EventEscalated:
		return "Open the card to decide"
	}
	return "Open the card"
}

// Message builds the mail of n.
func (c *Channel) Message(n notify.Notice) (*mail.Msg, error) {
	m := mail.NewMsg()
	if err := m.From(c.From); err != nil {
		return nil, fmt.Errorf("email: from: %w", err)
	}
	if err := m.To(c.To...); err != nil {
		return nil, fmt.Errorf("email: to: %w", err)
	}
	m.Subject("[Airlock] " + n.Title())
	domain := "airlock.invalid"
	if i := strings.LastIndexByte(c.From, '@'); i >= 0 {
		domain = strings.Trim(c.From[i+1:], "> ")
	}
	m.SetMessageIDWithValue(n.DeliveryID + "@" + domain)
	m.SetGenHeader("X-Airlock-Delivery", n.DeliveryID)
	m.SetDate()
	m.SetBodyString(mail.TypeTextPlain, Text(n))
	m.AddAlternativeString(mail.TypeTextHTML, HTML(n))
	return m, nil
}

// Send mails n over STARTTLS. Errors never contain the password.
func (c *Channel) Send(ctx context.Context, n notify.Notice) error {
	m, err := c.Message(n)
	if err != nil {
		return err
	}
	opts := []mail.Option{mail.WithPort(c.Port), mail.WithTLSPolicy(mail.TLSMandatory), mail.WithTLSConfig(c.TLS),
		mail.WithTimeout(c.Timeout)}
	if c.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover), mail.WithUsername(c.Username), mail.WithPassword(c.Password))
	}
	cl, err := mail.NewClient(c.Host, opts...)
	if err != nil {
		return fmt.Errorf("email: %w", err)
	}
	if err := cl.DialAndSendWithContext(ctx, m); err != nil {
		msg := err.Error()
		if c.Password != "" {
			msg = strings.ReplaceAll(msg, c.Password, "<password>")
		}
		return errors.New("email: send: " + msg)
	}
	return nil
}
