package postgres

import (
	"fmt"
	"slices"

	"gorm.io/gorm"
)

// ObservedStatement is one statement the pool sent to PostgreSQL, as a
// StatementObserver is told of it.
type ObservedStatement struct {
	// SQL is the statement with its placeholders ($1, $2, ...).
	SQL string
	// Args are the placeholders' values, in order.
	Args []any
	// Generic is set for a statement run with a generic plan, made once per
	// connection without its values (plan_cache_mode=force_generic_plan), as
	// roundTrip runs those whose values cannot change their plan; every other
	// statement is planned with its values.
	Generic bool
}

// StatementObserver is told of every statement the pool runs, after it ran,
// failed or not, in the order each connection ran them: GORM's statements
// and those of round trips alike. A statement GORM only builds (DryRun) is
// not run and not observed. It is called on the caller's goroutine, so it
// must be safe for concurrent use and quick. cmd/fleet-bench explains the
// statements it observes; the service runs without one.
type StatementObserver func(ObservedStatement)

// observerPlugin is a StatementObserver as GORM's plugin: GORM keeps it in
// its configuration, where roundTrip finds it (statementObserver), and
// Initialize has GORM's callbacks tell it of GORM's own statements.
type observerPlugin struct {
	observe StatementObserver
}

const observerPluginName = "fleet:observe"

func (p observerPlugin) Name() string { return observerPluginName }

// Initialize registers the observer after each of GORM's processors that
// send SQL.
func (p observerPlugin) Initialize(db *gorm.DB) error {
	cb := db.Callback()
	after := func(tx *gorm.DB) {
		if tx.DryRun || tx.Statement.SQL.Len() == 0 {
			return
		}
		p.observe(ObservedStatement{SQL: tx.Statement.SQL.String(), Args: slices.Clone(tx.Statement.Vars)})
	}
	for _, r := range []func() error{
		func() error { return cb.Create().After("gorm:create").Register(observerPluginName, after) },
		func() error { return cb.Query().After("gorm:query").Register(observerPluginName, after) },
		func() error { return cb.Update().After("gorm:update").Register(observerPluginName, after) },
		func() error { return cb.Delete().After("gorm:delete").Register(observerPluginName, after) },
		func() error { return cb.Row().After("gorm:row").Register(observerPluginName, after) },
		func() error { return cb.Raw().After("gorm:raw").Register(observerPluginName, after) },
	} {
		if err := r(); err != nil {
			return err
		}
	}
	return nil
}

// statementObserver is db's StatementObserver, nil when it has none: a
// lookup in GORM's plugins, once a round trip.
func statementObserver(db *gorm.DB) StatementObserver {
	if p, ok := db.Config.Plugins[observerPluginName].(observerPlugin); ok {
		return p.observe
	}
	return nil
}

// ObserveStatements has observe told of every statement db runs from now on.
// Call it after Open, before db is used: GORM's callbacks are not changed
// safely while statements run. A DB never observed runs no callback for it.
func (db *DB) ObserveStatements(observe StatementObserver) error {
	if err := db.Gorm.Use(observerPlugin{observe: observe}); err != nil {
		return fmt.Errorf("ObserveStatements(%s): %w", db.name, err)
	}
	return nil
}
