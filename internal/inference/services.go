package inference

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/airlock-dev/airlock/internal/redact"
)

// Service is a model provider a worker can serve through one of the adapters (issue 31 item
// 3): its name (AIRLOCK_PROVIDER), the API it speaks, its default endpoint and the
// environment variable its key is read from when AIRLOCK_OPENAI_API_KEY is unset.
type Service struct {
	Name    string
	API     string // "chat.completions", "responses", "messages" or "/api/chat" (Ollama native)
	BaseURL string // the default endpoint ("" none: it must be configured)
	KeyEnv  string // the provider's own key variable ("" none)
	// NeedsModel: the service has no default model, so AIRLOCK_OPENAI_MODEL must name one.
	NeedsModel bool
}

// Services are the providers AIRLOCK_PROVIDER names. Every OpenAI-compatible one goes through
// the chat-completions adapter; what each server sends beyond OpenAI (Groq's x_groq and
// reasoning channel, Gemini's thought signatures, OpenRouter's provider field, Azure's
// content filter results) is read by the parser's part model, not by the adapter.
var Services = []Service{
	{Name: "openai", API: "chat.completions", BaseURL: DefaultOpenAIBaseURL, KeyEnv: "OPENAI_API_KEY"},
	{Name: "openai-responses", API: "responses", BaseURL: DefaultOpenAIBaseURL, KeyEnv: "OPENAI_API_KEY"},
	{Name: "anthropic", API: "messages"},
	{Name: "azure", API: "chat.completions", KeyEnv: "AZURE_OPENAI_API_KEY", NeedsModel: false},
	{Name: "gemini", API: "chat.completions", BaseURL: "https://generativelanguage.googleapis.com/v1beta/openai", KeyEnv: "GEMINI_API_KEY", NeedsModel: true},
	{Name: "groq", API: "chat.completions", BaseURL: "https://api.groq.com/openai/v1", KeyEnv: "GROQ_API_KEY", NeedsModel: true},
	{Name: "openrouter", API: "chat.completions", BaseURL: "https://openrouter.ai/api/v1", KeyEnv: "OPENROUTER_API_KEY", NeedsModel: true},
	{Name: "xai", API: "chat.completions", BaseURL: "https://api.x.ai/v1", KeyEnv: "XAI_API_KEY", NeedsModel: true},
	{Name: "ollama", API: "chat.completions", BaseURL: "http://localhost:11434/v1", NeedsModel: true},
	{Name: "ollama-native", API: "/api/chat", BaseURL: DefaultOllamaBaseURL, NeedsModel: true},
	{Name: "vllm", API: "chat.completions", BaseURL: "http://localhost:8000/v1", NeedsModel: true},
}

// keyVars are the variables a service's key is read from, in order: AIRLOCK_OPENAI_API_KEY
// (then OPENAI_API_KEY) for OpenAI's own APIs and the local OpenAI-compatible servers;
// AIRLOCK_<NAME>_API_KEY then the provider's own variable for every other service.
func (s Service) keyVars() []string {
	switch s.Name {
	case "openai", "openai-responses":
		return []string{"AIRLOCK_OPENAI_API_KEY", "OPENAI_API_KEY"}
	case "ollama", "ollama-native", "vllm":
		return []string{"AIRLOCK_OPENAI_API_KEY"}
	case "azure":
		return []string{"AIRLOCK_AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_KEY"}
	}
	own := "AIRLOCK_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_")) + "_API_KEY"
	if s.KeyEnv == "" {
		return []string{own}
	}
	return []string{own, s.KeyEnv}
}

// Hosted reports a service on the provider's servers (a key is expected), not a local one.
func (s Service) Hosted() bool {
	switch s.Name {
	case "ollama", "ollama-native", "vllm":
		return false
	}
	return true
}

