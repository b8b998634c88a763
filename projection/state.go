package projection

// The state a store records for a projection moves only as Next says, in
// both stores (the Postgres store builds its SQL from Next). An operator's
// pause is a hold over the projection (Status.Paused), not a state: while
// it holds, the state is StatePaused unless the projection failed or was
// superseded, also through a reset, and resuming makes it StateStandby.

// Operation is something that moves a projection's recorded state: done by
// a runner through its store, or by an operator.
type Operation string

// Operations on a projection's recorded state.
const (
	// OpClaim: a runner claims the lease (or, sliced, a slice lease).
	OpClaim Operation = "claim"
	// OpCommit: a batch committed under a lease.
	OpCommit Operation = "commit"
	// OpRelease: the runner holding the lease released it.
	OpRelease Operation = "release"
	// OpFail: a record failed Options.MaxAttempts times.
	OpFail Operation = "fail"
	// OpPause: an operator paused the projection (Pauser.Pause).
	OpPause Operation = "pause"
	// OpResume: an operator resumed a paused projection (Pauser.Resume).
	OpResume Operation = "resume"
	// OpReset: the checkpoint moved back to zero (Store.Reset, Rebuild).
	OpReset Operation = "reset"
)

// AllStates returns every State, in the order of their declaration (a new
// slice at each call).
func AllStates() []State {
	return []State{StateIdle, StateStandby, StateRunning, StateFailed, StateSuperseded, StateStopped, StatePaused}
}

// Next returns the state a projection recorded in state s is in after op.
// paused says whether an operator's pause holds once op is done (OpPause
// sets it, OpResume clears it, the others leave it as it was). A failed
// projection stays failed until a commit (a retry that succeeded) or a
// reset; a paused one stays paused until resumed, also through a reset.
func (s State) Next(op Operation, paused bool) State {
	switch op {
	case OpClaim:
		if s == StateFailed {
			return s
		}
		return StateRunning
	case OpCommit:
		return StateRunning
	case OpRelease:
		if s == StateRunning {
			return StateStopped
		}
		return s
	case OpFail:
		return StateFailed
	case OpPause:
		if s == StateFailed || s == StateSuperseded {
			return s
		}
		return StatePaused
	case OpResume:
		if s == StatePaused {
			return StateStandby
		}
		return s
	case OpReset:
		if paused {
			return StatePaused
		}
		return StateIdle
	}
	return s
}
