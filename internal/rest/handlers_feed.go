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

// handleManagedClusterChangeList is the inventory's change feed (followFeed).
func (s *Server) handleManagedClusterChangeList(w http.ResponseWriter, r *http.Request) error {
	p, err := s.feedParams(r)
	if err != nil {
		return err
	}
	id := caller(r)
	admin := s.subject(r).FleetViewer
	return followFeed(s, w, r, p, func(after string) (fleet.ChangePage, feedStatus, error) {
		page, err := s.services.Feed.ListManagedClusterChanges(r.Context(), id, admin, after, p.size)
		return page, feedStatus{items: len(page.Items), cursor: page.Cursor, pending: page.Pending}, err
	}, s.writeChanges)
}

// feedParams are the query parameters every change feed takes.
type feedParams struct {
	after string
	size  int
	wait  time.Duration // capped by FeedMaxWait
}

// feedParams reads after, size and wait.
func (s *Server) feedParams(r *http.Request) (feedParams, error) {
	q := r.URL.Query()
	p := feedParams{after: q.Get("after"), size: defaultFeedSize}
	if v, err := strconv.Atoi(q.Get("size")); err == nil && v > 0 {
		p.size = v
	}
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return p, fleet.Errorf(fleet.CodeValidation, "query parameter wait must be a duration such as 30s")
		}
		p.wait = min(d, s.cfg.FeedMaxWait)
	}
	return p, nil
}

// feedStatus is what followFeed needs of a page: how many items it holds,
// its cursor, and whether changes are held back by an older transaction.
type feedStatus struct {
	items   int
	cursor  string
	pending bool
}

// followFeed answers a change feed's request: at once when read finds
// changes after the cursor the caller may see, else when an inventory write
// commits (woken through pg_notify on whichever replica holds the request),
// else at `wait` with no items. Unlike the agents' long-poll it answers 200
// then, not 304: the cursor moves past the changes the caller may not see,
// and the caller keeps it.
func followFeed[P any](s *Server, w http.ResponseWriter, r *http.Request, p feedParams,
	read func(after string) (P, feedStatus, error), write func(http.ResponseWriter, P) error) error {
	ctx, cancel := context.WithTimeout(r.Context(), p.wait)
	defer cancel()
	after := p.after
	for {
		// Subscribe before reading, so a change between the two is not missed.
		woken, stop := s.services.InventoryChanges.WaitInventory()
		page, status, err := read(after)
		if err != nil {
			stop()
			return err
		}
		if status.items > 0 || p.wait <= 0 {
			stop()
			return write(w, page)
		}
		after = status.cursor
		var recheck <-chan time.Time
		if status.pending {
			recheck = time.After(feedRecheck)
		}
		select {
		case <-woken:
		case <-recheck:
		case <-s.draining:
			// Shutting down: the consumer polls again, on another replica.
			stop()
			return write(w, page)
		case <-ctx.Done():
			stop()
			if r.Context().Err() != nil {
				return nil // the consumer went away
			}
			return write(w, page)
		}
	}
}

func (s *Server) writeChanges(w http.ResponseWriter, page fleet.ChangePage) error {
	items := make([]managedClusterChangeJSON, len(page.Items))
	for i, c := range page.Items {
		items[i] = managedClusterChangeJSON{change: public.ManagedClusterChange{DeletedAt: c.DeletedAt},
			cluster: s.presentManagedCluster(c.Cluster)}
	}
	return s.writeAppendedJSON(w, http.StatusOK, managedClusterChangeListJSON{list: public.ManagedClusterChangeList{
		Kind: public.ManagedClusterChangeListKindManagedClusterChangeList, Size: len(items), Cursor: page.Cursor}, items: items})
}
