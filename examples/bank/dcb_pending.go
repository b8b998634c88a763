package main

import (
	"context"
	"fmt"

	"github.com/scribe-es/scribe/tagconsistency"
)

// executeDCB will run the transfer through the runtime's DCB execution once
// the runtime offers it; until then transfers answer 503 and change nothing.
func (s *bankService) executeDCB(context.Context, tagconsistency.Command[transferState], CommandOptions) (tagconsistency.Result, error) {
	return tagconsistency.Result{}, fmt.Errorf("%w: transfers need DCB execution in the Scribe runtime, which this build does not have yet", errUnavailable)
}
