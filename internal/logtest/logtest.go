// Package logtest holds what tests need to read a log that other
// goroutines or processes write while the test runs.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a log sink that goroutines may write to while a test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
