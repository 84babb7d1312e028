package main

import (
	"fmt"

	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/web"
)

// slackInteractions reads slack_interactive from the notify file (AIRLOCK_NOTIFY_FILE): nil
// when either is unset. Which capabilities Slack may decide follows the file live; the signing
// secret and the user map are read at start.
func slackInteractions() (*web.SlackInteractions, error) {
	src, f, err := notify.SourceFromEnv()
	if src == nil || err != nil {
		return nil, err
	}
	if f.SlackInteractive == nil {
		return nil, nil
	}
	secret, err := f.SlackInteractive.SigningSecret.Value()
	if err != nil {
		return nil, fmt.Errorf("%s: slack_interactive signing_secret: %w", notify.EnvFile, err)
	}
	return &web.SlackInteractions{SigningSecret: []byte(secret), Users: f.SlackInteractive.Users,
		Allows: func(capability string) bool {
			cur, _, _ := src.Current()
			return cur.SlackDecides(capability)
		}}, nil
}
