package tagconsistency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	otelx "github.com/scribe-es/scribe/internal/telemetry"

	"github.com/stretchr/testify/require"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// postingOwners are lockOwners whose grants are PostingGrantors: PostConfirm
// adopts the records and frees the stream at once, while Confirm's answer
// never comes until the test ends (an owner slow to answer). A command that
// waited for the answer would not return.
type postingOwners struct {
	*lockOwners
	answer chan struct{} // closed at the end of the test

	mu     sync.Mutex
	posted map[journal.Tag][]journal.Record
	waited []journal.Tag // grants confirmed with Confirm
}

func (o *postingOwners) Reserve(ctx context.Context, id journal.StreamID) (*tagconsistency.Reservation, error) {
	r, err := o.lockOwners.Reserve(ctx, id)
	if err != nil {
		return nil, err
	}
	r.Grantor = &postingGrant{lockGrant: r.Grantor.(*lockGrant), o: o}
	return r, nil
}

type postingGrant struct {
	*lockGrant
	o *postingOwners
}

func (g *postingGrant) PostConfirm(records []journal.Record) {
	g.o.mu.Lock()
	g.o.posted[g.tag] = records
	g.o.mu.Unlock()
	_ = g.lockGrant.Confirm(context.Background(), records)
}

func (g *postingGrant) Confirm(ctx context.Context, records []journal.Record) error {
	g.o.mu.Lock()
	g.o.waited = append(g.o.waited, g.tag)
	g.o.mu.Unlock()
	select {
	case <-g.o.answer:
	case <-ctx.Done():
	}
	return g.lockGrant.Confirm(ctx, records)
}

// A successful command posts its confirmations to owners that take them
// (PostingGrantor) and returns without waiting for their answers: the
// release of its tags costs it no round trip. Each owner has its own records
// by then, and the next command on the same tags is served.
func TestConfirmationIsPostedWithoutWaitingForTheOwners(t *testing.T) {
	t.Parallel()
	var owners *postingOwners
	e := setup(t, memoryBackend(), func(c *tagconsistency.Config, lo *lockOwners) {
		owners = &postingOwners{lockOwners: lo, answer: make(chan struct{}), posted: map[journal.Tag][]journal.Record{}}
		c.Owners = owners
	})
	t.Cleanup(func() { close(owners.answer) })
	ctx := context.Background()
	a, b := accountTag(1), accountTag(2)
	require.NoError(t, e.deposit(ctx, a, 10))
	require.NoError(t, e.deposit(ctx, b, 10))

	done := make(chan error, 1)
	var res tagconsistency.Result
	go func() {
		var err error
		res, err = tagconsistency.Execute(ctx, e.x, transfer(a, b, 3), tagconsistency.Options{})
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the command waited for the owners' answers to its confirmations")
	}
	owners.mu.Lock()
	require.Empty(t, owners.waited, "no grant was confirmed with Confirm")
	require.Len(t, owners.posted, 2)
	for _, tag := range []journal.Tag{a, b} {
		require.Len(t, owners.posted[tag], 1, "%s got the record carrying its tag", tag)
		require.Equal(t, res.Records[0].ID, owners.posted[tag][0].ID)
	}
	owners.mu.Unlock()

	var confirm bool
	for _, s := range e.spans.Ended() {
		if s.Name() == otelx.SpanDCBConfirm {
			v, ok := attr(s, "scribe.dcb.posted")
			require.True(t, ok)
			require.EqualValues(t, 2, v.AsInt64())
			confirm = true
		}
	}
	require.True(t, confirm, "the confirm span records the posted confirmations")

	// The posts freed both tags and the owners adopted the record: the next
	// transfer is granted and decides on the new balances.
	_, err := tagconsistency.Execute(ctx, e.x, transfer(b, a, 13), tagconsistency.Options{})
	require.NoError(t, err)
	_, err = tagconsistency.Execute(ctx, e.x, transfer(b, a, 1), tagconsistency.Options{})
	require.Error(t, err, "account:2 holds 10+3-13 = 0")
}
