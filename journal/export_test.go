package journal

import (
	"fmt"

	"github.com/google/uuid"
)

// TamperMemory rewrites the stored Data of event id in m in place, keeping it a
// valid JSON object, without touching its hashes: a stand-in for someone
// editing the storage behind the journal's back. The conformance suite uses it
// to prove that VerifyStream detects tampering.
func TamperMemory(m *Memory, id uuid.UUID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	idx, ok := m.byID[id]
	if !ok {
		return fmt.Errorf("%w: no event with ID %s to tamper with", ErrNotFound, id)
	}
	r := m.records.at(idx)
	data := []byte(`{"tampered":true`)
	if rest := r.Data[1:]; len(rest) > 1 { // r.Data is a compacted object: "{" … "}"
		data = append(data, ',')
		data = append(data, rest...)
	} else {
		data = append(data, '}')
	}
	r.Data = data
	return nil
}
