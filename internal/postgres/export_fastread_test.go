package postgres

// CursorForTest is the feed's cursor of the change position (xid, seq).
func CursorForTest(xid uint64, seq int64) string {
	return changePosition{Xid: xid, Seq: seq}.cursor()
}

// CursorLSNForTest is cursor with its WAL position replaced by lsn, and the
// position it had.
func CursorLSNForTest(cursor string, lsn uint64) (string, uint64, error) {
	p, err := parseCursor(cursor)
	if err != nil {
		return "", 0, err
	}
	was := p.LSN
	p.LSN = lsn
	return p.cursor(), was, nil
}
