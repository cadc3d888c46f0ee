package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// phase is what one timed step of the run measured.
type phase struct {
	Name      string
	Wall      time.Duration
	Rows      int // rows sent (scenarios) or affected (floor)
	Requests  int
	Retries   int
	Ack       ack
	Latencies []time.Duration // of each request as the client saw it; of each sample for propagation
	Posts     []time.Duration // of each POST /clusters (propagation)

	ServerCPU time.Duration // the serve child's user+system time
	DBCPU     time.Duration // the benchmark database's backends' user+system time
	BenchCPU  time.Duration // this process's, i.e. the simulated agents'
	WALBytes  int64         // server-wide
	PoolWaits float64       // times the serve child waited for a pooled connection
	PoolWait  time.Duration // and how long in all
	PeakRSS   int64         // the serve child's highest VmRSS during the phase
}

// ack sums the inventory acknowledgements of a phase.
type ack struct{ Written, Unchanged, Deleted, Tombstoned, Confirmed, Resent int }

func (a *ack) add(b ack) {
	a.Written, a.Unchanged, a.Deleted, a.Tombstoned = a.Written+b.Written, a.Unchanged+b.Unchanged, a.Deleted+b.Deleted, a.Tombstoned+b.Tombstoned
	a.Confirmed, a.Resent = a.Confirmed+b.Confirmed, a.Resent+b.Resent
}

// prober takes the counters around each phase.
type prober struct {
	db      *benchDB
	server  *server
	rss     *rssPoller
	backend *backendCPU
}

// counters is one reading of the cumulative counters.
type counters struct {
	server, db, bench time.Duration
	wal               int64
	waits             float64
	wait              time.Duration
}

// minus is the growth of the counters from b to c.
func (c counters) minus(b counters) counters {
	return counters{server: c.server - b.server, db: c.db - b.db, bench: c.bench - b.bench, wal: c.wal - b.wal,
		waits: c.waits - b.waits, wait: c.wait - b.wait}
}

func (p *prober) read(ctx context.Context) (counters, error) {
	var c counters
	var err error
	if c.server, err = processCPU(p.server.pid()); err != nil {
		return c, err
	}
	if c.wal, err = p.db.walLSN(ctx); err != nil {
		return c, fmt.Errorf("reading the WAL position: %w", err)
	}
	if c.waits, c.wait, err = p.server.poolWaits(ctx); err != nil {
		return c, err
	}
	c.db, c.bench = p.backend.total(), selfCPU()
	return c, nil
}

// measure checkpoints, then times work and the counters around it.
func (p *prober) measure(ctx context.Context, name string, work func(context.Context, *phase) error) (phase, error) {
	ph := phase{Name: name}
	if err := p.db.checkpoint(ctx); err != nil {
		return ph, fmt.Errorf("%s: CHECKPOINT: %w", name, err)
	}
	p.backend.sample(ctx)
	before, err := p.read(ctx)
	if err != nil {
		return ph, fmt.Errorf("%s: %w", name, err)
	}
	p.rss.resetPhase()
	start := time.Now()
	err = work(ctx, &ph)
	ph.Wall = time.Since(start)
	ph.PeakRSS = p.rss.phasePeak()
	p.backend.sample(ctx)
	after, rerr := p.read(ctx)
	if err == nil {
		err = rerr
	}
	ph.ServerCPU, ph.DBCPU, ph.BenchCPU = after.server-before.server, after.db-before.db, after.bench-before.bench
	ph.WALBytes, ph.PoolWaits, ph.PoolWait = after.wal-before.wal, after.waits-before.waits, after.wait-before.wait
	if err != nil {
		return ph, fmt.Errorf("%s: %w", name, err)
	}
	return ph, nil
}

// backendCPU follows the CPU time of the benchmark database's backends. A
// backend's time is kept after it exits, so the total only grows; what a
// backend spent between its last sample and its exit is lost.
type backendCPU struct {
	conn   *pgx.Conn // its own connection, excluded from the sum
	dbName string
	mu     sync.Mutex
	last   map[int]time.Duration
	// exclude are the backends of the driver's own watching connections
	// (the wait for Delivered), whose work is not the server's.
	exclude []int
}

func newBackendCPU(ctx context.Context, db *benchDB) (*backendCPU, error) {
	conn, err := pgx.Connect(ctx, db.server.dsn(db.name))
	if err != nil {
		return nil, fmt.Errorf("newBackendCPU: %w", err)
	}
	return &backendCPU{conn: conn, dbName: db.name, last: map[int]time.Duration{}}, nil
}

// run samples every interval until ctx ends.
func (b *backendCPU) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.sample(ctx)
		}
	}
}

func (b *backendCPU) sample(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pids, err := backendPIDs(ctx, b.conn, b.dbName, b.exclude)
	if err != nil {
		return
	}
	for _, pid := range pids {
		if cpu, err := processCPU(pid); err == nil && cpu >= b.last[pid] {
			b.last[pid] = cpu
		}
	}
}

// excludeBackend leaves the backend pid out of the sum from now on.
func (b *backendCPU) excludeBackend(pid int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.exclude = append(b.exclude, pid)
}

func (b *backendCPU) total() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sum time.Duration
	for _, d := range b.last {
		sum += d
	}
	return sum
}

func (b *backendCPU) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.conn.Close(context.Background())
}

// selfCPU is this process's user+system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile returns the q-quantile (0..1) of ds by the nearest-rank method.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// startProber starts sampling the serve child's memory and its database
// backends' CPU, on a background context the caller may hand to its own
// goroutines; stop ends the sampling and that context.
func startProber(ctx context.Context, db *benchDB, s *server) (p *prober, bg context.Context, stop func(), err error) {
	bg, cancel := context.WithCancel(ctx)
	rss := &rssPoller{pid: s.pid()}
	go rss.run(bg, 100*time.Millisecond)
	backend, err := newBackendCPU(ctx, db)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	go backend.run(bg, 250*time.Millisecond)
	stop = func() { // safe to call twice
		cancel()
		backend.close()
	}
	return &prober{db: db, server: s, rss: rss, backend: backend}, bg, stop, nil
}
