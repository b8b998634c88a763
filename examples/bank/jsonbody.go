package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/scribe-es/scribe/examples/bank/bank"
)

// maxBodyBytes is the largest request body the API reads (64 KiB).
const maxBodyBytes = 64 << 10

// readObject reads the request body as exactly one JSON object whose keys are
// among allowed, each at most once (keys match exactly, case included), with
// nothing but white space after it. It requires Content-Type application/json
// and reads at most maxBodyBytes. It returns the raw value of each key present.
func readObject(w http.ResponseWriter, r *http.Request, allowed ...string) (map[string]json.RawMessage, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil, invalidRequest("the request has no Content-Type; send a JSON body with Content-Type: application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return nil, invalidRequest(fmt.Sprintf("Content-Type %s is not supported; send a JSON body with Content-Type: application/json", strconv.Quote(truncate(ct, 80))))
	}
	body := http.MaxBytesReader(w, r.Body, maxBodyBytes)
	dec := json.NewDecoder(body)
	started := false
	fail := func(err error) (map[string]json.RawMessage, error) {
		var tooBig *http.MaxBytesError
		var syntax *json.SyntaxError
		switch {
		case errors.As(err, &tooBig):
			return nil, invalidRequest(fmt.Sprintf("the request body is larger than %d bytes (64 KiB); send a smaller body", maxBodyBytes))
		case errors.Is(err, io.EOF) && !started:
			return nil, invalidRequest("the request body is empty; send a JSON object")
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, invalidRequest("the request body ends in the middle of a JSON value; send one complete JSON object")
		case errors.As(err, &syntax):
			return nil, invalidRequest(fmt.Sprintf("the request body is not valid JSON (at byte %d: %v); send one JSON object", syntax.Offset, syntax))
		}
		return nil, invalidRequest(fmt.Sprintf("the request body could not be read as JSON (%v); send one JSON object", err))
	}
	tok, err := dec.Token()
	if err != nil {
		return fail(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, invalidRequest("the request body is not a JSON object; send an object such as " + exampleBody(allowed))
	}
	started = true
	fields := make(map[string]json.RawMessage, len(allowed))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		key, _ := tok.(string)
		if !contains(allowed, key) {
			return nil, invalidRequest(fmt.Sprintf("unknown field %s; this request accepts only %s", strconv.Quote(truncate(key, 64)), listFields(allowed)))
		}
		if _, dup := fields[key]; dup {
			return nil, invalidRequest(fmt.Sprintf("field %q appears twice; give each field once", key))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fail(err)
		}
		fields[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fail(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil && !isSyntaxOrEOF(err) {
			return fail(err)
		}
		return nil, invalidRequest("the request body has data after the JSON object; send exactly one JSON object")
	}
	return fields, nil
}

func isSyntaxOrEOF(err error) bool {
	var syntax *json.SyntaxError
	return errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF)
}

// stringField returns the JSON string value of field name, or an
// invalid_request error naming the field when it is absent or not a string.
func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", invalidRequest(fmt.Sprintf("field %q is missing; give it as a JSON string", name))
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' {
		return "", invalidRequest(fmt.Sprintf("field %q must be a JSON string", name))
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalidRequest(fmt.Sprintf("field %q must be a JSON string", name))
	}
	return s, nil
}

// customerField reads the optional customer object of POST /accounts:
// {"id": …, "name": …, "email": …}, id required, name and email optional
// strings, nothing else. nil when the field is absent or null. Errors name
// the field but never repeat its value (personal data).
func customerField(fields map[string]json.RawMessage, name string) (*bank.Customer, error) {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalidRequest(fmt.Sprintf(`field %q must be a JSON object such as {"id":"c-42","name":"Alice Example","email":"alice@example.com"}`, name))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, invalidRequest(fmt.Sprintf("field %q must be a JSON object", name))
	}
	for k := range obj {
		if k != "id" && k != "name" && k != "email" {
			return nil, invalidRequest(fmt.Sprintf("field %q has an unknown member %s; give only id, name and email", name, strconv.Quote(truncate(k, 32))))
		}
	}
	var c bank.Customer
	var err error
	if c.ID, err = stringField(obj, "id"); err != nil {
		return nil, invalidRequest(name + ": " + err.(*bank.Error).Message)
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &c.Name}, {"email", &c.Email}} {
		if _, ok := obj[f.key]; !ok {
			continue
		}
		if *f.dst, err = stringField(obj, f.key); err != nil {
			return nil, invalidRequest(name + ": " + err.(*bank.Error).Message)
		}
	}
	if err := bank.ValidateCustomer(c); err != nil {
		return nil, err
	}
	return &c, nil
}

// accountIDField reads and validates an account ID field.
func accountIDField(fields map[string]json.RawMessage, name string) (string, error) {
	id, err := stringField(fields, name)
	if err != nil {
		return "", err
	}
	if err := bank.ValidateAccountID(id); err != nil {
		return "", &bank.Error{Code: bank.CodeInvalidRequest, Message: name + ": " + err.Error()}
	}
	return id, nil
}

func invalidRequest(msg string) error {
	return &bank.Error{Code: bank.CodeInvalidRequest, Message: msg}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func listFields(fields []string) string {
	s := ""
	for i, f := range fields {
		if i > 0 {
			s += ", "
		}
		s += strconv.Quote(f)
	}
	return s
}

func exampleBody(fields []string) string {
	switch {
	case len(fields) >= 1 && fields[0] == "id":
		return `{"id":"alice"}`
	case len(fields) == 1 && fields[0] == "amount":
		return `{"amount":100}`
	default:
		return `{"from":"alice","to":"bob","amount":25}`
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
