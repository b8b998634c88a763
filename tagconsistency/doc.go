// Package tagconsistency executes DCB (Dynamic Consistency Boundary) commands:
// commands whose decision depends on the events of several tags, such as a
// transfer between two accounts, a course's seat limit or a unique username.
//
// A [Command] declares a [journal.Query] (items of types any-of and tags
// all-of, every item naming at least one tag), an initial state, an Evolve
// over the matching events and a Decide that returns events carrying their
// tags. [Execute] runs it once:
//
//  0. with a [Gate] in [Config] (Scribe's runtime shares one among all its
//     DCB commands), it waits there, holding nothing, until no other command
//     of the process holds any of its tags, so it never holds one tag while it
//     queues for another behind its own process's commands;
//  1. it reserves every tag of the query (and of Command.Tags) at the tag's
//     single writer, a [TagOwners] (in Scribe, the stream actors:
//     *actors.Host implements it), in ascending tag order, so concurrent commands never
//     deadlock; a busy tag queues the command, and a reservation that waits
//     longer than the owner's reservation timeout fails with a
//     [ReservationTimeoutError] naming the tag;
//  2. it builds the state: from the owners' cached aggregate states
//     (Command.FromStates), or by folding the matching events of the reserved
//     streams, continuing a cached fold of the same command and query when it
//     has one (the cache is kept per command name and query: a command whose
//     tags vary widely, a transfer between any two of many accounts, mostly
//     misses it and folds the tags' whole history; decide such commands from
//     the owners' states);
//  3. it decides, then appends once with the expected version of every
//     reserved stream, the owners' leases, and the DCB append condition
//     "nothing matching the query after the last position folded" as a
//     backstop;
//  4. it confirms each owner with the new records carrying its tag (posted,
//     without waiting for the owner's answer, when the grant is a
//     [PostingGrantor], as the stream actors' are), or cancels every
//     reservation on any failure.
//
// Because every writer of a tag goes through its owner, a valid command
// succeeds at its first attempt: there is no retry loop. An append rejected by
// the expected versions or the condition means something bypassed the owners;
// it is returned as a [ConflictError] ([ErrConflict]) and never retried, and
// the owners reload their streams. Domain errors from Decide are returned
// unchanged. The one failure run again is an append refused because an
// owner's lease was revoked (a partition move, a takeover): it wrote nothing,
// the owners acquire their streams again, and the command runs once more.
//
// Spans (execute, reserve with its wait time, read, decide, append, confirm,
// cancel) and metrics (scribe.dcb.commands by outcome,
// scribe.dcb.reservation.wait, scribe.dcb.conflicts) go to the providers of
// [Config]; nothing is global.
package tagconsistency
