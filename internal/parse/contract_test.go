package parse

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The contract (contract.go) is held to the parser three ways: the keys of every rule map of
// the part model equal the contract's keys at that place (both directions); every block,
// item, content part, event and delta type the code switches on is listed, and nothing else
// is; and every row's disposition holds when its part is put into a response (ignored and
// judged values that say nothing are read, refused and judged values that carry something
// fail the message naming them, an unlisted key or type is refused). docs/providers.md is
// the rendering of the contract, byte for byte.

var update = flag.Bool("update", false, "rewrite docs/providers.md from Contract()")

const providersDoc = "../../docs/providers.md"

func TestContractDoc(t *testing.T) {
	want := ContractMarkdown(Contract())
	if *update {
		if err := os.WriteFile(providersDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(providersDoc)
	if err != nil {
		t.Fatalf("%v: write it with go test ./internal/parse -run TestContract -update", err)
	}
	if string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		n := 0
		for n < len(gl) && n < len(wl) && gl[n] == wl[n] {
			n++
		}
		g, w := "(end of file)", "(end of file)"
		if n < len(gl) {
			g = gl[n]
		}
		if n < len(wl) {
			w = wl[n]
		}
		t.Fatalf("docs/providers.md is not the rendering of Contract() (it is generated: run go test ./internal/parse -run TestContract -update)\nline %d is:\n  %s\nwant:\n  %s", n+1, g, w)
	}
}

type rowID struct {
	api    string
	stream bool
	place  string
	kind   PartKind
	key    string
}

func idOf(r ContractRow) rowID { return rowID{r.API, r.Stream, r.Place, r.Kind, r.Key} }

func TestContractRowsAreWellFormed(t *testing.T) {
	apis := map[string]bool{}
	for _, a := range ContractAPIs() {
		apis[a.Name] = true
		if a.Providers == "" || a.Body == "" || a.Stream == "" || a.Format == "" {
			t.Errorf("API %s is not fully described: %+v", a.Name, a)
		}
	}
	seen := map[rowID]bool{}
	for _, r := range Contract() {
		if !apis[r.API] {
			t.Errorf("%+v: API %q is not in ContractAPIs", r, r.API)
		}
		switch r.Disposition {
		case DispositionRead, DispositionIgnored, DispositionJudged, DispositionRefused:
		default:
			t.Errorf("%+v: disposition %q", r, r.Disposition)
		}
		switch r.Kind {
		case KindKey, KindType, KindData:
		case KindOther:
			if r.Key != "*" {
				t.Errorf("%+v: KindOther's key must be *", r)
			}
		default:
			t.Errorf("%+v: kind %q", r, r.Kind)
		}
		if r.Key == "" || strings.TrimSpace(r.Why) == "" {
			t.Errorf("%+v: a row names its part and says why", r)
		}
		if seen[idOf(r)] {
			t.Errorf("%+v is listed twice", r)
		}
		seen[idOf(r)] = true
	}
}

// contractKeys is the set of keys the contract lists at a place, of kind.
func contractKeys(api string, stream bool, place string, kind PartKind) []string {
	var out []string
	for _, r := range Contract() {
		if r.API == api && r.Stream == stream && r.Place == place && r.Kind == kind {
			out = append(out, r.Key)
		}
	}
	sort.Strings(out)
	return out
}

func sorted(keys []string) []string {
	out := slices.Clone(keys)
	sort.Strings(out)
	return slices.Compact(out)
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return sorted(out)
}

// sameSet reports the keys only in got and only in want, as a failure message ("" when equal).
func sameSet(what string, code, contract []string) string {
	code, contract = sorted(code), sorted(contract)
	var onlyCode, onlyContract []string
	for _, k := range code {
		if !slices.Contains(contract, k) {
			onlyCode = append(onlyCode, k)
		}
	}
	for _, k := range contract {
		if !slices.Contains(code, k) {
			onlyContract = append(onlyContract, k)
		}
	}
	if len(onlyCode)+len(onlyContract) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: the code has %q that the contract does not list; the contract lists %q that the code does not have", what, onlyCode, onlyContract)
}

// ruleMapPlaces are the rule maps of the part model and the place of the contract each one
// judges (a package-level map[string]keyRule missing here fails TestContractCoversEveryRuleMap).
var ruleMapPlaces = []struct {
	name  string
	rules map[string]keyRule
	api   string
	place string
}{
	{"openAITop", openAITop, APIOpenAIChat, ""},
	{"openAIChoice", openAIChoice, APIOpenAIChat, "choices[0]"},
	{"openAIMessageRules", openAIMessageRules, APIOpenAIChat, "choices[0].message"},
	{"openAIToolCall", openAIToolCall, APIOpenAIChat, "choices[0].message.tool_calls[]"},
	{"openAIFunction", openAIFunction, APIOpenAIChat, "choices[0].message.tool_calls[].function"},
	{"openAITextPart", openAITextPart, APIOpenAIChat, "choices[0].message.content[type=text]"},
	{"ollamaTop", ollamaTop, APIOllama, ""},
	{"ollamaMessageRules", ollamaMessageRules, APIOllama, "message"},
	{"ollamaToolCall", ollamaToolCall, APIOllama, "message.tool_calls[]"},
	{"ollamaFunction", ollamaFunction, APIOllama, "message.tool_calls[].function"},
	{"anthropicTop", anthropicTop, APIAnthropic, ""},
	{"anthropicText", anthropicText, APIAnthropic, "content[type=text]"},
	{"anthropicToolUse", anthropicToolUse, APIAnthropic, "content[type=tool_use]"},
	{"anthropicThinking", anthropicThinking, APIAnthropic, "content[type=thinking]"},
	{"anthropicRedactedThinking", anthropicRedactedThinking, APIAnthropic, "content[type=redacted_thinking]"},
	{"responsesTop", responsesTop, APIResponses, ""},
	{"responsesMessage", responsesMessage, APIResponses, "output[type=message]"},
	{"responsesFunction", responsesFunction, APIResponses, "output[type=function_call]"},
	{"responsesReason", responsesReason, APIResponses, "output[type=reasoning]"},
	{"responsesText", responsesText, APIResponses, "output[type=message].content[type=output_text]"},
}

// inlineRuleMaps are the rule maps written inside a function, in source order, and their
// places (all OpenAI chat completions bodies).
var inlineRuleMaps = map[string][]string{
	"logprobsRule":    {"choices[0].logprobs"},
	"geminiExtraRule": {"choices[0].message.extra_content", "choices[0].message.extra_content.google"},
}

// judgedByCode are the body places whose keys a rule judges without a rule map (checked by
// TestContractDispositionsHold).
var judgedByCode = []rowPlace{
	{APIOpenAIChat, false, "choices[0].content_filter_results.*"}, // contentFilterRule
	{APIOpenAIChat, false, "moderation.*.results[]"},              // moderationRule
}

type rowPlace struct {
	api    string
	stream bool
	place  string
}

// source is the package's non-test Go files, parsed.
func source(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = f
	}
	return fset, files
}

