package postgres

import "gorm.io/gorm"

// servedZonesSQL is the one predicate that scopes a read to the zones this
// deployment serves: column is the zone column of the row read ("r.zone",
// "h.zone"). With no served zones configured it is "TRUE". A row of another
// zone (left from before the configuration changed) is then not found, as
// another organisation's is.
func (s *core) servedZonesSQL(column string) (string, []any) {
	if s.cfg.Zones.ServesAll() {
		return "TRUE", nil
	}
	return column + " IN ?", []any{s.cfg.Zones.Served}
}

// inServedZones adds servedZonesSQL to a query being built.
func (s *core) inServedZones(q *gorm.DB, column string) *gorm.DB {
	cond, args := s.servedZonesSQL(column)
	if args == nil {
		return q
	}
	return q.Where(cond, args...)
}
