package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStreamSelectorsMustMatch: `streams list` with a -partition or
// -tag-prefix that matches no stream, and `tags` of a group without
// streams, exit 1 naming the selector, in table and JSON form alike; an
// unknown stream in `stream show` and `retire-stream` does too.
func TestStreamSelectorsMustMatch(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.fillBank(t)
	for _, json := range [][]string{nil, {"-json"}} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"streams", "list", "-partition", "nosuch"}, `no stream matches -partition "nosuch"; check the spelling`},
			{[]string{"streams", "list", "-tag-prefix", "acount:"}, `no stream matches -tag-prefix "acount:"`},
			{[]string{"streams", "list", "-partition", "default", "-tag-prefix", "acount:"}, `no stream matches -partition "default" with -tag-prefix "acount:"`},
			{[]string{"tags", "acount"}, `group "acount" has no streams in partition default`},
			{[]string{"tags", "-partition", "nosuch", "account"}, `group "account" has no streams in partition nosuch`},
			{[]string{"stream", "show", "-partition", "nosuch", "account:a"}, "stream nosuch/account:a has no events"},
			{[]string{"retire-stream", "account:nosuch"}, "stream default/account:nosuch has no events"},
		} {
			res := f.scribe(t, append(json, tc.args...)...)
			require.Equal(t, exitFailure, res.code, "%v: stdout %s stderr %s", tc.args, res.stdout, res.stderr)
			require.Contains(t, res.stderr, tc.want, "%v", tc.args)
		}
	}
	res := f.scribe(t, "streams", "list", "-partition", "default", "-tag-prefix", "account:")
	require.Equal(t, exitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "4 streams, 21 events in them")
	res = f.scribe(t, "tags", "account")
	require.Equal(t, exitOK, res.code, res.stderr)
}
