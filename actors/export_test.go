package actors

import "time"

// SetCompletionLinger makes every completion linger of h last d unless its
// callers come back first. Call it before h runs commands.
func (h *Host) SetCompletionLinger(d time.Duration) { h.lingerFor = d }
