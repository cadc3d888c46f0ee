package postgres

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// scannedRow is a row type that lists its fields, as pointers, in the order
// of its query's SELECT. find reads such rows through pgx directly.
type scannedRow interface {
	fields() []any
}

// find runs query as query.Find into []T would; capacity is the most rows
// expected, for the slice's first allocation. When *T is a scannedRow and
// the query is not in a transaction, it runs the statement GORM built on the
// pgx connection beneath database/sql and scans each row into the row's
// fields: for a page of the inventory, GORM's reflection and database/sql's
// conversion of every value were a third of the fleet manager's CPU
// (docs/performance.md). The statement is logged as GORM logs its own.
func find[T any](query *gorm.DB, capacity int) ([]T, error) {
	rows := make([]T, 0, capacity)
	pool, isPool := query.Statement.ConnPool.(*sql.DB)
	if _, scanned := any(new(T)).(scannedRow); !scanned || !isPool {
		return rows, query.Find(&rows).Error
	}
	built := query.Session(&gorm.Session{DryRun: true, Logger: logger.Discard}).Find(&rows)
	if built.Error != nil {
		return nil, built.Error
	}
	ctx, text, vars := query.Statement.Context, built.Statement.SQL.String(), built.Statement.Vars
	begin := time.Now()
	conn, err := pool.Conn(ctx)
	if err == nil {
		err = conn.Raw(func(driverConn any) error {
			c, ok := driverConn.(*stdlib.Conn)
			if !ok {
				return fmt.Errorf("find: the driver's connection is a %T, not pgx's", driverConn)
			}
			res, err := c.Conn().Query(ctx, text, vars...)
			if err != nil {
				return err
			}
			defer res.Close()
			var row T
			dest := any(&row).(scannedRow).fields() // scanned into again for every row, then copied
			for res.Next() {
				if err := res.Scan(dest...); err != nil {
					return err
				}
				rows = append(rows, row)
			}
			return res.Err()
		})
		if cerr := conn.Close(); err == nil {
			err = cerr
		}
	}
	query.Logger.Trace(ctx, begin, func() (string, int64) {
		return query.Dialector.Explain(text, vars...), int64(len(rows))
	}, err)
	return rows, err
}