func isRuleMap(e ast.Expr) bool { return types.ExprString(e) == "map[string]keyRule" }

func literalKeys(lit *ast.CompositeLit) []string {
	var keys []string
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if s, ok := stringLit(kv.Key); ok {
				keys = append(keys, s)
			}
		}
	}
	return keys
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// TestContractCoversEveryRuleMap: each rule map of the part model (package level or written
// inside a rule) has exactly the keys the contract lists at its place, and each place of
// the contract with keys in a body is judged by a rule map or by a rule the dispositions
// test tries.
func TestContractCoversEveryRuleMap(t *testing.T) {
	_, files := source(t)
	declared := map[string]bool{}
	inline := map[string][][]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					vs, ok := s.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, n := range vs.Names {
						if vs.Type != nil && isRuleMap(vs.Type) {
							declared[n.Name] = true
						}
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.CompositeLit); ok && lit.Type != nil && isRuleMap(lit.Type) {
								declared[n.Name] = true
							}
						}
					}
				}
			case *ast.FuncDecl:
				ast.Inspect(d, func(n ast.Node) bool {
					if lit, ok := n.(*ast.CompositeLit); ok && lit.Type != nil && isRuleMap(lit.Type) {
						inline[d.Name.Name] = append(inline[d.Name.Name], literalKeys(lit))
					}
					return true
				})
			}
		}
	}
	covered := map[rowPlace]bool{}
	listed := map[string]bool{}
	for _, m := range ruleMapPlaces {
		listed[m.name] = true
		covered[rowPlace{m.api, false, m.place}] = true
		if !declared[m.name] {
			t.Errorf("rule map %s is no longer declared: update ruleMapPlaces", m.name)
		}
		if msg := sameSet(fmt.Sprintf("%s (%s %q)", m.name, m.api, m.place), mapKeys(m.rules), contractKeys(m.api, false, m.place, KindKey)); msg != "" {
			t.Error(msg)
		}
	}
	for name := range declared {
		if !listed[name] {
			t.Errorf("rule map %s is not in the contract: list its keys in Contract() and its place in ruleMapPlaces", name)
		}
	}
	for fn, maps := range inline {
		places, ok := inlineRuleMaps[fn]
		if !ok || len(places) != len(maps) {
			t.Errorf("%s has %d rule maps, inlineRuleMaps lists %d places: list their keys in Contract()", fn, len(maps), len(places))
			continue
		}
		for i, keys := range maps {
			covered[rowPlace{APIOpenAIChat, false, places[i]}] = true
			if msg := sameSet(fmt.Sprintf("%s's rule map %d (%q)", fn, i, places[i]), keys, contractKeys(APIOpenAIChat, false, places[i], KindKey)); msg != "" {
				t.Error(msg)
			}
		}
	}
	for fn := range inlineRuleMaps {
		if _, ok := inline[fn]; !ok {
			t.Errorf("%s has no rule map any more: update inlineRuleMaps", fn)
		}
	}
	for _, p := range judgedByCode {
		covered[p] = true
	}
	for _, r := range Contract() {
		if !r.Stream && r.Kind == KindKey && !covered[rowPlace{r.API, false, r.Place}] {
			t.Errorf("%s %q: the contract lists keys at a body place no rule map judges", r.API, r.Place)
		}
	}
}

