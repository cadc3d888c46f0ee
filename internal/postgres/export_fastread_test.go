package postgres

// CursorForTest is the feed's cursor of the change position (xid, seq).
func CursorForTest(xid uint64, seq int64) string {
	return changePosition{Xid: xid, Seq: seq}.cursor()
}
