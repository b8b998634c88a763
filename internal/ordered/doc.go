// Package ordered runs independent pieces of work on a few goroutines and
// hands their results back in the order of the pieces, as a sequential loop
// would (the checkpoint maker and `scribe verify` walk many streams at once
// this way).
package ordered
