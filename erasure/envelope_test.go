package erasure_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/erasure"
)

const secretName = "Zelda Plaintextova"

func sealOne(t *testing.T, key erasure.DataKey) []byte {
	t.Helper()
	data := []byte(`{"accountId":"a-1","customerId":"c-1","name":"` + secretName + `","email":"z@example.com","amount":5,"nick":null}`)
	out, err := erasure.Seal(data, erasure.SealParams{EventType: "Opened", Subject: "c-1", Fields: []string{"name", "email", "nick", "absent"}, Key: key})
	require.NoError(t, err)
	return out
}

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	key, err := erasure.NewDataKey()
	require.NoError(t, err)
	sealed := sealOne(t, key)
	require.NotContains(t, string(sealed), secretName)
	require.NotContains(t, string(sealed), "z@example.com")
	require.Contains(t, string(sealed), `"$personal"`)
	require.True(t, erasure.HasSealed(sealed))

	subs, err := erasure.Subjects(sealed)
	require.NoError(t, err)
	require.Equal(t, []string{"c-1"}, subs)

	op, err := erasure.Open(sealed, "Opened", erasure.Lookup{Keys: map[string]erasure.DataKey{"c-1": key}})
	require.NoError(t, err)
	require.Empty(t, op.Erased)
	var got map[string]any
	require.NoError(t, json.Unmarshal(op.Data, &got))
	require.Equal(t, secretName, got["name"])
	require.Equal(t, "z@example.com", got["email"])
	require.Equal(t, "a-1", got["accountId"])
	require.Nil(t, got["nick"])
	require.Contains(t, got, "nick")

	// Two seals of the same data differ (random nonces).
	require.NotEqual(t, string(sealed), string(sealOne(t, key)))
}

func TestOpenErasedRemovesFields(t *testing.T) {
	t.Parallel()
	key, err := erasure.NewDataKey()
	require.NoError(t, err)
	sealed := sealOne(t, key)
	op, err := erasure.Open(sealed, "Opened", erasure.Lookup{Erased: map[string]erasure.Erasure{"c-1": {Subject: "c-1"}}})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"name", "email"}, op.Erased)
	require.Equal(t, []string{"c-1"}, op.ErasedSubjects)
	var got map[string]any
	require.NoError(t, json.Unmarshal(op.Data, &got))
	require.NotContains(t, got, "name")
	require.NotContains(t, got, "email")
	require.Equal(t, "c-1", got["customerId"])
	require.EqualValues(t, 5, got["amount"])
}

func TestOpenFailures(t *testing.T) {
	t.Parallel()
	key, err := erasure.NewDataKey()
	require.NoError(t, err)
	other, err := erasure.NewDataKey()
	require.NoError(t, err)
	sealed := sealOne(t, key)

	_, err = erasure.Open(sealed, "Opened", erasure.Lookup{})
	require.ErrorIs(t, err, erasure.ErrKeyMissing)

	_, err = erasure.Open(sealed, "Opened", erasure.Lookup{Keys: map[string]erasure.DataKey{"c-1": other}})
	require.ErrorIs(t, err, erasure.ErrCorrupt, "a wrong key must fail, never yield garbage")
	require.NotContains(t, err.Error(), secretName)

	// The AAD binds the event type and the field.
	_, err = erasure.Open(sealed, "OtherType", erasure.Lookup{Keys: map[string]erasure.DataKey{"c-1": key}})
	require.ErrorIs(t, err, erasure.ErrCorrupt)
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(sealed, &obj))
	obj["name"], obj["email"] = obj["email"], obj["name"]
	swapped, err := json.Marshal(obj)
	require.NoError(t, err)
	_, err = erasure.Open(swapped, "Opened", erasure.Lookup{Keys: map[string]erasure.DataKey{"c-1": key}})
	require.ErrorIs(t, err, erasure.ErrCorrupt)

	// Data without envelopes passes through untouched.
	plain := []byte(`{"a":1}`)
	op, err := erasure.Open(plain, "X", erasure.Lookup{})
	require.NoError(t, err)
	require.Equal(t, plain, op.Data)
}

func TestSealRejectsBadInput(t *testing.T) {
	t.Parallel()
	key, err := erasure.NewDataKey()
	require.NoError(t, err)
	_, err = erasure.Seal([]byte(`[1]`), erasure.SealParams{EventType: "X", Subject: "s", Fields: []string{"a"}, Key: key})
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
	_, err = erasure.Seal([]byte(`{"a":1}`), erasure.SealParams{EventType: "X", Subject: "", Fields: []string{"a"}, Key: key})
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
	_, err = erasure.Seal([]byte(`{"a":1}`), erasure.SealParams{EventType: "X", Subject: "s", Fields: []string{"a"}})
	require.ErrorIs(t, err, erasure.ErrInvalidArgument)
}

func TestDataKeyNeverPrints(t *testing.T) {
	t.Parallel()
	key, err := erasure.NewDataKey()
	require.NoError(t, err)
	raw := key.Bytes()
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("key", "key", key)
	outs := []string{fmt.Sprint(key), fmt.Sprintf("%v %+v %#v %x %s %q", key, key, key, key, key, key), fmt.Errorf("wrapped: %v", key).Error(), logs.String()}
	for _, o := range outs {
		require.NotContains(t, o, string(raw))
		require.NotContains(t, strings.ToLower(o), fmt.Sprintf("%x", raw))
		require.Contains(t, o, "[redacted]")
	}
}

func TestSealRewritesOnlyPersonalValues(t *testing.T) {
	t.Parallel()
	key, err := erasure.NewDataKey()
	require.NoError(t, err)
	for _, data := range []string{
		`{"a":"x\"}{,","p":{"n":[1,{"q":"]"}],"s":"\\"},"b":[true,null,-1.5e3],"e":"esc\u00e9"}`,
		` { "p" : "v" , "z" : { } } `,
		`{"p":null,"b":1}`,
		`{"p\u0041":1,"p":"escaped keys take the slow path"}`,
	} {
		sealed, err := erasure.Seal([]byte(data), erasure.SealParams{EventType: "T", Subject: "s-1", Fields: []string{"p", "missing"}, Key: key})
		require.NoError(t, err, data)
		op, err := erasure.Open(sealed, "T", erasure.Lookup{Keys: map[string]erasure.DataKey{"s-1": key}})
		require.NoError(t, err, data)
		require.JSONEq(t, data, string(op.Data), data)
		if !strings.Contains(data, `"p":null`) {
			require.True(t, erasure.HasSealed(sealed), data)
		}
		v, ok, err := erasure.TopLevelField(sealed, "b")
		require.NoError(t, err)
		if strings.Contains(data, `"b"`) {
			require.True(t, ok)
			require.NotEmpty(t, v)
		}
	}
}
