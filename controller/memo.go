package controller

import (
	"sync"
	"time"
)

// What the reconciler remembers of its own Eureka writes between passes,
// so that a registry read older than a write does not have it made again.

// writeMemo remembers when this manager last wrote something of an
// instance (set its override, cancelled it as an orphan): the registry
// read it is compared with may predate the write (it is up to a resync,
// and the server's response cache, old), and would otherwise have it sent
// again by every reconcile until it catches up. A read newer than the
// write that still disagrees is believed: the write is made again (the
// instance was cancelled and registered anew since, say).
type writeMemo struct {
	mu   sync.Mutex
	set  map[string]time.Time // by app/id
	ttl  time.Duration
	adds int
}

// setSince says whether the override of key was set after since.
func (m *writeMemo) setSince(key string, since time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.set[key]
	return ok && at.After(since)
}

func (m *writeMemo) remember(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.set == nil {
		m.set = map[string]time.Time{}
	}
	now := time.Now()
	m.set[key] = now
	// Entries of instances long gone would otherwise pile up.
	if m.adds++; m.adds%256 == 0 {
		for k, at := range m.set {
			if now.Sub(at) > m.ttl {
				delete(m.set, k)
			}
		}
	}
}

func (m *writeMemo) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.set, key)
}
