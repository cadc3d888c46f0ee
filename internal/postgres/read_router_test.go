package postgres

import (
	"context"
	"testing"
)

// fakeRouter is a ReadRouter that runs every read on its own pool and
// records the kinds it was asked.
type fakeRouter struct {
	serving bool
	pool    *DB
	kinds   []string
}

func (r *fakeRouter) Read(_ context.Context, kind string, fn func(db *DB) error) error {
	r.kinds = append(r.kinds, kind)
	return fn(r.pool)
}

func (r *fakeRouter) Serving() bool { return r.serving }

// TestWithReplicaRoutesHeavyReads checks the store's routing: without a
// router every heavy read runs on the primary's pool and no cursor needs a WAL
// position; with a router, the router runs them, and cursors need the
// position only when it serves a replica.
func TestWithReplicaRoutesHeavyReads(t *testing.T) {
	t.Parallel()
	primary, replica := &DB{name: "primary"}, &DB{name: "replica"}
	base := newStore(&core{db: primary})
	for _, tc := range []struct {
		name       string
		router     ReadRouter
		wantPool   *DB
		replicated bool
	}{
		{"none", nil, primary, false},
		{"not serving", &fakeRouter{pool: primary}, primary, false},
		{"serving", &fakeRouter{serving: true, pool: replica}, replica, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base.WithReplica(tc.router)
			var got *DB
			if err := s.heavyRead(context.Background(), readInventoryList, func(db *DB) error { got = db; return nil }); err != nil {
				t.Fatalf("heavyRead() = %v", err)
			}
			if got != tc.wantPool {
				t.Errorf("heavyRead() ran on %q, want %q", got.name, tc.wantPool.name)
			}
			if r := s.replicated(); r != tc.replicated {
				t.Errorf("replicated() = %v, want %v", r, tc.replicated)
			}
			if f, ok := tc.router.(*fakeRouter); ok && (len(f.kinds) != 1 || f.kinds[0] != readInventoryList) {
				t.Errorf("router asked for %q, want [%s]", f.kinds, readInventoryList)
			}
			if base.replica != nil {
				t.Errorf("WithReplica() changed the store it was called on")
			}
		})
	}
}
