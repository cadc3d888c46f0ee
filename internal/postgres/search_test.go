package postgres_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetmanager/fleet-manager/internal/fleet"
	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// sampleSchema is the schema of the tests' table t.
func sampleSchema() postgres.SearchSchema {
	return postgres.SearchSchema{
		"name":       {Column: "t.name", Type: postgres.FieldText},
		"region":     {Column: "t.region", Type: postgres.FieldText},
		"created_at": {Column: "t.created_at", Type: postgres.FieldTimestamp},
		"capacity":   {Column: "t.capacity", Type: postgres.FieldInteger},
		"enabled":    {Column: "t.enabled", Type: postgres.FieldBool},
		"labels":     {Column: "t.labels", Type: postgres.FieldLabels},
	}
}

// buildSearch parses q and translates it over sampleSchema.
func buildSearch(q string) (string, []any, error) {
	expr, err := fleet.ParseSearch(q)
	if err != nil {
		return "", nil, err
	}
	return postgres.BuildSearch(expr, sampleSchema())
}

type buildSearchTest struct {
	q    string
	sql  string
	args []any
}

func buildSearchTests() []buildSearchTest {
	jan1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return []buildSearchTest{
		{"", "", nil},
		{"name = 'a'", "t.name = ?", []any{"a"}},
		{"name = 'a' and region in ('x','y') and labels.env = 'prod'",
			"((t.name = ? AND t.region IN (?, ?)) AND (t.labels ->> ?) = ?)", []any{"a", "x", "y", "env", "prod"}},
		{"name = 'a' or region = 'b' and capacity = 3",
			"(t.name = ? OR (t.region = ? AND t.capacity = ?))", []any{"a", "b", int64(3)}},
		{"(name = 'a' or region = 'b') and capacity = 3",
			"((t.name = ? OR t.region = ?) AND t.capacity = ?)", []any{"a", "b", int64(3)}},
		{"not (name = 'a' or name = 'b')", "NOT ((t.name = ? OR t.name = ?))", []any{"a", "b"}},
		{"name != 'a' and name <> 'b'", "(t.name <> ? AND t.name <> ?)", []any{"a", "b"}},
		{"name like 'prod-%'", "t.name LIKE ?", []any{"prod-%"}},
		{"name not ilike '%X%'", "t.name NOT ILIKE ?", []any{"%X%"}},
		{"region is null or region is not null", "(t.region IS NULL OR t.region IS NOT NULL)", nil},
		{"region not in ('eu')", "t.region NOT IN (?)", []any{"eu"}},
		{"created_at > '2026-01-01T00:00:00Z'", "t.created_at > ?", []any{jan1}},
		{"created_at <= '2026-01-01T01:00:00+01:00'", "t.created_at <= ?", []any{jan1}},
		{"created_at < '2026-01-01'", "t.created_at < ?", []any{jan1}},
		{"capacity in (1, 2) and capacity >= -5", "(t.capacity IN (?, ?) AND t.capacity >= ?)", []any{int64(1), int64(2), int64(-5)}},
		{"enabled = true", "t.enabled = ?", []any{true}},
		{"labels.env is null", "NOT jsonb_exists(t.labels, ?)", []any{"env"}},
		{"labels.app.kubernetes.io/name is not null", "jsonb_exists(t.labels, ?)", []any{"app.kubernetes.io/name"}},
		{"labels.env in ('prod', 'dev')", "(t.labels ->> ?) IN (?, ?)", []any{"env", "prod", "dev"}},
		{"labels.env like 'pr%'", "(t.labels ->> ?) LIKE ?", []any{"env", "pr%"}},
		{"name = 'x'' or 1=1 --'", "t.name = ?", []any{"x' or 1=1 --"}},
	}
}

// argsEqual compares arguments, times by instant.
func argsEqual(got, want []any) bool {
	return slices.EqualFunc(got, want, func(g, w any) bool {
		if gt, ok := g.(time.Time); ok {
			wt, ok := w.(time.Time)
			return ok && gt.Equal(wt)
		}
		return reflect.DeepEqual(g, w)
	})
}

func TestBuildSearch(t *testing.T) {
	t.Parallel()
	for _, tt := range buildSearchTests() {
		sql, args, err := buildSearch(tt.q)
		if err != nil || sql != tt.sql || !argsEqual(args, tt.args) {
			t.Errorf("BuildSearch(%q) = %q, %v, %v, want %q, %v", tt.q, sql, args, err, tt.sql, tt.args)
		}
	}
}

type buildSearchErrorTest struct {
	q   string
	pos int
	msg string
}

