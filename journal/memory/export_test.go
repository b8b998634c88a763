package memory

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/scribe-es/scribe/journal"
)

// TamperMemory rewrites the stored Data of event id in m in place, keeping it a
// valid JSON object, without touching its hashes: a stand-in for someone
// editing the storage behind the journal's back. The conformance suite uses it
// to prove that VerifyStream detects tampering.
func TamperMemory(m *Journal, id uuid.UUID) error { return AlterMemory(m, id, "data") }

// AlterMemory changes one field of the stored event id in m in place, without
// touching its hashes: "data" (still a JSON object), "type", "metadata" (the
// correlation ID) or "recordedAt" (one microsecond later).
func AlterMemory(m *Journal, id uuid.UUID, field string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idx, ok := m.byID[id]
	if !ok {
		return fmt.Errorf("%w: no event with ID %s to tamper with", journal.ErrNotFound, id)
	}
	r := m.records.at(idx)
	switch field {
	case "data":
		data := []byte(`{"tampered":true`)
		if rest := r.Data[1:]; len(rest) > 1 { // r.Data is a compacted object: "{" … "}"
			data = append(data, ',')
			data = append(data, rest...)
		} else {
			data = append(data, '}')
		}
		r.Data = data
	case "type":
		r.Type += "Forged"
	case "metadata":
		r.Metadata.CorrelationID += "-forged"
	case "recordedAt":
		r.RecordedAt = r.RecordedAt.Add(time.Microsecond)
	default:
		return fmt.Errorf("AlterMemory: unknown field %q", field)
	}
	return nil
}

// RemoveMemory removes event id from the streams of m, as a DELETE of its row
// behind the journal's back would, leaving each stream's recorded head (its
// version and head hash) as it was.
func RemoveMemory(m *Journal, id uuid.UUID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idx, ok := m.byID[id]
	if !ok {
		return fmt.Errorf("%w: no event with ID %s to remove", journal.ErrNotFound, id)
	}
	r := m.records.at(idx)
	for _, l := range r.Links {
		s := m.streams[journal.StreamID{Partition: r.Partition(), Tag: l.Tag}]
		s.records = slices.DeleteFunc(s.records, func(i int) bool { return i == idx })
	}
	return nil
}

// SwapMemory exchanges the events at versions v and w of stream in m, as if
// their stored order had been rewritten.
func SwapMemory(m *Journal, stream journal.StreamID, v, w uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.streams[stream.Normalize()]
	if s == nil || v == 0 || w == 0 || v > uint64(len(s.records)) || w > uint64(len(s.records)) {
		return fmt.Errorf("%w: stream %s has no versions %d and %d to swap", journal.ErrNotFound, stream, v, w)
	}
	s.records[v-1], s.records[w-1] = s.records[w-1], s.records[v-1]
	return nil
}