// caseLiterals returns the string literals the switches of function fn (a name, or
// "(*recv).Name" for a method) compare tag with: the cases of `switch tag {…}`, and the
// `tag == "…"` comparisons in the cases of a switch without a tag.
func caseLiterals(t *testing.T, files map[string]*ast.File, fn, tag string) []string {
	t.Helper()
	var decl *ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				name = "(" + types.ExprString(fd.Recv.List[0].Type) + ")." + name
			}
			if name == fn {
				decl = fd
			}
		}
	}
	if decl == nil {
		t.Fatalf("function %s not found: update the contract test", fn)
	}
	var out []string
	ast.Inspect(decl.Body, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok {
			return true
		}
		for _, s := range sw.Body.List {
			cc := s.(*ast.CaseClause)
			for _, e := range cc.List {
				if sw.Tag != nil {
					if types.ExprString(sw.Tag) == tag {
						if s, ok := stringLit(e); ok {
							out = append(out, s)
						}
					}
					continue
				}
				ast.Inspect(e, func(n ast.Node) bool {
					if be, ok := n.(*ast.BinaryExpr); ok && be.Op == token.EQL && types.ExprString(be.X) == tag {
						if s, ok := stringLit(be.Y); ok {
							out = append(out, s)
						}
					}
					return true
				})
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatalf("%s has no switch on %s: update the contract test", fn, tag)
	}
	return sorted(out)
}

// allStrings returns every string literal in function fn's body.
func allStrings(t *testing.T, files map[string]*ast.File, fn string) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == fn {
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if s, ok := stringLit(asExpr(n)); ok {
						out = append(out, s)
					}
					return true
				})
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no string: update the contract test", fn)
	}
	return out
}

func asExpr(n ast.Node) ast.Expr {
	e, _ := n.(ast.Expr)
	return e
}

// typesWith is the types the contract lists at a place whose disposition keep accepts.
func typesWith(api string, stream bool, place string, keep func(Disposition) bool) []string {
	var out []string
	for _, r := range Contract() {
		if r.API == api && r.Stream == stream && r.Place == place && r.Kind == KindType && keep(r.Disposition) {
			out = append(out, r.Key)
		}
	}
	return sorted(out)
}

func anyDisposition(Disposition) bool { return true }

