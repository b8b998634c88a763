package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCustomersAndErasure: accounts carry their customer until the customer
// is erased through DELETE /customers/{id}; afterwards every account of the
// customer answers {"id":…, "erased":true} while balances, versions and
// histories stay, on memory and on Postgres.
func TestCustomersAndErasure(t *testing.T) {
	t.Parallel()
	const name, email = "Alice Example-Marker", "alice.marker@example.com"
	for _, kind := range backendKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ts := startTestServer(t, kind)
			alice := `"customer":{"id":"c-42","name":"` + name + `","email":"` + email + `"}`
			r := ts.request("POST", "/accounts", `{"id":"acc1",`+alice+`}`)
			require.Equal(t, 201, r.Status, string(r.Body))
			require.JSONEq(t, `{"id":"acc1","balance":0,"version":1,"customer":{"id":"c-42","name":"`+name+`","email":"`+email+`"}}`, string(r.Body))
			acc2 := `{"id":"acc2",` + alice + `}`
			require.Equal(t, 201, ts.request("POST", "/accounts", acc2, "Idempotency-Key", "open-acc2").Status)
			r = ts.request("POST", "/accounts", acc2, "Idempotency-Key", "open-acc2")
			require.Equal(t, 201, r.Status, "a retry with the key answers like the first")
			require.Contains(t, string(r.Body), name)
			require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"acc3","customer":{"id":"c-7","name":"Bob","email":"bob@example.com"}}`).Status)
			require.Equal(t, 201, ts.request("POST", "/accounts", `{"id":"acc4"}`).Status)
			require.Equal(t, 200, ts.request("POST", "/accounts/acc1/deposit", `{"amount":50}`).Status)
			require.Equal(t, 200, ts.request("POST", "/transfers", `{"from":"acc1","to":"acc3","amount":20}`).Status)

			r = ts.request("GET", "/accounts/acc1", "")
			require.Equal(t, 200, r.Status)
			require.JSONEq(t, `{"id":"acc1","balance":30,"version":3,"customer":{"id":"c-42","name":"`+name+`","email":"`+email+`"}}`, string(r.Body))
			r = ts.request("GET", "/accounts/acc4", "")
			require.JSONEq(t, `{"id":"acc4","balance":0,"version":1}`, string(r.Body))
			require.Eventually(t, func() bool {
				r := ts.request("GET", "/accounts", "")
				return r.Status == 200 && strings.Count(string(r.Body), name) == 2 && strings.Contains(string(r.Body), `"balance":30`)
			}, 20*time.Second, 20*time.Millisecond)

			// Bad customers: 400 with a message that names the problem and
			// never repeats the personal data.
			long := strings.Repeat("x", 257)
			for _, body := range []string{
				`{"id":"b1","customer":{"id":"","name":"` + name + `"}}`,
				`{"id":"b1","customer":{"id":"c 42","name":"` + name + `"}}`,
				`{"id":"b1","customer":{"id":"` + strings.Repeat("c", 65) + `"}}`,
				`{"id":"b1","customer":{"id":"c-1","name":"` + long + `"}}`,
				`{"id":"b1","customer":{"id":"c-1","email":"` + long + `"}}`,
				`{"id":"b1","customer":{"id":"c-1","phone":"` + name + `"}}`,
				`{"id":"b1","customer":{"id":"c-1","name":42}}`,
				`{"id":"b1","customer":"` + name + `"}`,
			} {
				r := ts.request("POST", "/accounts", body)
				require.Equal(t, 400, r.Status, body)
				require.NotContains(t, string(r.Body), name)
				require.NotContains(t, string(r.Body), long)
				require.Contains(t, string(r.Body), "customer")
			}

			require.Equal(t, 404, ts.request("DELETE", "/customers/c-unknown", "").Status)
			require.Equal(t, 400, ts.request("DELETE", "/customers/c%20x", "").Status)
			r = ts.request("DELETE", "/customers/c-42", "")
			require.Equal(t, 204, r.Status, string(r.Body))
			require.Empty(t, r.Body)
			require.Equal(t, 204, ts.request("DELETE", "/customers/c-42", "").Status, "erasure is idempotent")

			for _, acc := range []struct {
				id      string
				balance int64
				version uint64
			}{{"acc1", 30, 3}, {"acc2", 0, 1}} {
				r := ts.request("GET", "/accounts/"+acc.id, "")
				require.Equal(t, 200, r.Status)
				var v AccountView
				require.NoError(t, json.Unmarshal(r.Body, &v))
				require.Equal(t, AccountView{ID: acc.id, Balance: acc.balance, Version: acc.version, Customer: &CustomerView{ID: "c-42", Erased: true}}, v, string(r.Body))
				require.Contains(t, string(r.Body), `"customer":{"id":"c-42","erased":true}`)
			}
			r = ts.request("GET", "/accounts/acc3", "")
			require.Contains(t, string(r.Body), `"name":"Bob"`)
			h := ts.request("GET", "/accounts/acc1/events", "")
			require.Equal(t, 200, h.Status)
			var page []EventView
			require.NoError(t, json.Unmarshal(h.Body, &page))
			require.Len(t, page, 3, "the history stays")
			require.NotContains(t, string(h.Body), name)
			require.Eventually(t, func() bool {
				r := ts.request("GET", "/accounts", "")
				return r.Status == 200 && strings.Count(string(r.Body), `"customer":{"id":"c-42","erased":true}`) == 2 && strings.Contains(string(r.Body), `"name":"Bob"`)
			}, 20*time.Second, 20*time.Millisecond)
			require.NotContains(t, string(ts.request("GET", "/accounts", "").Body), name)

			// A retry after the erasure must not replay the first response's
			// personal data: the cache does not keep it, the runtime answers.
			r = ts.request("POST", "/accounts", acc2, "Idempotency-Key", "open-acc2")
			require.Equal(t, 201, r.Status, string(r.Body))
			require.NotContains(t, string(r.Body), name)
			require.Contains(t, string(r.Body), `"customer":{"id":"c-42","erased":true}`)

			r = ts.request("POST", "/accounts", `{"id":"acc5","customer":{"id":"c-42","name":"Again"}}`)
			require.Equal(t, 409, r.Status, string(r.Body))
			require.Contains(t, string(r.Body), "customer_erased")
		})
	}
}
