package registry

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"reflect"
	"sync"

	"github.com/go-playground/validator/v10"
	jsv "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/airlock-dev/airlock/internal/canonical"
	"github.com/airlock-dev/airlock/internal/display"
)

// ArgumentError is a stage-2 (validate) rejection. Code is one of "duplicate_key",
// "schema_mismatch", "unknown_field", "rule_failed"; Detail names the offending field.
type ArgumentError struct {
	Code   string
	Detail string
}

func (e *ArgumentError) Error() string { return "registry: arguments " + e.Code + ": " + e.Detail }

var (
	validate     *validator.Validate
	validateOnce sync.Once
)

func structValidator() *validator.Validate {
	validateOnce.Do(func() { validate = validator.New(validator.WithRequiredStructEnabled()) })
	return validate
}

// ValidateArguments is executor stage 2 for this capability. raw must be a JSON object.
// Both kinds of capability are first checked against their JSON Schema (case-sensitive names,
// no additional properties, exact types: a number is never coerced to a string). Go-typed
// capabilities are then strictly decoded (unknown fields rejected) into a fresh argument value
// and checked with validator/v10 rules; decoded is a pointer to that value (nil for
// schema-defined capabilities). Errors are *ArgumentError.
func (c *Capability) ValidateArguments(raw json.RawMessage) (decoded any, err error) {
	if _, err := canonical.Canonicalize(raw); err != nil {
		if errors.Is(err, canonical.ErrDuplicateKey) {
			return nil, &ArgumentError{Code: "duplicate_key", Detail: err.Error()}
		}
		return nil, &ArgumentError{Code: "schema_mismatch", Detail: err.Error()}
	}
	inst, err := jsv.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &ArgumentError{Code: "schema_mismatch", Detail: err.Error()}
	}
	if c.compiled == nil {
		return nil, &ArgumentError{Code: "schema_mismatch", Detail: "capability has no argument schema"}
	}
	if err := c.compiled.Validate(inst); err != nil {
		var ve *jsv.ValidationError
		detail := err.Error()
		if errors.As(err, &ve) {
			detail = flatten(ve)
		}
		return nil, &ArgumentError{Code: "schema_mismatch", Detail: detail}
	}
	if c.Impl.Args == nil {
		return nil, nil
	}
	ptr := reflect.New(reflect.TypeOf(c.Impl.Args))
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ptr.Interface()); err != nil {
		return nil, decodeError(err)
	}
	if err := structValidator().Struct(ptr.Interface()); err != nil {
		var inv *validator.InvalidValidationError
		if errors.As(err, &inv) {
			return ptr.Interface(), nil // argument types without fields (no rules to check)
		}
		return nil, &ArgumentError{Code: "rule_failed", Detail: err.Error()}
	}
	return ptr.Interface(), nil
}

// decodeError names what the strict decode into a Go-typed capability's arguments refused: a
// field the struct lacks is "unknown_field"; a value the schema let through but the Go type
// cannot hold (1e400 for a float64, 3000000000 for an int32, a fraction for an int) is
// "schema_mismatch" naming the field, the value's kind and the type; anything else is
// "schema_mismatch" with the decoder's words.
func decodeError(err error) *ArgumentError {
	var ute *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			field = "(the arguments)"
		}
		// "number 1e400": the kind and the model's literal (a map key can be any text), bounded
		// on a character boundary and with hidden characters shown, since the detail reaches
		// the audit and the model.
		value := ute.Value
		if len(value) > maxShownValue {
			n := maxShownValue
			for n > 0 && !utf8.RuneStart(value[n]) {
				n--
			}
			value = value[:n] + "…"
		}
		return &ArgumentError{Code: "schema_mismatch", Detail: fmt.Sprintf("/%s: %s does not fit the capability's Go type %s",
			display.Visible(strings.ReplaceAll(field, ".", "/")), display.Visible(value), ute.Type)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &ArgumentError{Code: "unknown_field", Detail: err.Error()}
	}
	return &ArgumentError{Code: "schema_mismatch", Detail: err.Error()}
}

// maxShownValue bounds the model's literal quoted in a decode error's detail (bytes).
const maxShownValue = 48

var printer = message.NewPrinter(language.English)

// flatten renders the leaf causes of a schema validation error as "location: message; ...".
func flatten(ve *jsv.ValidationError) string {
	var out []string
	var walk func(e *jsv.ValidationError)
	walk = func(e *jsv.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, fmt.Sprintf("/%s: %s", joinPath(e.InstanceLocation), e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	b, _ := json.Marshal(out)
	return string(b)
}

func joinPath(p []string) string {
	s := ""
	for i, x := range p {
		if i > 0 {
			s += "/"
		}
		s += x
	}
	return s
}