// TestContractListsEveryTypeTheCodeHandles: the block, item, content part, event and delta
// types, and the stream keys, the code switches on are exactly those the contract lists.
func TestContractListsEveryTypeTheCodeHandles(t *testing.T) {
	_, files := source(t)
	var prefixes []string
	for _, p := range allStrings(t, files, "responsesToolEvent") {
		prefixes = append(prefixes, p+"*")
	}
	checks := []struct {
		what     string
		code     []string
		contract []string
	}{
		{"Anthropic content blocks (anthropicBlock, anthropicServerBlocks)",
			append(caseLiterals(t, files, "anthropicBlock", "typ"), mapKeys(anthropicServerBlocks)...),
			typesWith(APIAnthropic, false, "content[]", anyDisposition)},
		{"Anthropic stream events ((*anthropicAssembler).Add)",
			caseLiterals(t, files, "(*anthropicAssembler).Add", "typ"),
			typesWith(APIAnthropic, true, "event", anyDisposition)},
		{"Anthropic delta types ((*anthropicAssembler).block)",
			caseLiterals(t, files, "(*anthropicAssembler).block", "dt"),
			typesWith(APIAnthropic, true, "content_block_delta.delta", anyDisposition)},
		{"Responses output items read (responsesItem; every other type is refused)",
			caseLiterals(t, files, "responsesItem", "typ"),
			typesWith(APIResponses, false, "output[]", func(d Disposition) bool { return d != DispositionRefused })},
		{"Responses message content parts (responsesItem)",
			caseLiterals(t, files, "responsesItem", "t"),
			typesWith(APIResponses, false, "output[type=message].content[]", anyDisposition)},
		{"Responses stream events ((*responsesAssembler).Add, responsesIgnorable, responsesToolEvent)",
			append(append(caseLiterals(t, files, "(*responsesAssembler).Add", "typ"), mapKeys(responsesIgnorable)...), prefixes...),
			typesWith(APIResponses, true, "event", anyDisposition)},
		{"OpenAI content parts (messageParts)",
			caseLiterals(t, files, "messageParts", "s"),
			typesWith(APIOpenAIChat, false, "choices[0].message.content[]", anyDisposition)},
		{"OpenAI chunk keys ((*openAIAssembler).Add)",
			caseLiterals(t, files, "(*openAIAssembler).Add", "f.key"),
			contractKeys(APIOpenAIChat, true, "chunk", KindKey)},
		{"OpenAI chunk choice keys ((*openAIAssembler).addChoice)",
			caseLiterals(t, files, "(*openAIAssembler).addChoice", "f.key"),
			contractKeys(APIOpenAIChat, true, "chunk.choices[]", KindKey)},
		{"OpenAI delta keys ((*openAIAssembler).addDelta, openAIStreamStrings)",
			append(caseLiterals(t, files, "(*openAIAssembler).addDelta", "f.key"), mapKeys(openAIStreamStrings)...),
			contractKeys(APIOpenAIChat, true, "chunk.choices[].delta", KindKey)},
		{"OpenAI tool call delta keys ((*openAIAssembler).addCalls)",
			caseLiterals(t, files, "(*openAIAssembler).addCalls", "f.key"),
			contractKeys(APIOpenAIChat, true, "chunk.choices[].delta.tool_calls[]", KindKey)},
		{"OpenAI function delta keys ((*openAIAssembler).addFunction)",
			caseLiterals(t, files, "(*openAIAssembler).addFunction", "f.key"),
			contractKeys(APIOpenAIChat, true, "chunk.choices[].delta.tool_calls[].function", KindKey)},
		{"Ollama line keys ((*ollamaAssembler).Add)",
			caseLiterals(t, files, "(*ollamaAssembler).Add", "f.key"),
			contractKeys(APIOllama, true, "line", KindKey)},
		{"Ollama line message keys ((*ollamaAssembler).Add)",
			caseLiterals(t, files, "(*ollamaAssembler).Add", "mf.key"),
			contractKeys(APIOllama, true, "line.message", KindKey)},
	}
	for _, c := range checks {
		if msg := sameSet(c.what, c.code, c.contract); msg != "" {
			t.Error(msg)
		}
	}
	// Every stream place with keys or types, and every body place with types, is one of the
	// places checked above (or is tried by TestContractDispositionsHold).
	checked := map[rowPlace]bool{
		{APIAnthropic, false, "content[]"}: true, {APIAnthropic, true, "event"}: true, {APIAnthropic, true, "content_block_delta.delta"}: true,
		{APIResponses, false, "output[]"}: true, {APIResponses, false, "output[type=message].content[]"}: true, {APIResponses, true, "event"}: true,
		{APIOpenAIChat, false, "choices[0].message.content[]"}: true, {APIOpenAIChat, true, "chunk"}: true, {APIOpenAIChat, true, "chunk.choices[]"}: true,
		{APIOpenAIChat, true, "chunk.choices[].delta"}: true, {APIOpenAIChat, true, "chunk.choices[].delta.tool_calls[]"}: true,
		{APIOpenAIChat, true, "chunk.choices[].delta.tool_calls[].function"}: true,
		{APIOllama, true, "line"}: true, {APIOllama, true, "line.message"}: true,
		{APIOpenAIChat, false, "choices[0].message.annotations[]"}: true, // annotationsRule: tried by the dispositions test
		{APIOpenAIChat, true, "data"}:                              true, // [DONE]: AssembleStream
	}
	for _, r := range Contract() {
		if (r.Stream || r.Kind == KindType) && r.Kind != KindOther && !checked[rowPlace{r.API, r.Stream, r.Place}] {
			t.Errorf("%s %q (stream %v): no check holds this place to the code", r.API, r.Place, r.Stream)
		}
	}
}

// probeTemplate is a response of one API that reads normally, with "%s" where a part is put:
// a member ("key": value) at a key place, an element ({"type": …}) at a type place, a whole
// event at a stream's event place. A stream is its events (SSE data, or NDJSON lines).
type probeTemplate struct {
	body   string
	events []string
}

const (
	oaMsg   = `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	oaChunk = `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`
	oaStop  = `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	anStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`
	anMsg   = `{"type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`
	reItem  = `{"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi"}]}`
	reResp  = `{"object":"response","status":"completed","output":[` + reItem + `]}`
)

// last puts "%s" as the last member of the object s.
func last(s string) string { return s[:len(s)-1] + ",%s}" }

func at(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("template: " + old + " not in " + s)
	}
	return strings.Replace(s, old, new, 1)
}