// ServiceNamed returns the service called name.
func ServiceNamed(name string) (Service, bool) {
	for _, s := range Services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// ServiceNames lists the names AIRLOCK_PROVIDER accepts, for errors and --help.
func ServiceNames() string {
	names := make([]string, len(Services))
	for i, s := range Services {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// DefaultAzureAPIVersion is the Azure OpenAI api-version sent with deployment URLs when
// AIRLOCK_AZURE_OPENAI_API_VERSION is unset (the GA data-plane version).
const DefaultAzureAPIVersion = "2024-10-21"

// ServiceConfigFromEnv is the OpenAIConfig of an OpenAI-API service (every Service but
// anthropic): OpenAIConfigFromEnv, with the service's endpoint when AIRLOCK_OPENAI_BASE_URL is
// unset, the key from the service's own variables only (keyVars: never another provider's), and
// for azure the deployment URL built from AIRLOCK_AZURE_OPENAI_ENDPOINT
// (https://<resource>.openai.azure.com; http only to a loopback host),
// AIRLOCK_AZURE_OPENAI_DEPLOYMENT and
// AIRLOCK_AZURE_OPENAI_API_VERSION (default DefaultAzureAPIVersion; "v1" uses Azure's v1 API
// at <endpoint>/openai/v1 with the deployment as the model), the key
// (AIRLOCK_AZURE_OPENAI_API_KEY, else AZURE_OPENAI_API_KEY) in the api-key header.
//
// Errors: a service with no default model and no AIRLOCK_OPENAI_MODEL; azure without an
// endpoint or a deployment; a malformed endpoint.
func ServiceConfigFromEnv(s Service) (OpenAIConfig, error) {
	model := os.Getenv("AIRLOCK_OPENAI_MODEL")
	cfg := OpenAIConfigFromEnv()
	cfg.Service = s.Name
	if cfg.BaseURL == "" {
		cfg.BaseURL = s.BaseURL
	}
	// Never another provider's key: each service reads only its own variables, so a key
	// set for OpenAI never goes to Groq when AIRLOCK_PROVIDER changes.
	cfg.APIKey, cfg.KeySource = "", ""
	for _, v := range s.keyVars() {
		if k := os.Getenv(v); k != "" {
			cfg.APIKey, cfg.KeySource = k, v
			break
		}
	}
	if s.Name == "azure" {
		return azureConfig(cfg, model)
	}
	if s.NeedsModel && model == "" {
		return OpenAIConfig{}, fmt.Errorf("AIRLOCK_PROVIDER=%s: set AIRLOCK_OPENAI_MODEL to the model to serve (the service has no default)", s.Name)
	}
	return cfg, nil
}

func azureConfig(cfg OpenAIConfig, model string) (OpenAIConfig, error) {
	endpoint := strings.TrimRight(os.Getenv("AIRLOCK_AZURE_OPENAI_ENDPOINT"), "/")
	deployment := os.Getenv("AIRLOCK_AZURE_OPENAI_DEPLOYMENT")
	if endpoint == "" || deployment == "" {
		return OpenAIConfig{}, errors.New("AIRLOCK_PROVIDER=azure: set AIRLOCK_AZURE_OPENAI_ENDPOINT (https://<resource>.openai.azure.com) and AIRLOCK_AZURE_OPENAI_DEPLOYMENT")
	}
	u, err := checkBaseURL("azure", endpoint)
	if err != nil {
		return OpenAIConfig{}, fmt.Errorf("AIRLOCK_AZURE_OPENAI_ENDPOINT: %w", err)
	}
	if u.Scheme != "https" && !isLoopback(u.Hostname()) {
		return OpenAIConfig{}, fmt.Errorf("AIRLOCK_AZURE_OPENAI_ENDPOINT %s: the api-key would cross the network in clear text; use https", redact.URL(endpoint))
	}
	cfg.APIKeyHeader = "api-key"
	version := os.Getenv("AIRLOCK_AZURE_OPENAI_API_VERSION")
	if version == "" {
		version = DefaultAzureAPIVersion
	}
	if version == "v1" {
		cfg.BaseURL = endpoint + "/openai/v1"
		cfg.Model = deployment
		return cfg, nil
	}
	cfg.BaseURL = endpoint + "/openai/deployments/" + url.PathEscape(deployment)
	cfg.APIVersion = version
	if model == "" {
		cfg.Model = deployment // sent in the body, which Azure ignores: the URL names the deployment
	}
	return cfg, nil
}

// isLoopback reports a loopback host name or address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
