// Package channels opens the notice channels a notify file names (issue 23): webhook, slack and
// email, one driver package each.
package channels

import (
	"fmt"

	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/notify/email"
	"github.com/airlock-dev/airlock/internal/notify/slack"
	"github.com/airlock-dev/airlock/internal/notify/webhook"
)

// Open is the notify.Opener of the three drivers: it reads the channel's secrets now (a
// missing secret is an error naming where it was looked for, never its value).
func Open(c notify.ChannelConfig) (notify.Channel, error) {
	switch c.Type {
	case "webhook":
		return webhook.New(c)
	case "slack":
		return slack.New(c)
	case "email":
		return email.New(c)
	}
	return nil, fmt.Errorf("notify channel %q: unknown type %q", c.Name, c.Type)
}