var probeTemplates = map[rowPlace]probeTemplate{
	{APIOpenAIChat, false, ""}:                                         {body: last(oaMsg)},
	{APIOpenAIChat, false, "choices[0]"}:                               {body: at(oaMsg, `"stop"}`, `"stop",%s}`)},
	{APIOpenAIChat, false, "choices[0].logprobs"}:                      {body: at(oaMsg, `"stop"}`, `"stop","logprobs":{%s}}`)},
	{APIOpenAIChat, false, "choices[0].content_filter_results.*"}:      {body: at(oaMsg, `"stop"}`, `"stop","content_filter_results":{"hate":{%s}}}`)},
	{APIOpenAIChat, false, "choices[0].message"}:                       {body: at(oaMsg, `"hi"}`, `"hi",%s}`)},
	{APIOpenAIChat, false, "choices[0].message.extra_content"}:         {body: at(oaMsg, `"hi"}`, `"hi","extra_content":{%s}}`)},
	{APIOpenAIChat, false, "choices[0].message.extra_content.google"}:  {body: at(oaMsg, `"hi"}`, `"hi","extra_content":{"google":{%s}}}`)},
	{APIOpenAIChat, false, "choices[0].message.content[]"}:             {body: at(oaMsg, `"content":"hi"`, `"content":[{"type":"text","text":"hi"},%s]`)},
	{APIOpenAIChat, false, "choices[0].message.content[type=text]"}:    {body: at(oaMsg, `"content":"hi"`, `"content":[{"type":"text","text":"hi",%s}]`)},
	{APIOpenAIChat, false, "choices[0].message.annotations[]"}:         {body: at(oaMsg, `"hi"}`, `"hi","annotations":[%s]}`)},
	{APIOpenAIChat, false, "choices[0].message.tool_calls[]"}:          {body: at(at(oaMsg, `"hi"}`, `"hi","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},%s}]}`), `"stop"`, `"tool_calls"`)},
	{APIOpenAIChat, false, "choices[0].message.tool_calls[].function"}: {body: at(at(oaMsg, `"hi"}`, `"hi","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}",%s}}]}`), `"stop"`, `"tool_calls"`)},
	{APIOpenAIChat, false, "moderation.*.results[]"}:                   {body: at(last(oaMsg), "%s", `"moderation":{"input":{"results":[{"flagged":false}]},"output":{"results":[{%s}]}}`)},
	{APIOpenAIChat, true, "chunk"}:                                     {events: []string{last(oaChunk), oaStop, "[DONE]"}},
	{APIOpenAIChat, true, "chunk.choices[]"}:                           {events: []string{at(oaChunk, `null}`, `null,%s}`), oaStop}},
	{APIOpenAIChat, true, "chunk.choices[].delta"}: {events: []string{
		at(oaChunk, `"role":"assistant","content":"hi"`, `"role":"assistant","reasoning":"think",%s`), oaChunk, oaStop}},
	{APIOpenAIChat, true, "chunk.choices[].delta.tool_calls[]"}: {events: []string{
		at(oaChunk, `"content":"hi"`, `"content":null,"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":""},%s}]`),
		at(oaChunk, `"role":"assistant","content":"hi"`, `"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]`),
		at(oaStop, `"stop"`, `"tool_calls"`)}},
	{APIOpenAIChat, true, "chunk.choices[].delta.tool_calls[].function"}: {events: []string{
		at(oaChunk, `"content":"hi"`, `"content":null,"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}",%s}}]`),
		at(oaStop, `"stop"`, `"tool_calls"`)}},

	{APIOllama, false, ""}:        {body: `{"message":{"role":"assistant","content":"hi"},"done":true,"done_reason":"stop",%s}`},
	{APIOllama, false, "message"}: {body: `{"model":"m","message":{"role":"assistant","content":"hi",%s},"done":true,"done_reason":"stop"}`},
	{APIOllama, false, "message.tool_calls[]"}: {
		body: `{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{}},%s}]},"done":true,"done_reason":"stop"}`},
	{APIOllama, false, "message.tool_calls[].function"}: {
		body: `{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{},%s}}]},"done":true,"done_reason":"stop"}`},
	{APIOllama, true, "line"}: {events: []string{`{"model":"m","message":{"role":"assistant","content":"hi"},"done":false,%s}`,
		`{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}`}},
	{APIOllama, true, "line.message"}: {events: []string{`{"model":"m","message":{"role":"assistant","content":"hi",%s},"done":false}`,
		`{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}`}},

	{APIAnthropic, false, ""}:                                {body: last(anMsg)},
	{APIAnthropic, false, "content[]"}:                       {body: at(anMsg, `"hi"}]`, `"hi"},%s]`)},
	{APIAnthropic, false, "content[type=text]"}:              {body: at(anMsg, `"hi"}]`, `"hi",%s}]`)},
	{APIAnthropic, false, "content[type=tool_use]"}:          {body: at(at(anMsg, `"hi"}]`, `"hi"},{"type":"tool_use","id":"toolu_1","name":"f","input":{},%s}]`), `"end_turn"`, `"tool_use"`)},
	{APIAnthropic, false, "content[type=thinking]"}:          {body: at(anMsg, `[{"type":"text"`, `[{"type":"thinking",%s},{"type":"text"`)},
	{APIAnthropic, false, "content[type=redacted_thinking]"}: {body: at(anMsg, `[{"type":"text"`, `[{"type":"redacted_thinking",%s},{"type":"text"`)},
	{APIAnthropic, true, "event"}: {events: []string{anStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, "%s",
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`,
		`{"type":"message_stop"}`}},
	{APIAnthropic, true, "content_block_delta.delta"}: {events: []string{anStart,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":%s}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`,
		`{"type":"message_stop"}`}},

	{APIResponses, false, ""}:                     {body: last(reResp)},
	{APIResponses, false, "output[]"}:             {body: at(reResp, `"output":[`, `"output":[%s,`)},
	{APIResponses, false, "output[type=message]"}: {body: at(reResp, `"role":"assistant",`, `"role":"assistant",%s,`)},
	{APIResponses, false, "output[type=message].content[]"}: {
		body: at(reResp, `"text":"hi"}`, `"text":"hi"},%s`)},
	{APIResponses, false, "output[type=message].content[type=output_text]"}: {
		body: at(reResp, `"text":"hi"}`, `"text":"hi",%s}`)},
	{APIResponses, false, "output[type=function_call]"}: {
		body: at(reResp, `"output":[`, `"output":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}","status":"completed",%s},`)},
	{APIResponses, false, "output[type=reasoning]"}: {body: at(reResp, `"output":[`, `"output":[{"type":"reasoning",%s},`)},
	{APIResponses, true, "event"}: {events: []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"in_progress","content":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":2,"output_index":0,"content_index":0,"item_id":"msg_1","delta":"hi"}`,
		"%s",
		`{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":` + reItem + `}`,
		`{"type":"response.completed","sequence_number":5,"response":` + reResp + `}`}},
}

