package childproc

import (
	"sync"
	"testing"
)

// Shared is a service a test binary starts once, on first use, and stops
// when its tests are done (from TestMain).
type Shared[T any] struct {
	once sync.Once
	mu   sync.Mutex // guards v against Stop
	v    *T
	err  error
}

// Get returns the service, starting it on the first call; started is called
// once after a successful start. It fails t when the service could not start
// or was stopped already; it never skips.
func (s *Shared[T]) Get(t testing.TB, name string, start func() (*T, error), started func(*T)) *T {
	t.Helper()
	s.once.Do(func() {
		v, err := start()
		s.mu.Lock()
		s.v, s.err = v, err
		s.mu.Unlock()
		if err == nil {
			started(v)
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		t.Fatalf("%s: %v", name, s.err)
	}
	if s.v == nil {
		t.Fatalf("%s: stopped already (called after Main's m.Run returned)", name)
	}
	return s.v
}

// Stop stops the service, if it was started, with stop.
func (s *Shared[T]) Stop(stop func(*T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v != nil {
		stop(s.v)
		s.v = nil
	}
}
