package rest

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/pkg/api/public"
)

// defaultFeedSize is the page size of the change feed when none is asked.
const defaultFeedSize = 100

// feedRecheck is how soon a waiting feed reads again when changes are
// committed but held back by an older transaction still running, whose
// commit may notify nothing.
const feedRecheck = 200 * time.Millisecond

// handleManagedClusterChangeList is the inventory's change feed: it answers
// at once when there are changes after the cursor the caller may see, else
// when an inventory write commits (woken through pg_notify on whichever
// replica holds the request), else at `wait` with no items. Unlike the
// agents' long-poll it answers 200 then, not 304: the cursor moves past the
// changes the caller may not see, and the caller keeps it.
func (s *Server) handleManagedClusterChangeList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	after := q.Get("after")
	size := defaultFeedSize
	if v, err := strconv.Atoi(q.Get("size")); err == nil && v > 0 {
		size = v
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fleet.Errorf(fleet.CodeValidation, "wait %q is not a duration", v)
		}
		wait = min(d, s.cfg.FeedMaxWait)
	}
	id := caller(r)
	admin := hasAnyRole(id, s.cfg.AdminReadRoles)
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	for {
		// Subscribe before reading, so a change between the two is not missed.
		woken, stop := s.services.InventoryChanges.WaitInventory()
		page, err := s.services.Feed.ListManagedClusterChanges(r.Context(), id, admin, after, size)
		if err != nil {
			stop()
			return err
		}
		if len(page.Items) > 0 || wait <= 0 {
			stop()
			return writeChanges(w, page)
		}
		after = page.Cursor
		var recheck <-chan time.Time
		if page.Pending {
			recheck = time.After(feedRecheck)
		}
		select {
		case <-woken:
		case <-recheck:
		case <-s.draining:
			// Shutting down: the consumer polls again, on another replica.
			stop()
			return writeChanges(w, page)
		case <-ctx.Done():
			stop()
			if r.Context().Err() != nil {
				return nil // the consumer went away
			}
			return writeChanges(w, page)
		}
	}
}

func writeChanges(w http.ResponseWriter, page fleet.ChangePage) error {
	items := make([]public.ManagedClusterChange, len(page.Items))
	for i, c := range page.Items {
		items[i] = public.ManagedClusterChange{Cluster: presentManagedCluster(c.Cluster), DeletedAt: c.DeletedAt}
	}
	writeJSON(w, http.StatusOK, public.ManagedClusterChangeList{Kind: public.ManagedClusterChangeListKindManagedClusterChangeList,
		Size: len(items), Cursor: page.Cursor, Items: items})
	return nil
}
