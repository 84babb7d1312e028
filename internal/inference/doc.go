// Package inference is the seam between a turn and a language model. A Provider takes the turn's
// bounded context plus the catalog generated from the registry and returns the provider's raw
// response body, unparsed and unrepaired: strict parsing is the job of package parse (RFC-0004,
// "strict, non-corrective parsing"). Adapters: OpenAI-compatible (openai-go SDK; OpenAI, vLLM,
// Ollama, llama.cpp) and replay of recorded real sessions (AgentDojo traces).
package inference
