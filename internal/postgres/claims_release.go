package postgres

import (
	"context"
	"fmt"
)

// ReleasePools frees the capacity pools a ClaimPools called with token as
// its owner still holds (fleet.PoolQueue.ReleasePools).
func (s *PoolStore) ReleasePools(ctx context.Context, token string) (int, error) {
	return s.releaseClaimsOf(ctx, "capacity_pools", token)
}

// ReleaseDNSZones frees the DNS zones a ClaimDNSZones called with token as
// its owner still holds (fleet.DNSQueue.ReleaseDNSZones).
func (s *DNSStore) ReleaseDNSZones(ctx context.Context, token string) (int, error) {
	return s.releaseClaimsOf(ctx, "dns_zones", token)
}

// releaseClaimsOf frees the rows of table (a queue table's name, never
// input) that still hold a claim made with token as its owner, and returns
// how many. ClaimPools and ClaimDNSZones draw a uuid per row after the owner
// they are given, so a caller that gives its own token as the owner finds
// every row of that claim by the prefix, even those of a claim whose answer
// it lost. A row another claim took since holds another prefix and is left
// alone; one whose pass was recorded holds none. The claim does not move a
// row's next pass, so a freed row is as due as it was when claimed.
func (s *core) releaseClaimsOf(ctx context.Context, table, token string) (int, error) {
	res := s.db.Gorm.WithContext(ctx).Exec(`UPDATE `+table+` SET claimed_by = NULL, claimed_until = NULL
WHERE starts_with(claimed_by, ?)`, token+"/")
	if res.Error != nil {
		return 0, fmt.Errorf("release claims of %s: %w", table, res.Error)
	}
	return int(res.RowsAffected), nil
}
