package postgres_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/onsi/gomega"
	"gorm.io/gorm"

	"github.com/fleetmanager/fleet-manager/internal/postgres"
	"github.com/fleetmanager/fleet-manager/internal/postgres/pgtest"
)

// TestRoundTripPlansOnlyGenericStatementsOnce runs a generic and a custom
// statement in round trips on a pool of one connection, and reads from
// PostgreSQL's own accounting (pg_prepared_statements) that the generic one
// was planned without its values and the other with them every time; and that
// the connection is back to planning with values after each round trip, a
// failed one included.
func TestRoundTripPlansOnlyGenericStatementsOnce(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	cfg := pgtest.NewDatabase(t)
	cfg.MaxOpenConns, cfg.MaxIdleConns = 1, 1
	db := pgtest.Open(t, cfg)
	ctx := context.Background()
	const genericSQL = `SELECT current_setting('plan_cache_mode') WHERE $1::int > 0`
	const customSQL = `SELECT current_setting('plan_cache_mode') WHERE $1::int > 1`
	for range 3 {
		var inGeneric, inCustom string
		err := postgres.RoundTripForTest(ctx, db,
			postgres.NewStatementForTest(genericSQL, []any{1}, true, postgres.ReadOneForTest(&inGeneric)),
			postgres.NewStatementForTest(customSQL, []any{2}, false, postgres.ReadOneForTest(&inCustom)))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect([]string{inGeneric, inCustom}).To(gomega.Equal([]string{"force_generic_plan", "force_custom_plan"}))
		g.Expect(planCacheMode(t, db)).To(gomega.Equal("force_custom_plan"), "the mode after a round trip")
	}
	plans := map[string][2]int64{}
	rows, err := db.Gorm.Raw(`SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`).Rows()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for rows.Next() {
		var sql string
		var generic, custom int64
		g.Expect(rows.Scan(&sql, &generic, &custom)).To(gomega.Succeed())
		plans[sql] = [2]int64{generic, custom}
	}
	g.Expect(rows.Close()).To(gomega.Succeed())
	g.Expect(plans).To(gomega.HaveKeyWithValue(genericSQL, [2]int64{3, 0}), "the generic statement's generic and custom plans")
	g.Expect(plans).To(gomega.HaveKeyWithValue(customSQL, [2]int64{0, 3}), "the custom statement's generic and custom plans")

	var never string
	err = postgres.RoundTripForTest(ctx, db,
		postgres.NewStatementForTest(`SELECT (1 / $1::int)::text`, []any{0}, true, postgres.ReadOneForTest(&never)),
		postgres.NewStatementForTest(customSQL, []any{2}, false, postgres.ReadOneForTest(&never)))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("division by zero")))
	g.Expect(never).To(gomega.BeEmpty())
	g.Expect(planCacheMode(t, db)).To(gomega.Equal("force_custom_plan"), "the mode after a failed round trip")
}

func planCacheMode(t *testing.T, db *postgres.DB) string {
	t.Helper()
	var mode string
	if err := db.Gorm.Raw(`SHOW plan_cache_mode`).Scan(&mode).Error; err != nil {
		t.Fatal(err)
	}
	return mode
}

// TestRoundTripLogsValuesOnlyInDebug fails a statement of a round trip and
// reads its log line: its values appear only with --db-debug, as with GORM's
// own statements, and a generic statement is logged as the prepared
// statement it runs as, for a reader to run it so.
func TestRoundTripLogsValuesOnlyInDebug(t *testing.T) {
	t.Parallel()
	cfg := pgtest.NewDatabase(t)
	for _, debug := range []bool{false, true} {
		for _, generic := range []bool{false, true} {
			g := gomega.NewWithT(t)
			var log bytes.Buffer // written by this goroutine only: the log is the caller's
			cfg.Debug = debug
			db, err := postgres.Open(cfg, slog.New(slog.NewJSONHandler(&log, nil)))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			var never string
			err = postgres.RoundTripForTest(context.Background(), db,
				postgres.NewStatementForTest(`SELECT (length($1::text) / 0)::text`, []any{"hunter2-secret"}, generic, postgres.ReadOneForTest(&never)))
			g.Expect(db.Close()).To(gomega.Succeed())
			g.Expect(err).To(gomega.HaveOccurred())
			line := log.String()
			g.Expect(line).To(gomega.ContainSubstring("sql failed"))
			g.Expect(strings.Contains(line, "hunter2-secret")).To(gomega.Equal(debug), "debug %v, generic %v: %s", debug, generic, line)
			g.Expect(strings.Contains(line, "PREPARE generic AS ")).To(gomega.Equal(generic), "debug %v, generic %v: %s", debug, generic, line)
		}
	}
}

// TestStatementObserverSeesEveryStatement observes a pool and runs GORM's
// statements (a query, an exec, one only built) and a round trip of a
// generic and a custom statement: the observer is told of each statement
// run, with its SQL, values and plan, in order, and of none only built.
func TestStatementObserverSeesEveryStatement(t *testing.T) {
	t.Parallel()
	g := gomega.NewWithT(t)
	db := pgtest.Open(t, pgtest.NewDatabase(t))
	var mu sync.Mutex
	var seen []postgres.ObservedStatement
	g.Expect(db.ObserveStatements(func(s postgres.ObservedStatement) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	})).To(gomega.Succeed())
	ctx := context.Background()
	var n int
	g.Expect(db.Gorm.WithContext(ctx).Raw(`SELECT ?::int + 1`, 41).Scan(&n).Error).To(gomega.Succeed())
	g.Expect(n).To(gomega.Equal(42))
	g.Expect(db.Gorm.WithContext(ctx).Exec(`SET application_name = 'observed'`).Error).To(gomega.Succeed())
	built := db.Gorm.WithContext(ctx).Session(&gorm.Session{DryRun: true}).Table("pg_class").Where("relname = ?", "x").
		Find(&[]struct{ Relname string }{})
	g.Expect(built.Error).To(gomega.Succeed())
	g.Expect(built.Statement.SQL.String()).To(gomega.ContainSubstring("pg_class"), "the statement only built")
	var generic, custom string
	g.Expect(postgres.RoundTripForTest(ctx, db,
		postgres.NewStatementForTest(`SELECT $1::text`, []any{"g"}, true, postgres.ReadOneForTest(&generic)),
		postgres.NewStatementForTest(`SELECT $1::text || $2::text`, []any{"c", "d"}, false, postgres.ReadOneForTest(&custom)),
	)).To(gomega.Succeed())
	g.Expect([]string{generic, custom}).To(gomega.Equal([]string{"g", "cd"}))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(seen).To(gomega.Equal([]postgres.ObservedStatement{
		{SQL: `SELECT $1::int + 1`, Args: []any{41}},
		{SQL: `SET application_name = 'observed'`},
		{SQL: `SELECT $1::text`, Args: []any{"g"}, Generic: true},
		{SQL: `SELECT $1::text || $2::text`, Args: []any{"c", "d"}},
	}))
}