// probeSample is what a row's part is tried with: nothing, a value (a member, for "*") that
// says nothing, to be read; something, one that carries something, to be refused. Ignored
// keys default to a rich value (any value is ignored); a type defaults to {"type": key}.
type probeSample struct{ nothing, something string }

var probeSamples = map[rowID]probeSample{
	{APIOpenAIChat, false, "", KindKey, "moderation"}:                                               {`{"input":{"results":[{"flagged":false}]}}`, `{"output":{"results":[{"flagged":true}]}}`},
	{APIOpenAIChat, false, "", KindKey, "error"}:                                                    {`null`, `{"message":"boom","type":"server_error"}`},
	{APIOpenAIChat, false, "", KindKey, StreamFaultKey}:                                             {"", `"a fault"`},
	{APIOpenAIChat, false, "choices[0]", KindKey, "logprobs"}:                                       {`{"content":[{"token":"hi","logprob":-0.1}],"refusal":null}`, `{"content":null,"refusal":[{"token":"no","logprob":-0.1}]}`},
	{APIOpenAIChat, false, "choices[0]", KindKey, "content_filter_results"}:                         {`{"hate":{"filtered":false,"severity":"safe"}}`, `{"violence":{"filtered":true,"severity":"high"}}`},
	{APIOpenAIChat, false, "choices[0]", KindKey, "error"}:                                          {`null`, `{"code":502,"message":"upstream"}`},
	{APIOpenAIChat, false, "choices[0].logprobs", KindKey, "refusal"}:                               {`[]`, `[{"token":"no","logprob":-0.1}]`},
	{APIOpenAIChat, false, "choices[0].content_filter_results.*", KindKey, "filtered"}:              {`false`, `true`},
	{APIOpenAIChat, false, "choices[0].content_filter_results.*", KindOther, "*"}:                   {`"severity":"safe","detected":false`, ""},
	{APIOpenAIChat, false, "choices[0].message", KindKey, "refusal"}:                                {`""`, `"I can't help with that."`},
	{APIOpenAIChat, false, "choices[0].message", KindKey, "annotations"}:                            {`[{"type":"url_citation","url_citation":{"url":"https://example.org/"}}]`, `[{"type":"file_citation","file_id":"f"}]`},
	{APIOpenAIChat, false, "choices[0].message", KindKey, "audio"}:                                  {`null`, `{"id":"audio_1","data":"AAAA","transcript":"hi"}`},
	{APIOpenAIChat, false, "choices[0].message", KindKey, "extra_content"}:                          {`{"google":{"thought_signature":"sig"}}`, `{"google":{"thought_signature":"sig"},"other":1}`},
	{APIOpenAIChat, false, "choices[0].message", KindKey, "thought_signature"}:                      {`"sig"`, `{"a":1}`},
	{APIOpenAIChat, false, "choices[0].message.extra_content", KindKey, "google"}:                   {`{"thought_signature":"sig","thought":true}`, `{"zz_probe":1}`},
	{APIOpenAIChat, false, "choices[0].message.extra_content.google", KindKey, "thought_signature"}: {`"sig"`, `7`},
	{APIOpenAIChat, false, "choices[0].message.extra_content.google", KindKey, "thought"}:           {`false`, `"yes"`},
	{APIOpenAIChat, false, "choices[0].message.content[]", KindType, "refusal"}:                     {"", `{"type":"refusal","refusal":"I can't."}`},
	{APIOpenAIChat, false, "choices[0].message.content[type=text]", KindKey, "annotations"}:         {`[]`, `[{"type":"file_citation"}]`},
	{APIOpenAIChat, false, "choices[0].message.annotations[]", KindType, "url_citation"}:            {`{"type":"url_citation","url_citation":{"url":"https://example.org/","title":"t"}}`, ""},
	{APIOpenAIChat, false, "choices[0].message.tool_calls[]", KindKey, "extra_content"}:             {`{"google":{"thought_signature":"sig"}}`, `{"google":{"thought_signature":7}}`},
	{APIOpenAIChat, false, "moderation.*.results[]", KindKey, "flagged"}:                            {`false`, `true`},
	{APIOpenAIChat, false, "moderation.*.results[]", KindOther, "*"}:                                {`"type":"moderation_result","flagged":false,"categories":{"hate":false},"category_scores":{"hate":0.01}`, ""},
	{APIOpenAIChat, true, "chunk", KindKey, "error"}:                                                {`null`, `{"message":"boom"}`},
	{APIOpenAIChat, true, "chunk", KindOther, "*"}:                                                  {`"system_fingerprint":"fp_1","usage":null`, `"zz_probe":1`},
	{APIOpenAIChat, true, "chunk.choices[]", KindOther, "*"}:                                        {`"content_filter_results":{}`, `"zz_probe":1`},
	{APIOpenAIChat, true, "chunk.choices[].delta", KindKey, "channel"}:                              {`"analysis"`, `"commentary"`},
	{APIOpenAIChat, true, "chunk.choices[].delta", KindOther, "*"}:                                  {`"annotations":null`, `"zz_probe":1`},
	{APIOpenAIChat, true, "chunk.choices[].delta.tool_calls[]", KindOther, "*"}:                     {`"extra_content":null`, `"zz_probe":1`},
	{APIOpenAIChat, true, "chunk.choices[].delta.tool_calls[].function", KindOther, "*"}:            {"", `"zz_probe":1`},

	{APIOllama, false, "", KindKey, "error"}:          {`null`, `"upstream error"`},
	{APIOllama, false, "", KindKey, StreamFaultKey}:   {"", `"a fault"`},
	{APIOllama, false, "message", KindKey, "images"}:  {`[]`, `["iVBORw0KGgo="]`},
	{APIOllama, true, "line", KindOther, "*"}:         {`"created_at":"2025-01-01T00:00:00Z"`, `"zz_probe":1`},
	{APIOllama, true, "line.message", KindOther, "*"}: {`"images":null`, `"zz_probe":1`},

	{APIAnthropic, false, "", KindKey, "stop_details"}:                       {`null`, `{"type":"refusal","category":"cyber"}`},
	{APIAnthropic, false, "", KindKey, StreamFaultKey}:                       {"", `"a fault"`},
	{APIAnthropic, false, "content[type=tool_use]", KindKey, "caller"}:       {`{"type":"direct"}`, `{"type":"code_execution_20250825","tool_id":"srvtoolu_1"}`},
	{APIAnthropic, false, "content[type=tool_use]", KindKey, "toolset_name"}: {`null`, `"mcp_toolset"`},
	{APIAnthropic, true, "event", KindType, "error"}:                         {"", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},

	{APIResponses, false, "", KindKey, "error"}:                                                     {`null`, `{"code":"server_error","message":"boom"}`},
	{APIResponses, false, "", KindKey, StreamFaultKey}:                                              {"", `"a fault"`},
	{APIResponses, false, "output[type=message].content[]", KindType, "refusal"}:                    {"", `{"type":"refusal","refusal":"I can't."}`},
	{APIResponses, false, "output[type=message].content[type=output_text]", KindKey, "annotations"}: {`[]`, `[{"type":"file_citation","file_id":"f"}]`},
	{APIResponses, true, "event", KindType, "error"}:                                                {"", `{"type":"error","code":"insufficient_quota","message":"quota","param":null,"sequence_number":3}`},
}

