package config

// Setting is one configuration value Airlock reads: its key in the configuration file
// (snake_case), the environment variable that overrides the file, its default as operators
// read it, and whether it is a secret (never printed; in a file only if the file is readable
// by its owner alone). Settings is the single source of `airlock config show`, the file's
// accepted keys and docs/configuration.md (generated: `airlock config doc`).
type Setting struct {
	Key     string `json:"key"`
	Env     string `json:"env"`
	Default string `json:"default,omitempty"`
	Secret  bool   `json:"secret,omitempty"`
	// List marks a comma list (the file may give a YAML list).
	List  bool   `json:"list,omitempty"`
	Group string `json:"group"`
	Doc   string `json:"doc"`
}

// Settings are every setting an operator may give, by group, in the order the reference
// lists them. Temporal's own client settings (address, namespace, API key, TLS, profiles) are
// the SDK's envconfig: listed here so one file can hold them too.
var Settings = []Setting{
	{Key: "home", Env: "AIRLOCK_HOME", Default: ".airlock", Group: "state", Doc: "local state directory: the SQLite store, keys, approvers and clients files by default"},
	{Key: "database_url", Env: "AIRLOCK_DATABASE_URL", Default: "SQLite file <home>/airlock.db", Secret: true, Group: "state", Doc: "the store: postgres://… (shared by workers, page, API) or sqlite:PATH"},
	{Key: "corpus", Env: "AIRLOCK_CORPUS", Default: "../shared/corpus/agentdojo beside the repository", Group: "state", Doc: "AgentDojo corpus folder (tools.json, runs/) for replays and the evaluation"},
	{Key: "receipts_origin", Env: "AIRLOCK_RECEIPTS_ORIGIN", Group: "state", Doc: "the receipts log's origin and key name in its signed checkpoints"},
	{Key: "receipts_publish", Env: "AIRLOCK_RECEIPTS_PUBLISH", List: true, Group: "state", Doc: "where signed checkpoints are published: file paths (appended) and http(s) URLs (POSTed)"},
	{Key: "receipts_every", Env: "AIRLOCK_RECEIPTS_EVERY", Default: "1m", Group: "state", Doc: "how often the receipts housekeeping (publish, retention) runs"},
	{Key: "retention_audit", Env: "AIRLOCK_RETENTION_AUDIT", Group: "state", Doc: "remove audit rows older than this once the receipts log holds their records (unset: kept)"},
	{Key: "retention_streams", Env: "AIRLOCK_RETENTION_STREAMS", Group: "state", Doc: "remove client-stream events older than this (unset: kept)"},

	{Key: "temporal_address", Env: "TEMPORAL_ADDRESS", Default: "localhost:7233", Group: "temporal", Doc: "Temporal frontend host:port"},
	{Key: "temporal_namespace", Env: "TEMPORAL_NAMESPACE", Default: "default", Group: "temporal", Doc: "Temporal namespace"},
	{Key: "temporal_api_key", Env: "TEMPORAL_API_KEY", Secret: true, Group: "temporal", Doc: "Temporal Cloud API key"},
	{Key: "temporal_profile", Env: "TEMPORAL_PROFILE", Group: "temporal", Doc: "profile of the Temporal CLI's configuration file (TLS and the rest)"},
	{Key: "temporal_config_file", Env: "TEMPORAL_CONFIG_FILE", Group: "temporal", Doc: "the Temporal CLI's configuration file"},
	{Key: "task_queue", Env: "AIRLOCK_TASK_QUEUE", Default: "airlock-turns", Group: "temporal", Doc: "task queue of turns and calls; separate queues isolate environments in one namespace"},
	{Key: "temporal_ui", Env: "AIRLOCK_TEMPORAL_UI", Default: "http://localhost:<temporal UI port>", Group: "temporal", Doc: "Temporal Web UI base URL in links (pages, CLI, notices)"},
	{Key: "temporal_ui_port", Env: "AIRLOCK_TEMPORAL_UI_PORT", Default: "gRPC port + 1000 (8233)", Group: "temporal", Doc: "the local dev server's UI port (airlock stack); -1 for none"},
	{Key: "temporal_http_port", Env: "AIRLOCK_TEMPORAL_HTTP_PORT", Default: "gRPC port + 10 (7243)", Group: "temporal", Doc: "the local dev server's HTTP API port (airlock stack)"},
	{Key: "temporal_metrics_port", Env: "AIRLOCK_TEMPORAL_METRICS_PORT", Default: "gRPC port + 11 (7244)", Group: "temporal", Doc: "the local dev server's metrics port (airlock stack)"},
	{Key: "deployment", Env: "AIRLOCK_DEPLOYMENT", Default: "the task queue", Group: "temporal", Doc: "Worker Versioning deployment name (airlock worker --help)"},
	{Key: "build_id", Env: "AIRLOCK_BUILD_ID", Default: "the binary's build id", Group: "temporal", Doc: "Worker Versioning build id of this worker"},
	{Key: "promote", Env: "AIRLOCK_PROMOTE", Default: "auto", Group: "temporal", Doc: "when a worker's build becomes current: auto, always, never"},
	{Key: "worker_versioning", Env: "AIRLOCK_WORKER_VERSIONING", Default: "on", Group: "temporal", Doc: "off: run unversioned (servers without Worker Versioning)"},
	{Key: "workflow_cache_size", Env: "AIRLOCK_WORKFLOW_CACHE_SIZE", Default: "the SDK's", Group: "temporal", Doc: "sticky workflow cache size of a worker"},
	{Key: "payload_keys_file", Env: "AIRLOCK_PAYLOAD_KEYS_FILE", Group: "temporal", Doc: "encrypt Temporal payloads with this AES-256-GCM key ring (airlock codec-key)"},
	{Key: "codec_token", Env: "AIRLOCK_CODEC_TOKEN", Secret: true, Group: "temporal", Doc: "bearer token of the codec server (airlock codec-server)"},
	{Key: "codec_cors_origins", Env: "AIRLOCK_CODEC_CORS_ORIGINS", List: true, Group: "temporal", Doc: "origins the codec server answers (the Temporal UI's)"},

	{Key: "registry", Env: "AIRLOCK_REGISTRY", Default: "embedded", Group: "registry", Doc: "replace the embedded base registry with this file (watched)"},
	{Key: "policy", Env: "AIRLOCK_POLICY", Default: "embedded", Group: "registry", Doc: "replace the embedded authorization policy of the base registry (watched)"},
	{Key: "guidance", Env: "AIRLOCK_GUIDANCE", Default: "embedded", Group: "registry", Doc: "capability guidance for catalog describe (watched)"},
	{Key: "cedar_policy", Env: "AIRLOCK_CEDAR_POLICY", Group: "registry", Doc: "Cedar policy deciding how granted calls run: permit runs, forbid refuses, no decision asks (watched)"},
	{Key: "cedar_shadow", Env: "AIRLOCK_CEDAR_SHADOW", Group: "registry", Doc: "candidate Cedar policy evaluated beside the live one: its verdicts audited, nothing decided"},
	{Key: "registry_layers", Env: "AIRLOCK_REGISTRY_LAYERS", List: true, Group: "registry", Doc: "registry layers on top: embedded names (agentdojo-banking) or layer files"},
	{Key: "mcp_servers", Env: "AIRLOCK_MCP_SERVERS", Group: "registry", Doc: "MCP servers bridged as capabilities (airlock mcp --help)"},
	{Key: "fetch_allow", Env: "AIRLOCK_FETCH_ALLOW", List: true, Group: "registry", Doc: "private addresses web.fetch and HTTP capabilities may reach: CIDRs and IP:port (Airlock's own listeners never)"},
	{Key: "secrets_dir", Env: "AIRLOCK_SECRETS_DIR", Default: "<home>/secrets", Group: "registry", Doc: "folder of header secrets HTTP capabilities send (or AIRLOCK_SECRET_<NAME>)"},
	{Key: "memory_root", Env: "AIRLOCK_MEMORY_ROOT", Group: "registry", Doc: "the folder agent memory proposals bind to"},

	{Key: "approvers", Env: "AIRLOCK_APPROVERS", Default: "<home>/approvers.json", Group: "people", Doc: "approvers file: who may decide, their groups, passwords and keys"},
	{Key: "approver_key_file", Env: "AIRLOCK_APPROVER_KEY_FILE", Default: "<home>/keys/approver.key", Group: "people", Doc: "key sealing confirmation tokens (or approver_key, 64 hex characters)"},
	{Key: "approver_key", Env: "AIRLOCK_APPROVER_KEY", Secret: true, Group: "people", Doc: "the approver key itself (prefer approver_key_file)"},
	{Key: "surface_key_file", Env: "AIRLOCK_SURFACE_KEY_FILE", Group: "people", Doc: "the approver page's surface key"},
	{Key: "credential", Env: "AIRLOCK_CREDENTIAL", Default: "<user config dir>/airlock/credential.json", Group: "people", Doc: "your approver credential for airlock approve/deny"},
	{Key: "clients", Env: "AIRLOCK_CLIENTS", Default: "<home>/clients.json", Group: "people", Doc: "clients file: who may start turns for which principals"},
	{Key: "client_credential", Env: "AIRLOCK_CLIENT_CREDENTIAL", Default: "<user config dir>/airlock/client.json", Group: "people", Doc: "the client credential this machine starts turns with"},
	{Key: "mcp_gateway_credential", Env: "AIRLOCK_MCP_GATEWAY_CREDENTIAL", Default: "<home>/credentials/client-mcp-gateway.json", Group: "people", Doc: "the gateway credential airlock mcp serve attests HTTP callers' calls with"},
	{Key: "oidc_issuer", Env: "AIRLOCK_OIDC_ISSUER", Group: "people", Doc: "OpenID Provider of approver sign-in (Okta, Entra ID, Google, Keycloak); unset: no provider sign-in"},
	{Key: "oidc_client_id", Env: "AIRLOCK_OIDC_CLIENT_ID", Group: "people", Doc: "the page's client id at the provider"},
	{Key: "oidc_client_secret", Env: "AIRLOCK_OIDC_CLIENT_SECRET", Secret: true, Group: "people", Doc: "its client secret (prefer oidc_client_secret_file)"},
	{Key: "oidc_client_secret_file", Env: "AIRLOCK_OIDC_CLIENT_SECRET_FILE", Group: "people", Doc: "file holding the client secret"},
	{Key: "oidc_redirect_url", Env: "AIRLOCK_OIDC_REDIRECT_URL", Group: "people", Doc: "the page's callback URL registered at the provider (…/oidc/callback)"},
	{Key: "oidc_scopes", Env: "AIRLOCK_OIDC_SCOPES", List: true, Group: "people", Doc: "scopes asked besides openid"},
	{Key: "oidc_subject_claim", Env: "AIRLOCK_OIDC_SUBJECT_CLAIM", Default: "sub", Group: "people", Doc: "claim naming the person (Entra ID: oid)"},
	{Key: "oidc_name_claim", Env: "AIRLOCK_OIDC_NAME_CLAIM", Group: "people", Doc: "claim giving the approver name"},
	{Key: "oidc_groups_claim", Env: "AIRLOCK_OIDC_GROUPS_CLAIM", Default: "groups", Group: "people", Doc: "claim listing the person's groups"},
	{Key: "oidc_group_map", Env: "AIRLOCK_OIDC_GROUP_MAP", List: true, Group: "people", Doc: "provider group to policy approver group, PROVIDER=GROUP (unmapped groups grant nothing)"},
	{Key: "oidc_label", Env: "AIRLOCK_OIDC_LABEL", Group: "people", Doc: "the sign-in button's label"},
	{Key: "oidc_recheck", Env: "AIRLOCK_OIDC_RECHECK", Group: "people", Doc: "how often the page asks the provider again about each signed-in person"},
	{Key: "notify_file", Env: "AIRLOCK_NOTIFY_FILE", Group: "people", Doc: "approver notices: webhook, Slack and e-mail channels and routes"},
	{Key: "notify_lease", Env: "AIRLOCK_NOTIFY_LEASE", Group: "people", Doc: "how long one notifier holds a notice before another may send it"},

	{Key: "web_addr", Env: "AIRLOCK_WEB_ADDR", Default: "127.0.0.1:8780", Group: "surfaces", Doc: "approver page listen address"},
	{Key: "web_hosts", Env: "AIRLOCK_WEB_HOSTS", List: true, Default: "loopback", Group: "surfaces", Doc: "host names the approver page answers"},
	{Key: "passkey_rp_id", Env: "AIRLOCK_PASSKEY_RP_ID", Default: "first web_hosts name, else localhost", Group: "surfaces", Doc: "passkey relying party id"},
	{Key: "passkey_origins", Env: "AIRLOCK_PASSKEY_ORIGINS", List: true, Default: "https://<rp id>", Group: "surfaces", Doc: "origins passkey assertions may come from"},
	{Key: "stream_addr", Env: "AIRLOCK_STREAM_ADDR", Default: "127.0.0.1:8091", Group: "surfaces", Doc: "airlock stream serve's listen address"},
	{Key: "stream_token", Env: "AIRLOCK_STREAM_TOKEN", Secret: true, Group: "surfaces", Doc: "bearer token of airlock stream serve (or stream_token_file)"},
	{Key: "stream_token_file", Env: "AIRLOCK_STREAM_TOKEN_FILE", Group: "surfaces", Doc: "file holding the stream bearer token"},
	{Key: "mcp_addr", Env: "AIRLOCK_MCP_ADDR", Default: "127.0.0.1:8790", Group: "surfaces", Doc: "airlock mcp serve's streamable HTTP listen address"},
	{Key: "mcp_audience", Env: "AIRLOCK_MCP_AUDIENCE", Group: "surfaces", Doc: "airlock mcp serve also accepts the identity provider's access tokens for this audience"},
	{Key: "mcp_resource", Env: "AIRLOCK_MCP_RESOURCE", Default: "http://<mcp_addr>/mcp", Group: "surfaces", Doc: "airlock mcp serve's public URL in its RFC 9728 metadata"},
	{Key: "mcp_principal_claim", Env: "AIRLOCK_MCP_PRINCIPAL_CLAIM", Default: "sub", Group: "surfaces", Doc: "the access token's claim that names the MCP caller (oidc:<value>)"},
	{Key: "api_addr", Env: "AIRLOCK_API_ADDR", Default: "127.0.0.1:8092", Group: "surfaces", Doc: "airlock api serve's listen address (never reachable by web.fetch)"},
	{Key: "api_keys", Env: "AIRLOCK_API_KEYS", Default: "<home>/api-keys.json", Group: "surfaces", Doc: "the application API's keys file (airlock api key)"},
	{Key: "api_audience", Env: "AIRLOCK_API_AUDIENCE", Group: "surfaces", Doc: "the API also accepts the identity provider's access tokens for this audience (requesters oidc:<claim>)"},
	{Key: "api_principal_claim", Env: "AIRLOCK_API_PRINCIPAL_CLAIM", Default: "sub", Group: "surfaces", Doc: "the access token's claim that names the requester"},
	{Key: "codec_addr", Env: "AIRLOCK_CODEC_ADDR", Default: "127.0.0.1:8781", Group: "surfaces", Doc: "the codec server's listen address (never reachable by web.fetch)"},
	{Key: "metrics_addr", Env: "AIRLOCK_METRICS_ADDR", Group: "surfaces", Doc: "serve /metrics and /healthz here (worker, web)"},
	{Key: "otel_exporter_otlp_endpoint", Env: "OTEL_EXPORTER_OTLP_ENDPOINT", Group: "surfaces", Doc: "export the worker's traces over OTLP to this endpoint"},
	{Key: "otel_exporter_otlp_protocol", Env: "OTEL_EXPORTER_OTLP_PROTOCOL", Default: "http/protobuf", Group: "surfaces", Doc: "OTLP protocol: http/protobuf or grpc"},
	{Key: "otel_exporter_otlp_headers", Env: "OTEL_EXPORTER_OTLP_HEADERS", Secret: true, Group: "surfaces", Doc: "OTLP headers (often an API key)"},
	{Key: "otel_service_name", Env: "OTEL_SERVICE_NAME", Group: "surfaces", Doc: "service name on exported traces"},
	{Key: "log_level", Env: "AIRLOCK_LOG_LEVEL", Default: "warn", Group: "surfaces", Doc: "SDK log level: debug, info, warn, error"},
	{Key: "log_format", Env: "AIRLOCK_LOG_FORMAT", Default: "text", Group: "surfaces", Doc: "json: structured logs"},

	{Key: "provider", Env: "AIRLOCK_PROVIDER", Default: "openai", Group: "model", Doc: "the live model's provider (docs/providers.md)"},
	{Key: "infer_mode", Env: "AIRLOCK_INFER_MODE", Group: "model", Doc: "how inference rounds run: regular (durable answer) or local (no server round trip per round)"},
	{Key: "stream", Env: "AIRLOCK_STREAM", Default: "1", Group: "model", Doc: "0: the Infer activity does not stream"},
	{Key: "openai_base_url", Env: "AIRLOCK_OPENAI_BASE_URL", Default: "the provider's", Group: "model", Doc: "an OpenAI-compatible endpoint"},
	{Key: "openai_model", Env: "AIRLOCK_OPENAI_MODEL", Group: "model", Doc: "the model name sent to it"},
	{Key: "openai_api_key", Env: "AIRLOCK_OPENAI_API_KEY", Secret: true, Group: "model", Doc: "its API key"},
	{Key: "groq_api_key", Env: "AIRLOCK_GROQ_API_KEY", Secret: true, Group: "model", Doc: "Groq's API key"},
	{Key: "azure_openai_endpoint", Env: "AIRLOCK_AZURE_OPENAI_ENDPOINT", Group: "model", Doc: "Azure OpenAI resource endpoint (https)"},
	{Key: "azure_openai_deployment", Env: "AIRLOCK_AZURE_OPENAI_DEPLOYMENT", Group: "model", Doc: "Azure OpenAI deployment"},
	{Key: "azure_openai_api_version", Env: "AIRLOCK_AZURE_OPENAI_API_VERSION", Group: "model", Doc: "Azure OpenAI API version"},
	{Key: "azure_openai_api_key", Env: "AIRLOCK_AZURE_OPENAI_API_KEY", Secret: true, Group: "model", Doc: "Azure OpenAI API key"},
	{Key: "anthropic_base_url", Env: "AIRLOCK_ANTHROPIC_BASE_URL", Default: "https://api.anthropic.com", Group: "model", Doc: "Anthropic endpoint"},
	{Key: "anthropic_model", Env: "AIRLOCK_ANTHROPIC_MODEL", Group: "model", Doc: "Anthropic model"},
	{Key: "anthropic_max_tokens", Env: "AIRLOCK_ANTHROPIC_MAX_TOKENS", Group: "model", Doc: "max_tokens of each Anthropic request"},
	{Key: "anthropic_api_key", Env: "AIRLOCK_ANTHROPIC_API_KEY", Secret: true, Group: "model", Doc: "Anthropic API key (or anthropic_api_key_file)"},
	{Key: "anthropic_api_key_file", Env: "AIRLOCK_ANTHROPIC_API_KEY_FILE", Group: "model", Doc: "file holding the Anthropic API key"},
	{Key: "demo_decision", Env: "AIRLOCK_DEMO_DECISION", Group: "model", Doc: "approve or deny: how airlock dev (make run) decides without a terminal"},
}

// SettingByKey finds the setting whose file key is key.
func SettingByKey(key string) (Setting, bool) {
	for _, s := range Settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}
