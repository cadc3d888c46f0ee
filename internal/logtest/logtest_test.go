package logtest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestBufferKeepsConcurrentWrites: every line written from many goroutines
// is there, whole, when they are done (and go test -race sees no race).
func TestBufferKeepsConcurrentWrites(t *testing.T) {
	t.Parallel()
	var b Buffer
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, _ = fmt.Fprintf(&b, "line %d\n", i)
			_ = b.String()
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50: %q", len(lines), b.String())
	}
	for i := range 50 {
		if !strings.Contains(b.String(), fmt.Sprintf("line %d\n", i)) {
			t.Errorf("line %d missing", i)
		}
	}
}