func buildSearchErrorTests() []buildSearchErrorTest {
	return []buildSearchErrorTest{
		{"foo = 1", 1, "unknown field; searchable fields: capacity, created_at, enabled, labels, name, region"},
		{"name = 'a' and foo.bar = 1", 16, "unknown field;"},
		{"labels = 'x'", 1, "field 'labels' needs a key, as in 'labels.env'"},
		{"name.x = 'a'", 1, "field 'name' has no keys; write 'name' alone"},
		{"name = 5", 8, "field 'name' wants a quoted string, found a number"},
		{"region in ('eu', 3)", 18, "field 'region' wants a quoted string, found a number"},
		{"capacity = '5'", 12, "field 'capacity' wants a 32-bit integer, found a string"},
		{"capacity = 1.5", 12, "field 'capacity' wants a 32-bit integer, found a number"},
		{"capacity = 2147483648", 12, "field 'capacity' wants a 32-bit integer, found a number"},
		{`name like 'alpha\'`, 11, `a like pattern may not end with an escaping '\'`},
		{`labels.env not ilike '\\\'`, 22, `a like pattern may not end with an escaping '\'`},
		{"created_at > 'yesterday'", 14, "field 'created_at' wants a quoted RFC 3339 timestamp (2026-01-02T15:04:05Z) or date (2026-01-02), found a string"},
		{"created_at > '2026-02-30'", 14, "field 'created_at' wants a quoted RFC 3339"},
		{"created_at > 5", 14, "field 'created_at' wants a quoted RFC 3339"},
		{"created_at like '2026%'", 1, "operator 'like' does not apply to timestamp field 'created_at'"},
		{"capacity not ilike '1%'", 1, "operator 'not ilike' does not apply to integer field 'capacity'"},
		{"enabled > true", 1, "operator '>' does not apply to boolean field 'enabled'"},
		{"enabled = 'yes'", 11, "field 'enabled' wants true or false, found a string"},
		{"labels.env = 1", 14, "field 'labels' wants a quoted string, found a number"},
		{"not (name = 'a' or labels.env = true)", 33, "field 'labels' wants a quoted string, found true or false"},
	}
}

func TestBuildSearchErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range buildSearchErrorTests() {
		sql, args, err := buildSearch(tt.q)
		var se *fleet.SearchError
		want := fmt.Sprintf("position %d: %s", tt.pos, tt.msg)
		if !errors.As(err, &se) || se.Pos != tt.pos || !strings.Contains(err.Error(), want) {
			t.Errorf("BuildSearch(%q) = %q, %v, %v, want error %q", tt.q, sql, args, err, want)
			continue
		}
		if code := fleet.ErrorCodeOf(err); code != fleet.CodeBadSearch {
			t.Errorf("BuildSearch(%q) error code = %d, want %d", tt.q, code, fleet.CodeBadSearch)
		}
	}
}

func TestParseOrderBy(t *testing.T) {
	t.Parallel()
	allowed := map[string]string{"name": "t.name", "created_at": "t.created_at", "region": "t.region"}
	tests := []struct {
		s    string
		want string
		err  string
	}{
		{"", "", ""},
		{"  ", "", ""},
		{"name", "t.name ASC", ""},
		{"name asc, created_at DESC", "t.name ASC, t.created_at DESC", ""},
		{" region   Desc ,name", "t.region DESC, t.name ASC", ""},
		{"foo", "", "unknown orderBy field in term 1; allowed fields: created_at, name, region"},
		{"Name", "", "unknown orderBy field in term 1"},
		{"name;drop", "", "unknown orderBy field in term 1"},
		{"name up", "", "invalid orderBy direction for 'name'; use asc or desc"},
		{"name asc desc", "", "invalid orderBy term 1:"},
		{"name,", "", "invalid orderBy term 2:"},
		{"name, name desc", "", "orderBy names 'name' more than once"},
	}
	for _, tt := range tests {
		got, err := postgres.ParseOrderBy(tt.s, allowed)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseOrderBy(%q) = %q, %v, want %q", tt.s, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseOrderBy(%q) = %q, %v, want error %q", tt.s, got, err, tt.err)
		case tt.err != "" && fleet.ErrorCodeOf(err) != fleet.CodeBadOrderBy:
			t.Errorf("ParseOrderBy(%q) error code = %d, want %d", tt.s, fleet.ErrorCodeOf(err), fleet.CodeBadOrderBy)
		}
	}
}

type searchRowsTest struct {
	q    string
	want []string
}

