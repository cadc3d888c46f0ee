package postgres

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFastReadColumnsCoverTheirRows checks the column lists of the fast
// path against their rows (newColumns would have panicked at init: this
// says which list and why), and the feed's as the list's and three more.
func TestFastReadColumnsCoverTheirRows(t *testing.T) {
	t.Parallel()
	if err := checkColumns(managedClusterColumns.list); err != nil {
		t.Errorf("checkColumns(managedClusterColumns) = %v", err)
	}
	if err := checkColumns(feedColumns.list); err != nil {
		t.Errorf("checkColumns(feedColumns) = %v", err)
	}
	var mc managedClusterRow
	var feed feedRow
	if got, want := len(feed.fields()), len(mc.fields())+3; got != want || len(mc.fields()) != len(managedClusterColumns.list) {
		t.Errorf("feedRow.fields() has %d destinations, managedClusterRow.fields() %d; want %d and %d",
			got, len(mc.fields()), want, len(managedClusterColumns.list))
	}
	if !strings.HasPrefix(feedColumns.sql, managedClusterColumns.sql+", ") {
		t.Errorf("feedColumns.sql = %q; want managedClusterColumns' first", feedColumns.sql)
	}
}

// checkedRow is a row for TestCheckColumnsRefusesAMismatch.
type checkedRow struct {
	A, B string
	At   time.Time
	In   struct{ C int } `gorm:"embedded"`
}

// TestCheckColumnsRefusesAMismatch gives checkColumns lists that do not
// match their row, one way each, and one that does.
func TestCheckColumnsRefusesAMismatch(t *testing.T) {
	t.Parallel()
	a := column[checkedRow]{"a", func(r *checkedRow) any { return &r.A }}
	b := column[checkedRow]{"b", func(r *checkedRow) any { return &r.B }}
	at := column[checkedRow]{"at", func(r *checkedRow) any { return &r.At }}
	c := column[checkedRow]{"c", func(r *checkedRow) any { return &r.In.C }}
	var elsewhere string
	cases := []struct {
		name string
		list []column[checkedRow]
		want string // in the error; "" for none
	}{
		{"every field once", []column[checkedRow]{a, b, at, c}, ""},
		{"in another order", []column[checkedRow]{c, at, b, a}, ""},
		{"a field without a column", []column[checkedRow]{a, at, c}, "field B has no column"},
		{"an embedded field without a column", []column[checkedRow]{a, b, at}, "field In.C has no column"},
		{"two columns into one field", []column[checkedRow]{a, b, at, c, {"a2", a.into}}, `columns "a" and "a2" scan into one field`},
		{"a column into no field of the row", []column[checkedRow]{a, b, at, c,
			{"x", func(*checkedRow) any { return &elsewhere }}}, `column "x" scans into no field`},
		{"a column into a value", []column[checkedRow]{a, b, at, {"c", func(r *checkedRow) any { return r.In.C }}},
			`column "c" scans into 0, not a field's address`},
		{"a column into nil", []column[checkedRow]{a, b, at, {"c", func(*checkedRow) any { return nil }}},
			`column "c" scans into <nil>`},
		{"a column without SQL", []column[checkedRow]{a, b, at, {" ", c.into}}, "column 3 has no SQL"},
		{"a column without a destination", []column[checkedRow]{a, b, at, {"c", nil}}, "column 3 has no SQL or no destination"},
	}
	for _, tc := range cases {
		err := checkColumns(tc.list)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: checkColumns() = %v; want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: checkColumns() = %v; want an error with %q", tc.name, err, tc.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("newColumns(a, at, c) did not panic; want a panic for the missing B")
		}
	}()
	newColumns(a, at, c)
}

// TestAppendScannedRefusesAnotherColumnCount checks that a statement whose
// column count is not its row's is an error, not padded or cut, and that a
// failed statement's error is not taken for one.
func TestAppendScannedRefusesAnotherColumnCount(t *testing.T) {
	t.Parallel()
	n := len(managedClusterColumns.list)
	for _, columns := range []int{n - 1, n + 1, n + 2} {
		var rows []managedClusterRow
		err := appendScanned(&twoRows{}, &rows, func() int { return columns })
		if err == nil || !strings.Contains(err.Error(), "columns") || len(rows) != 0 {
			t.Errorf("appendScanned(%d columns) = %v, %d rows; want an error and no row", columns, err, len(rows))
		}
	}
	var rows []managedClusterRow
	if err := appendScanned(&twoRows{}, &rows, func() int { return n }); err != nil || len(rows) != 2 {
		t.Errorf("appendScanned(%d columns) = %v, %d rows; want two rows", n, err, len(rows))
	}
	failed := errors.New("the statement failed")
	rows = nil
	if err := appendScanned(&twoRows{read: 2, err: failed}, &rows, func() int { return 0 }); err != failed || len(rows) != 0 {
		t.Errorf("appendScanned(a failed statement) = %v, %d rows; want its error and no row", err, len(rows))
	}
}

// twoRows is a rowScanner of two rows that scans nothing into their
// destinations, then err.
type twoRows struct {
	read int
	err  error
}

func (r *twoRows) Next() bool {
	r.read++
	return r.read <= 2
}
func (r *twoRows) Scan(...any) error { return nil }
func (r *twoRows) Err() error        { return r.err }
