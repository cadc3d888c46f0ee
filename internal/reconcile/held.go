package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
)

// heldClaims are claims this replica holds but whose pass lost the
// database: a claim whose answer never came back (the queue returns the
// rows it may hold with its error), or outcomes the database never took.
// The replica is alive and holds their tokens, so it frees them as soon as
// the database answers, and the next claim takes them again at once. Only a
// dead replica's claims wait for their lease's end.
//
// Freeing needs no trust in timing: the queue touches only rows that still
// hold the token, so a row another replica claimed after the lease ran out
// is left alone, and nothing a pass recorded is undone (a recorded outcome
// cleared the token).
type heldClaims struct {
	mu   sync.Mutex
	held []heldClaim
}

// heldClaim is one claim's rows left unfinished.
type heldClaim struct {
	token string
	// ids are the rows; nil for a queue that finds a claim's rows by its
	// token alone (pools, DNS zones).
	ids []string
	// until is the lease's end by this replica's clock, counted from before
	// the claim: past it the rows are due by themselves.
	until time.Time
}

// releaseFunc frees the rows among ids that still hold token, and returns
// how many it freed (fleet.RegistrationQueue.ReleaseRegistrations).
type releaseFunc func(ctx context.Context, token string, ids []string) (int, error)

// add holds the rows ids of the claim named by token until they are freed,
// or until the lease's end.
func (h *heldClaims) add(token string, ids []string, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held = append(h.held, heldClaim{token: token, ids: ids, until: until})
}

// addClaims holds the registrations of claims, grouped by their token.
func (h *heldClaims) addClaims(claims []fleet.Claim, until time.Time) {
	byToken := map[string][]string{}
	var tokens []string
	for _, c := range claims {
		if _, ok := byToken[c.Token]; !ok {
			tokens = append(tokens, c.Token)
		}
		byToken[c.Token] = append(byToken[c.Token], c.Registration.ID)
	}
	for _, token := range tokens {
		h.add(token, byToken[token], until)
	}
}

// claimHeld claims with claim, given a token drawn for each try as the
// claim's owner, until the database answers (untilAnswered), for a queue
// whose claims give each row the owner, "/" and a uuid of its own, and
// whose free finds a claim's rows by that prefix (pool_mgr, dns_mgr). A try
// that fails may hold rows it could not return: each try first frees what
// the failed ones hold. It returns the claims and their lease's end,
// counted from before the try that claimed them.
func claimHeld[T any](ctx context.Context, h *heldClaims, owner string, lease time.Duration,
	free func(ctx context.Context, token string) (int, error), claim func(ctx context.Context, token string) ([]T, error)) ([]T, time.Time, error) {
	freeToken := func(ctx context.Context, token string, _ []string) (int, error) { return free(ctx, token) }
	var leaseEnd time.Time
	claims, err := untilAnswered(ctx, func(ctx context.Context) ([]T, error) {
		if _, err := h.release(ctx, freeToken); err != nil {
			return nil, err
		}
		token := claimToken(owner)
		leaseEnd = time.Now().Add(lease)
		claims, err := claim(ctx, token)
		if err != nil {
			h.add(token, nil, leaseEnd)
			return nil, err
		}
		return claims, nil
	})
	return claims, leaseEnd, err
}

// claimToken is a claim's token: owner, "/" and a uuid drawn for it.
func claimToken(owner string) string { return owner + "/" + uuid.NewString() }

// pending reports whether claims wait to be freed.
func (h *heldClaims) pending() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held) > 0
}

// release frees every held claim whose lease has not ended with free, and
// forgets it; a claim whose lease ended is forgotten unfreed, as its rows
// are due already. It returns how many rows it freed. On the first failure
// it keeps that claim and the ones after it, and returns the error: the
// caller tries again when the database answers (untilAnswered).
func (h *heldClaims) release(ctx context.Context, free releaseFunc) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	freed := 0
	for len(h.held) > 0 {
		c := h.held[0]
		if time.Now().Before(c.until) {
			n, err := free(ctx, c.token, c.ids)
			if err != nil {
				return freed, err
			}
			freed += n
		}
		h.held = h.held[1:]
	}
	h.held = nil
	return freed, nil
}
