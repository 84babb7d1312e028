package mcp

import (
	"errors"
	"strings"
	"testing"
)

// A servers file that repeats a member (a second "command" a reader of the file would not
// see) is refused with ErrConfig naming the duplicate, as trailing data and unknown members are.
func TestParseServersRefusesRepeatedMembers(t *testing.T) {
	for _, doc := range []string{
		`{"schema/v":"` + ServersSchemaVersion + `","servers":[],"servers":[]}`,
		`{"schema/v":"` + ServersSchemaVersion + `","servers":[{"name":"files","command":"safe","command":"evil"}]}`,
	} {
		if _, err := ParseServers([]byte(doc), t.TempDir(), "servers.json"); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "duplicate") {
			t.Errorf("ParseServers(%s) = %v, want an ErrConfig naming the duplicate member", doc, err)
		}
	}
}
