package tagconsistency

import (
	"context"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
)

// ActorOwners returns the TagOwners served by the stream actors of host: each
// tag's reservation is granted by that tag's single-writer actor, which queues
// its own commands and later reservations while the reservation is held, and
// adopts the confirmed records into its state and version. A tag whose group
// has no aggregate gets an actor that only keeps the stream's version.
func ActorOwners(host *actors.Host) TagOwners { return actorOwners{host} }

type actorOwners struct{ host *actors.Host }

func (o actorOwners) Reserve(ctx context.Context, stream journal.StreamID) (Reservation, error) {
	r, err := o.host.Reserve(ctx, stream)
	if err != nil {
		if errors.Is(err, actors.ErrReservationTimeout) {
			// The actor's own reservation timeout: report it as ours.
			return Reservation{}, fmt.Errorf("%w: %w", ErrReservationTimeout, err)
		}
		return Reservation{}, err
	}
	return Reservation{Stream: r.Stream, Lease: r.Lease, Version: r.Version, LastPosition: r.LastPosition, State: r.State, Token: r}, nil
}

func (o actorOwners) Confirm(ctx context.Context, r Reservation, records []journal.Record) error {
	res, ok := r.Token.(*actors.Reservation)
	if !ok {
		return fmt.Errorf("tagconsistency: reservation of %s was not granted by these owners", r.Stream)
	}
	return res.Confirm(ctx, records)
}

func (o actorOwners) Cancel(ctx context.Context, r Reservation, cause error) error {
	res, ok := r.Token.(*actors.Reservation)
	if !ok {
		return fmt.Errorf("tagconsistency: reservation of %s was not granted by these owners", r.Stream)
	}
	return res.Cancel(ctx, cause)
}
