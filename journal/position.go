package journal

import (
	"fmt"
	"strconv"
	"strings"
)

// Position is an event's place in the journal's single global order. Positions
// are totally ordered by (Commit, Seq). Commit orders commits (in Postgres, the
// appending transaction's ID; in memory, a commit counter) and Seq orders events
// (a global sequence). The zero Position lies before every event.
//
// Readers that ask for "everything after P" never skip an event that commits
// later with a lower position: backends only expose positions below which no
// commit is still in flight.
type Position struct {
	Commit uint64
	Seq    uint64
}

// IsZero reports whether p is the zero position (before every event).
func (p Position) IsZero() bool { return p == Position{} }

// Compare returns -1, 0 or +1 as p is before, equal to, or after q.
func (p Position) Compare(q Position) int {
	switch {
	case p.Commit < q.Commit:
		return -1
	case p.Commit > q.Commit:
		return 1
	case p.Seq < q.Seq:
		return -1
	case p.Seq > q.Seq:
		return 1
	}
	return 0
}

// Before reports whether p sorts before q.
func (p Position) Before(q Position) bool { return p.Compare(q) < 0 }

// After reports whether p sorts after q.
func (p Position) After(q Position) bool { return p.Compare(q) > 0 }

// String renders "commit.seq", e.g. "812.4031"; ParsePosition reads it back.
func (p Position) String() string {
	return strconv.FormatUint(p.Commit, 10) + "." + strconv.FormatUint(p.Seq, 10)
}

// MarshalText implements encoding.TextMarshaler with the String form.
func (p Position) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParsePosition.
func (p *Position) UnmarshalText(b []byte) error {
	q, err := ParsePosition(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// ParsePosition parses the String form of a Position ("commit.seq", two
// unsigned decimal integers). The empty string parses as the zero Position.
func ParsePosition(s string) (Position, error) {
	if s == "" {
		return Position{}, nil
	}
	c, q, ok := strings.Cut(s, ".")
	if !ok {
		return Position{}, fmt.Errorf("journal: position %q: want \"<commit>.<seq>\", two unsigned integers joined by a dot (e.g. \"812.4031\")", s)
	}
	commit, err1 := strconv.ParseUint(c, 10, 64)
	seq, err2 := strconv.ParseUint(q, 10, 64)
	if err1 != nil || err2 != nil {
		return Position{}, fmt.Errorf("journal: position %q: want \"<commit>.<seq>\", two unsigned integers joined by a dot (e.g. \"812.4031\")", s)
	}
	return Position{Commit: commit, Seq: seq}, nil
}
