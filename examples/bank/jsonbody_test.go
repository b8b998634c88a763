package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/examples/bank/bank"
)

func TestReadObject(t *testing.T) {
	t.Parallel()
	read := func(ct, body string, allowed ...string) (map[string]string, error) {
		r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		fields, err := readObject(httptest.NewRecorder(), r, allowed...)
		out := map[string]string{}
		for k, v := range fields {
			out[k] = string(v)
		}
		return out, err
	}
	got, err := read("application/json", ` {"from":"a", "amount": 12} `, "from", "to", "amount")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"from": `"a"`, "amount": "12"}, got)
	_, err = read("application/json; charset=utf-8", `{}`, "id")
	require.NoError(t, err)

	bad := []struct{ ct, body, want string }{
		{"", `{"id":"a"}`, "no Content-Type"},
		{"text/plain", `{"id":"a"}`, "not supported"},
		{"application/jsonx", `{"id":"a"}`, "not supported"},
		{"application/json", ``, "empty"},
		{"application/json", `{"id":"a"`, "ends in the middle"},
		{"application/json", `{"id":}`, "not valid JSON"},
		{"application/json", `["a"]`, "not a JSON object"},
		{"application/json", `"a"`, "not a JSON object"},
		{"application/json", `null`, "not a JSON object"},
		{"application/json", `{"id":"a","extra":1}`, `unknown field "extra"`},
		{"application/json", `{"ID":"a"}`, `unknown field "ID"`},
		{"application/json", `{"id":"a","id":"b"}`, "appears twice"},
		{"application/json", `{"id":"a"}{"id":"b"}`, "data after the JSON object"},
		{"application/json", `{"id":"a"} x`, "data after the JSON object"},
		{"application/json", `{"id":"` + strings.Repeat("a", maxBodyBytes) + `"}`, "larger than 65536 bytes"},
	}
	for _, b := range bad {
		_, err := read(b.ct, b.body, "id")
		require.Error(t, err, b.body)
		require.ErrorIs(t, err, bank.ErrInvalidRequest, b.body)
		require.Contains(t, err.Error(), b.want, truncate(b.body, 60))
	}
}

func TestStringAndIDFields(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{"from":"alice","to":5,"amount":"x"}`))
	r.Header.Set("Content-Type", "application/json")
	fields, err := readObject(httptest.NewRecorder(), r, "from", "to", "amount")
	require.NoError(t, err)
	id, err := accountIDField(fields, "from")
	require.NoError(t, err)
	require.Equal(t, "alice", id)
	_, err = accountIDField(fields, "to")
	require.ErrorContains(t, err, `"to" must be a JSON string`)
	_, err = accountIDField(fields, "missing")
	require.ErrorContains(t, err, `"missing" is missing`)
	_, err = bank.ParseAmount(fields["amount"])
	require.ErrorIs(t, err, bank.ErrInvalidAmount)
}