func searchRowsTests() []searchRowsTest {
	all := []string{"alpha", "bravo", "charlie", "delta", "echo", "it's", "prod-foxtrot", "prod-golf"}
	return []searchRowsTest{
		{"name = 'alpha'", []string{"alpha"}},
		{"name = 'it''s'", []string{"it's"}},
		{"name = 'x'' or ''1''=''1'", nil},
		{"region in ('eu','ap') and labels.env = 'prod'", []string{"alpha", "delta", "prod-golf"}},
		{"name like 'prod-%'", []string{"prod-foxtrot", "prod-golf"}},
		{"name like 'prod-%' or (region = 'eu' and created_at >= '2026-01-01T00:00:00Z')", []string{"alpha", "prod-foxtrot", "prod-golf"}},
		{"name ilike '%O%' and not name like 'prod%'", []string{"bravo", "echo"}},
		{"region != 'eu'", []string{"bravo", "delta", "echo", "it's"}},
		{"not region = 'eu'", []string{"bravo", "delta", "echo", "it's"}},
		{"region is null", []string{"prod-foxtrot"}},
		{"capacity > 30", []string{"delta", "it's", "prod-foxtrot", "prod-golf"}},
		{"capacity is null", []string{"echo"}},
		{"capacity in (10, 20) or capacity not in (10, 20, 30, 40, 60, 70, 80)", []string{"alpha", "bravo"}},
		{"enabled = true", []string{"alpha", "charlie", "delta", "prod-foxtrot"}},
		{"enabled = false or enabled is null", []string{"bravo", "echo", "it's", "prod-golf"}},
		{"labels.env is null", []string{"charlie", "prod-foxtrot"}},
		{"labels.app.kubernetes.io/name = 'web'", []string{"prod-foxtrot"}},
		{"labels.app.kubernetes.io/name is not null", []string{"alpha", "prod-foxtrot"}},
		{"labels.env ilike 'PROD'", []string{"alpha", "delta", "it's", "prod-golf"}},
		{"labels.env like 'prod'", []string{"alpha", "delta", "prod-golf"}},
		{"labels.env not in ('prod', 'dev')", []string{"echo", "it's"}},
		{"not (labels.env = 'prod' or labels.env is null)", []string{"bravo", "echo", "it's"}},
		{"created_at < '2026-01-01'", []string{"charlie"}},
		{"created_at >= '2026-01-01T01:00:00+01:00'", slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == "charlie" })},
		{"", all},
		{`name like 'alpha\\' or name ilike '\\%'`, nil},
		{"capacity = 2147483647 or capacity < -2147483648", nil},
		{"created_at < '0000-01-01T00:00:00Z' or created_at > '9999-12-31T23:59:59.999999999+23:59'", nil},
	}
}

// createSearchTable creates and fills the table t of sampleSchema.
func createSearchTable(t *testing.T, db *postgres.DB) {
	t.Helper()
	rows := []struct {
		name, region     any
		created          string
		capacity, enable any
		labels           string
	}{
		{"alpha", "eu", "2026-01-01T00:00:00Z", 10, true, `{"env":"prod","app.kubernetes.io/name":"api"}`},
		{"bravo", "us", "2026-02-01T00:00:00Z", 20, false, `{"env":"dev"}`},
		{"charlie", "eu", "2025-12-31T23:00:00Z", 30, true, `{}`},
		{"delta", "ap", "2026-03-15T12:00:00Z", 40, true, `{"env":"prod","tier":"gold"}`},
		{"echo", "us", "2026-01-15T00:00:00Z", nil, false, `{"env":"staging"}`},
		{"prod-foxtrot", nil, "2026-04-01T00:00:00Z", 60, true, `{"app.kubernetes.io/name":"web"}`},
		{"prod-golf", "eu", "2026-05-01T00:00:00Z", 70, nil, `{"env":"prod"}`},
		{"it's", "ap", "2026-06-01T00:00:00Z", 80, false, `{"env":"Prod"}`},
	}
	err := db.Gorm.Exec(`CREATE TABLE t (name text PRIMARY KEY, region text, created_at timestamptz NOT NULL,
		capacity integer, enabled boolean, labels jsonb NOT NULL)`).Error
	if err != nil {
		t.Fatalf("CREATE TABLE t: %v", err)
	}
	for _, r := range rows {
		err := db.Gorm.Exec("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?::jsonb)",
			r.name, r.region, r.created, r.capacity, r.enable, r.labels).Error
		if err != nil {
			t.Fatalf("INSERT INTO t (%v): %v", r.name, err)
		}
	}
}

// TestBuildSearchRuns executes the translated SQL against PostgreSQL.
func TestBuildSearchRuns(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, pgtest.NewDatabase(t))
	createSearchTable(t, db)
	for _, tt := range buildSearchTests() {
		if tt.sql == "" {
			continue
		}
		var got []string
		if err := db.Gorm.Raw("SELECT name FROM t WHERE "+tt.sql, tt.args...).Scan(&got).Error; err != nil {
			t.Errorf("SELECT name FROM t WHERE %s %v: %v", tt.sql, tt.args, err)
		}
	}
	for _, tt := range searchRowsTests() {
		t.Run(tt.q, func(t *testing.T) {
			t.Parallel()
			where, args, err := buildSearch(tt.q)
			if err != nil {
				t.Fatalf("BuildSearch(%q): %v", tt.q, err)
			}
			if where == "" {
				where = "true"
			}
			var got []string
			if err := db.Gorm.Raw("SELECT name FROM t WHERE "+where+" ORDER BY name", args...).Scan(&got).Error; err != nil {
				t.Fatalf("SELECT ... WHERE %s %v: %v", where, args, err)
			}
			slices.Sort(got) // ORDER BY follows the collation; compare in byte order
			if !slices.Equal(got, tt.want) {
				t.Errorf("SELECT name FROM t WHERE BuildSearch(%q) = %q, want %q", tt.q, got, tt.want)
			}
		})
	}
}
