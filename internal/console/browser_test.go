package console_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/projection"
)

// browser starts a headless Chromium for one test. Without Chromium the test
// is skipped, unless SCRIBE_REQUIRE_BROWSER is set (CI installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("SCRIBE_REQUIRE_BROWSER") != "" {
			t.Fatal("no Chromium found and SCRIBE_REQUIRE_BROWSER is set: install the chromium package")
		}
		t.Skip("no Chromium: install the chromium package to run the console's browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Start the browser and its tab on ctx itself: a tab started on a
	// derived context would end with that context.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return ctx
}

// screenshots is where the browser tests save a picture of each page (not
// committed; SCRIBE_SCREENSHOTS overrides it).
func screenshots(t *testing.T) string {
	dir := os.Getenv("SCRIBE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "scribe-console-screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// TestBrowserPages: every page renders in Chromium, with a screenshot each.
func TestBrowserPages(t *testing.T) {
	f := setup(t, true)
	ctx := browser(t)
	dir := screenshots(t)
	for _, p := range []struct{ name, path, text string }{
		{"overview", "/", "Events per second"},
		{"streams", "/streams?prefix=account:", "account:alice"},
		{"stream", "/streams/account:alice", "MoneyDeposited"},
		{"event", "/events/" + f.recs[0].ID.String(), "account:alice v1"},
		{"correlation", "/correlations/req-1", "req-1"},
		{"types", "/types", "ClockTicked"},
		{"leases", "/leases", "leases held"},
		{"projections", "/projections", "Rebuild a projection"},
		{"verify", "/verify", "Verify chains"},
	} {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := chromedp.Do(tctx, chromedp.Navigate(f.srv.URL+p.path), chromedp.WaitVisible(chromedp.CSS("main h1")))
		require.NoError(t, err, p.name)
		body, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("body")))
		require.NoError(t, err, p.name)
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		cancel()
		require.NoError(t, err, p.name)
		require.Contains(t, body, p.text, p.name)
		require.NoError(t, os.WriteFile(filepath.Join(dir, p.name+".png"), png, 0o644))
	}
	t.Logf("screenshots in %s", dir)
}

// TestBrowserLiveAndVerify: an event appended after the overview loaded
// shows in its live feed within 2 s; a tampered event shows as the first
// broken link on the verify page; a rebuild needs its confirmation.
func TestBrowserLiveAndVerify(t *testing.T) {
	f := setup(t, true)
	lease, err := claimOne(t.Context(), f.store, projection.Key{Name: "accounts", Version: 1}, "node-1")
	require.NoError(t, err)
	require.NoError(t, commitOne(t.Context(), f.store, lease, lease.Checkpoint, f.recs[:2], func(context.Context, pgx.Tx) error { return nil }))
	ctx := browser(t)
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(f.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#rate")),
		// The live stream is connected once the first tick arrived.
		chromedp.WaitReady(chromedp.CSS(`#rate polyline[points*=","]`)),
	))
	res, err := f.journal.Append(t.Context(), []journal.Event{{ID: journal.NewEventID(), Type: "LiveProbe", SchemaVersion: 1, Tags: []journal.Tag{"probe:1"}, Data: []byte(`{}`)}}, journal.AppendOptions{})
	require.NoError(t, err)
	appended := time.Now()
	lctx, lcancel := context.WithTimeout(tctx, 2*time.Second)
	err = chromedp.Do(lctx, chromedp.WaitVisible(`//table[@id="feed"]//td[text()="LiveProbe"]`))
	lcancel()
	require.NoError(t, err, "the appended event did not show within 2 s")
	t.Logf("live event shown %s after its append", time.Since(appended).Round(time.Millisecond))
	pos, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#head")))
	require.NoError(t, err)
	require.Equal(t, res.Records[0].Position.String(), pos)
	// The projection applied 2 of the events: its lag is charted live.
	require.NoError(t, chromedp.Do(tctx, chromedp.WaitVisible(`//p[@id="lag-legend"]/span[starts-with(text(), "accounts@1: ")]`)))
	// Both charts show their scale: a round top value with its unit.
	rateTop, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#rate-ymax")))
	require.NoError(t, err)
	require.Regexp(t, `^[0-9]+(\.[0-9]+)?/s$`, rateTop)
	lagTop, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#lag-ymax")))
	require.NoError(t, err)
	require.Regexp(t, `^[0-9.]+ (s|min|h)$`, lagTop)

	f.exec(`UPDATE __S__.events SET data = '{"amount":999}' WHERE id = $1`, f.recs[1].ID)
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(f.srv.URL+"/verify"),
		chromedp.WaitVisible(chromedp.CSS("#verify-start")),
		chromedp.Click(chromedp.CSS("#verify-start")),
		chromedp.WaitReady(chromedp.CSS(`#verify-status[data-finished="true"]`)),
	))
	broke, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("#verify-break")))
	require.NoError(t, err)
	require.Contains(t, broke, "first broken link: default/account:alice at version 2")

	// A rebuild with the wrong confirmation is refused; with the name typed
	// again it resets the projection.
	fill := func(confirm string) error {
		return chromedp.Do(tctx,
			chromedp.Navigate(f.srv.URL+"/projections"),
			chromedp.WaitVisible(chromedp.CSS(`input[name="name"]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name="name"]`), "accounts"),
			chromedp.SendKeys(chromedp.CSS(`input[name="version"]`), "1"),
			chromedp.SendKeys(chromedp.CSS(`input[name="confirm"]`), confirm),
			chromedp.Click(chromedp.CSS("button.danger")),
		)
	}
	require.NoError(t, fill("yes"))
	require.NoError(t, chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS("p.error"))))
	body, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("body")))
	require.NoError(t, err)
	require.Contains(t, body, "type the projection's name (accounts) in the confirmation field")
	require.NoError(t, fill("accounts"))
	require.NoError(t, chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS("p.ok"))))
	body, err = chromedp.Run(tctx, chromedp.Text(chromedp.CSS("p.ok")))
	require.NoError(t, err)
	require.Contains(t, body, "was reset: its runner replays the feed")
	st, err := f.store.Status(t.Context(), projection.Key{Name: "accounts", Version: 1})
	require.NoError(t, err)
	require.True(t, st.Checkpoint.IsZero())
}
