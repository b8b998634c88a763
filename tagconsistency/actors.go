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

func (o actorOwners) Reserve(ctx context.Context, stream journal.StreamID) (*actors.Reservation, error) {
	r, err := o.host.Reserve(ctx, stream)
	if err != nil && errors.Is(err, actors.ErrReservationTimeout) {
		// The actor's own reservation timeout: report it as ours.
		return nil, fmt.Errorf("%w: %w", ErrReservationTimeout, err)
	}
	return r, err
}