// probe puts insert into the template of p and reads the response as Airlock does.
func probe(t *testing.T, p rowPlace, insert string) (Result, error) {
	t.Helper()
	tpl, ok := probeTemplates[p]
	if !ok {
		t.Fatalf("no probe template for %s %q (stream %v): add one to probeTemplates", p.api, p.place, p.stream)
	}
	format := FormatOpenAI
	switch p.api {
	case APIAnthropic:
		format = FormatAnthropic
	case APIResponses:
		format = FormatResponses
	}
	if !p.stream {
		return Parse(format, []byte(at(tpl.body, "%s", insert)), Options{Round: 1})
	}
	var asm Assembler
	if p.api == APIOllama {
		asm = NewOllamaAssembler()
	} else {
		var err error
		if asm, err = NewAssembler(format); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range tpl.events {
		if strings.Contains(ev, "%s") {
			ev = at(ev, "%s", insert)
		}
		if ev == "[DONE]" {
			continue
		}
		asm.Add([]byte(ev))
	}
	return Parse(format, asm.Body(), Options{Round: 1})
}

// insertion is a row's part as put into a template: "key": value, a member list for "*",
// an element or event for a type.
func insertion(r ContractRow, v string) string {
	if r.Kind == KindKey {
		return strconv.Quote(r.Key) + ":" + v
	}
	return v
}

func typeElement(key string) string {
	return `{"type":` + strconv.Quote(strings.Replace(key, "*", "in_progress", 1)) + `}`
}

// TestContractDispositionsHold puts each row's part into a response that reads normally:
// what is ignored, or judged with a value that says nothing, leaves it read; what is refused,
// or judged with a value that carries something, fails it naming the part. A key or type the
// contract does not list at a place is refused.
func TestContractDispositionsHold(t *testing.T) {
	refusals := []Reason{ReasonRefusal, ReasonProviderError, ReasonUnreadPart, ReasonStreamFault}
	places := map[rowPlace]bool{}
	hasOther := map[rowPlace]bool{}
	for _, r := range Contract() {
		p := rowPlace{r.API, r.Stream, r.Place}
		if r.Kind == KindData {
			continue
		}
		if r.Kind == KindOther {
			hasOther[p] = true
		}
		places[p] = true
		s := probeSamples[idOf(r)]
		nothing, something := s.nothing, s.something
		switch {
		case r.Disposition == DispositionIgnored && nothing == "" && r.Kind == KindKey:
			nothing = `{"any":["value",1,null]}`
		case r.Disposition == DispositionIgnored && nothing == "" && r.Kind == KindType:
			nothing = typeElement(r.Key)
		case r.Disposition == DispositionRefused && something == "" && r.Kind == KindKey:
			something = `{"any":["value",1]}`
		case r.Disposition == DispositionRefused && something == "" && r.Kind == KindType:
			something = typeElement(r.Key)
		}
		name := fmt.Sprintf("%s/%v/%s/%s", r.API, r.Stream, r.Place, r.Key)
		needNothing := r.Disposition == DispositionIgnored || r.Disposition == DispositionJudged
		needSomething := r.Disposition == DispositionRefused || r.Disposition == DispositionJudged
		if (needNothing && nothing == "") || (needSomething && something == "") {
			t.Errorf("%s (%s): no probe sample; add one to probeSamples", name, r.Disposition)
			continue
		}
		if nothing != "" {
			res, err := probe(t, p, insertion(r, nothing))
			if err != nil || res.Incomplete != "" {
				t.Errorf("%s is %s, but %s there is not read: %v %s %s", name, r.Disposition, insertion(r, nothing), err, res.Incomplete, res.IncompleteDetail)
			}
		}
		if something != "" {
			res, err := probe(t, p, insertion(r, something))
			named := r.Key
			if r.Kind == KindOther {
				named = "zz_probe"
			}
			if r.Key == StreamFaultKey {
				named = "a fault"
			}
			switch {
			case err != nil:
				t.Errorf("%s is %s, but %s there is not even a response: %v", name, r.Disposition, insertion(r, something), err)
			case !slices.Contains(refusals, res.Incomplete):
				t.Errorf("%s is %s, but %s there is not refused: %q %s", name, r.Disposition, insertion(r, something), res.Incomplete, res.IncompleteDetail)
			case !strings.Contains(res.IncompleteDetail, strings.TrimSuffix(named, "*")):
				t.Errorf("%s: the refusal of %s does not name %q: %s", name, insertion(r, something), named, res.IncompleteDetail)
			}
		}
	}
	// An unlisted key or type at each place is refused.
	for p := range places {
		if hasOther[p] {
			continue
		}
		kind := KindKey
		for _, r := range Contract() {
			if (rowPlace{r.API, r.Stream, r.Place}) == p {
				kind = r.Kind
			}
		}
		insert := `"zz_probe":1`
		if kind == KindType {
			insert = typeElement("zz_probe")
		}
		res, err := probe(t, p, insert)
		if err != nil || !slices.Contains(refusals, res.Incomplete) || !strings.Contains(res.IncompleteDetail, "zz_probe") {
			t.Errorf("%s %q (stream %v): the unlisted %s is not refused naming it: %v %q %s", p.api, p.place, p.stream, insert, err, res.Incomplete, res.IncompleteDetail)
		}
	}
	for p := range probeTemplates {
		if !places[p] {
			t.Errorf("probe template for %s %q (stream %v), a place the contract does not have", p.api, p.place, p.stream)
		}
	}
	for id := range probeSamples {
		found := false
		for _, r := range Contract() {
			found = found || idOf(r) == id
		}
		if !found {
			t.Errorf("probe sample for %+v, a part the contract does not list", id)
		}
	}
}
