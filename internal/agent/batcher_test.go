package agent

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestBatcherSizeBound(t *testing.T) {
	t.Parallel()
	// A delay far longer than the test: only the size can make a batch due.
	b := newBatcher(3, time.Hour, time.Now)
	for i := range 7 {
		b.add(fmt.Sprintf("c%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range [][]string{{"c0", "c1", "c2"}, {"c3", "c4", "c5"}} {
		if got := b.next(ctx); !reflect.DeepEqual(got, want) {
			t.Fatalf("next() = %v, want %v", got, want)
		}
	}
	// One name left, not due for an hour.
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if got := b.next(short); got != nil {
		t.Errorf("next() with 1 of 3 pending and an hour to wait = %v, want nil at ctx end", got)
	}
}

func TestBatcherDelayBound(t *testing.T) {
	t.Parallel()
	const delay = 100 * time.Millisecond
	b := newBatcher(100, delay, time.Now)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	b.add("a")
	b.add("b")
	got := b.next(ctx)
	elapsed := time.Since(start)
	if !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("next() = %v, want [a b]", got)
	}
	if elapsed < delay {
		t.Errorf("next() returned after %s, want at least the delay %s", elapsed, delay)
	}
	if elapsed > delay+2*time.Second {
		t.Errorf("next() returned after %s, want about the delay %s", elapsed, delay)
	}
}

func TestBatcherWakesOnLateAdd(t *testing.T) {
	t.Parallel()
	b := newBatcher(2, time.Hour, time.Now)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan []string)
	go func() { got <- b.next(ctx) }()
	b.add("a")
	b.add("b") // fills the batch: due now, not in an hour
	if batch := <-got; !reflect.DeepEqual(batch, []string{"a", "b"}) {
		t.Errorf("next() = %v, want [a b]", batch)
	}
}

func TestBatcherCoalesces(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	b := newBatcher(10, time.Second, clock)
	for range 100 {
		b.add("same")
	}
	b.add("other", "same")
	if n := b.len(); n != 2 {
		t.Fatalf("len() after 102 adds of 2 names = %d, want 2", n)
	}
	now = now.Add(time.Second)
	batch, _ := b.take()
	if !reflect.DeepEqual(batch, []string{"same", "other"}) {
		t.Errorf("take() = %v, want [same other]", batch)
	}
	if n := b.len(); n != 0 {
		t.Errorf("len() after take = %d, want 0", n)
	}
}

func TestBatcherRequeue(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	b := newBatcher(10, time.Second, func() time.Time { return now })
	b.add("new")
	b.requeue([]string{"failed-1", "new", "failed-2"})
	// Requeued names are due at once and go first; "new" is not doubled.
	batch, wait := b.take()
	if want := []string{"failed-1", "failed-2", "new"}; !reflect.DeepEqual(batch, want) {
		t.Errorf("take() after requeue = %v (wait %s), want %v", batch, wait, want)
	}
}
