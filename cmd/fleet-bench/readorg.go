package main

import (
	"context"
	"fmt"
	"io"

	"github.com/fleetmanager/fleet-manager/internal/auth"
)

// benchOrg is the organisation the (org) read scenarios read as, without an
// admin role: it sees the clusters of the hubs it owns and, on shared hubs,
// those of its registrations.
const benchOrg = "bench-org"

// orgHubsSQL makes every tenth hub by name (10 of the default 100, one with
// --quick) benchOrg's. The load writes the clusters hub after hub, so the
// organisation's changes are runs between other hubs' in the feed's order.
const orgHubsSQL = `UPDATE hubs SET owner_org_id = $1 WHERE id IN (
	SELECT id FROM (SELECT id, row_number() OVER (ORDER BY name) AS n FROM hubs WHERE deleted_at IS NULL) AS h
	WHERE h.n % 10 = 1)`

// orgRegistrationsSQL gives benchOrg a registration, placed on its
// cluster's hub, for every hundredth cluster of each shared hub.
const orgRegistrationsSQL = `INSERT INTO registrations (id, org_id, owner, name, zone, product, phase, hub_id)
SELECT gen_random_uuid()::text, $1, 'bench-org-user', mc.name, h.zone, 'OCP', 'ready', mc.hub_id
FROM managed_clusters mc JOIN hubs h ON h.id = mc.hub_id
WHERE h.owner_org_id IS NULL AND h.deleted_at IS NULL AND mc.deleted_at IS NULL
	AND substring(mc.name FROM '[0-9]+$')::int % 100 = 0`

// orgLinkSQL links those clusters to their registrations, as the agents
// report them.
const orgLinkSQL = `UPDATE managed_clusters mc SET registration_id = r.id FROM registrations r
WHERE r.org_id = $1 AND r.hub_id = mc.hub_id AND r.name = mc.name`

// placedSQL counts the registrations placed on each hub, as placement does.
const placedSQL = `UPDATE hubs h SET placed_count = (SELECT count(*) FROM registrations r WHERE r.hub_id = h.id AND r.deleted_at IS NULL)`

// orgShare is what benchOrg was given.
type orgShare struct {
	hubs          int // hubs it owns
	registrations int // its registrations on shared hubs
}

// shareWithOrg gives benchOrg its hubs and its registrations on shared
// hubs, by SQL, before the load's VACUUM (ANALYZE).
func shareWithOrg(ctx context.Context, db *benchDB, out io.Writer) (orgShare, error) {
	var share orgShare
	tag, err := db.conn.Exec(ctx, orgHubsSQL, benchOrg)
	if err != nil {
		return share, fmt.Errorf("owning hubs as %s: %w", benchOrg, err)
	}
	share.hubs = int(tag.RowsAffected())
	if tag, err = db.conn.Exec(ctx, orgRegistrationsSQL, benchOrg); err != nil {
		return share, fmt.Errorf("registering clusters as %s: %w", benchOrg, err)
	}
	share.registrations = int(tag.RowsAffected())
	if _, err := db.conn.Exec(ctx, orgLinkSQL, benchOrg); err != nil {
		return share, fmt.Errorf("linking %s's clusters: %w", benchOrg, err)
	}
	if _, err := db.conn.Exec(ctx, placedSQL); err != nil {
		return share, fmt.Errorf("counting the placed registrations: %w", err)
	}
	fmt.Fprintf(out, "%s owns %d hubs and has %d registrations on shared hubs\n", benchOrg, share.hubs, share.registrations)
	return share, nil
}

// orgClient is c reading as benchOrg, without an admin role.
func orgClient(c *readClient, m *minter) (*readClient, error) {
	bearer, err := m.bearer(auth.TokenRequest{OrgID: benchOrg, Username: "bench-org-reader"})
	if err != nil {
		return nil, err
	}
	return &readClient{base: c.base, bearer: bearer, http: c.http}, nil
}
