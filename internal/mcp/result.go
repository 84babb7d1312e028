package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-dev/airlock/registry"
)

// Definition is the pinned form of a tool as the official Go SDK decodes tools/list: name,
// title, description, input and output schema (the server's JSON as a map, so key order
// never matters), and the annotations re-encoded by the SDK's ToolAnnotations (an absent
// hint and its documented default are the same claim). Import and the run-time check both
// build it here, so a tool whose server changed nothing keeps its digest.
func Definition(t *sdk.Tool) (registry.MCPToolDefinition, error) {
	if t == nil || t.Name == "" {
		return registry.MCPToolDefinition{}, errors.New("mcp: a tool without a name")
	}
	def := registry.MCPToolDefinition{Name: t.Name, Title: t.Title, Description: t.Description}
	var err error
	if t.InputSchema == nil {
		return def, fmt.Errorf("mcp: tool %q has no inputSchema", t.Name)
	}
	if def.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
		return def, fmt.Errorf("mcp: tool %q: inputSchema: %w", t.Name, err)
	}
	if t.OutputSchema != nil {
		if def.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return def, fmt.Errorf("mcp: tool %q: outputSchema: %w", t.Name, err)
		}
	}
	if t.Annotations != nil {
		if def.Annotations, err = json.Marshal(t.Annotations); err != nil {
			return def, fmt.Errorf("mcp: tool %q: annotations: %w", t.Name, err)
		}
	}
	return def, nil
}

// MaxErrorText bounds the text of a tool error carried in Output.Error.
const MaxErrorText = 2048

// Result is the data an MCP tool call returns to the model (inside the untrusted-data
// envelope like every result): the server and tool it came from, the content items, the
// structured content when the server sent one, and whether the tool reported an error.
// Binary content (images, audio, blobs) is described by type and size, never copied: it
// cannot be read as text and would only fill history.
type Result struct {
	Server     string          `json:"mcp_server"`
	Tool       string          `json:"mcp_tool"`
	IsError    bool            `json:"is_error,omitempty"`
	Content    []ContentItem   `json:"content"`
	Structured json.RawMessage `json:"structured,omitempty"`
}

// ContentItem is one content block of a result.
type ContentItem struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
	Bytes       int    `json:"bytes,omitempty"`
	URI         string `json:"uri,omitempty"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
}

// toOutput renders a call result as untrusted data with its provenance
// (mcp://<server>/tools/<tool>). A result the tool marked as an error also sets Output.Error
// (its text, bounded), so the outcome is failed.
func toOutput(server, tool string, res *sdk.CallToolResult) registry.Output {
	r := Result{Server: server, Tool: tool, IsError: res.IsError, Content: []ContentItem{}}
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			r.Content = append(r.Content, ContentItem{Type: "text", Text: v.Text})
		case *sdk.ImageContent:
			r.Content = append(r.Content, ContentItem{Type: "image", MIMEType: v.MIMEType, Bytes: len(v.Data)})
		case *sdk.AudioContent:
			r.Content = append(r.Content, ContentItem{Type: "audio", MIMEType: v.MIMEType, Bytes: len(v.Data)})
		case *sdk.ResourceLink:
			r.Content = append(r.Content, ContentItem{Type: "resource_link", URI: v.URI, Name: v.Name, Title: v.Title,
				Description: v.Description, MIMEType: v.MIMEType})
		case *sdk.EmbeddedResource:
			it := ContentItem{Type: "resource"}
			if v.Resource != nil {
				it.URI, it.MIMEType, it.Text, it.Bytes = v.Resource.URI, v.Resource.MIMEType, v.Resource.Text, len(v.Resource.Blob)
			}
			r.Content = append(r.Content, it)
		default:
			r.Content = append(r.Content, ContentItem{Type: fmt.Sprintf("unsupported %T", c)})
		}
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			r.Structured = b
		}
	}
	data, _ := json.Marshal(r)
	out := registry.Output{Data: data, SourceURL: "mcp://" + server + "/tools/" + tool}
	if res.IsError {
		var texts []string
		for _, it := range r.Content {
			if it.Text != "" {
				texts = append(texts, it.Text)
			}
		}
		msg := strings.Join(texts, "\n")
		if len(msg) > MaxErrorText {
			n := MaxErrorText
			for n > 0 && !utf8.RuneStart(msg[n]) {
				n--
			}
			msg = msg[:n] + "…"
		}
		if msg == "" {
			msg = "(no text)"
		}
		out.Error = "the MCP tool reported an error: " + msg
	}
	return out
}
