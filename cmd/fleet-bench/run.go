package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
)

// Names of the floor's scratch tables.
const (
	narrowFloorTable = "bench_floor_narrow"
	wideFloorTable   = "bench_floor_wide"
)

// results is everything a run measured, for the report.
type results struct {
	opts    options
	machine machine
	started time.Time
	took    time.Duration

	narrowInsert, narrowUpsert, wideInsert, wideUpsert phase
	full, unchanged, changed, propagation              phase

	narrowRow, wideRow, ingestRow float64 // average stored row sizes, bytes
	liveRows                      int
	batchBytes                    int
	peakRSS, hwm, rssSamples      int64
	heartbeatFailures             int64
	logLines                      int
	logTop                        []string
}

// machine describes where the run happened.
type machine struct {
	cpus                  int
	cpuModel              string
	memory                int64
	goVersion, postgres   string
	fleetManager          string // the binary's `version` output
	loadBefore, loadAfter string
}

// thisMachine reads the facts of the machine a run starts on.
func thisMachine() machine {
	m := machine{cpus: runtime.NumCPU(), cpuModel: cpuModel(), goVersion: runtime.Version(), loadBefore: loadAverage()}
	m.memory, _ = fileFieldKB("/proc/meminfo", "MemTotal")
	return m
}

// run sets up the database, the server and the fleet, runs every phase and
// prints the report. It fails when the run broke or the acknowledgements did
// not add up, never because a target was missed.
func run(ctx context.Context, o options, out io.Writer) error {
	r := &results{opts: o, started: time.Now()}
	b, err := startBenchServer(ctx, o, out, "fleet-bench")
	if err != nil {
		return err
	}
	defer b.close()
	r.machine = b.machine
	db, s, m := b.db, b.server, b.minter
	if err := runPhases(ctx, r, db, s, m, out); err != nil {
		return err
	}
	r.machine.loadAfter, r.took = loadAverage(), time.Since(r.started)
	s.stop()
	r.logLines, r.logTop = s.logSummary(5)
	report(out, r)
	if failed := r.failedChecks(); len(failed) > 0 {
		return fmt.Errorf("acknowledgements did not add up: %v", failed)
	}
	return nil
}

func newServerFiles(dir, log string) (serverFiles, error) {
	f := serverFiles{keyDir: filepath.Join(dir, "auth"), encryptionKey: filepath.Join(dir, "encryption.key"),
		secretsDir: filepath.Join(dir, "secrets"), log: log}
	if f.log == "" {
		f.log = filepath.Join(dir, "serve.log")
	}
	return f, os.MkdirAll(f.secretsDir, 0o700)
}

func finishDatabase(db *benchDB, keep bool, out io.Writer) {
	if keep {
		_ = db.conn.Close(context.Background())
		fmt.Fprintf(out, "kept database %s (drop it with: DROP DATABASE %s WITH (FORCE))\n", db.name, db.name)
		return
	}
	if err := db.drop(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
	}
}

// runPhases starts the samplers and the fleet, then times each phase in turn.
func runPhases(ctx context.Context, r *results, db *benchDB, s *server, m *minter, out io.Writer) error {
	o := r.opts
	p, bg, stopBackground, err := startProber(ctx, db, s)
	if err != nil {
		return err
	}
	defer stopBackground()
	f, err := setupFleet(ctx, o, s, m)
	if err != nil {
		return err
	}
	if err := f.heartbeatAll(ctx); err != nil {
		return err
	}
	var beatFailures atomic.Int64
	go f.keepBeating(bg, o.HeartbeatInterval, &beatFailures)
	if err := runFloors(ctx, r, p, out); err != nil {
		return err
	}
	if err := runScenarios(ctx, r, p, f, out); err != nil {
		return err
	}
	r.heartbeatFailures, r.peakRSS, r.rssSamples = beatFailures.Load(), p.rss.peak.Load(), p.rss.samples.Load()
	if r.hwm, err = procStatusKB(s.pid(), "VmHWM"); err != nil {
		return err
	}
	return s.alive()
}

// runFloors times the narrow and the wide floor, then drops their tables.
func runFloors(ctx context.Context, r *results, p *prober, out io.Writer) error {
	var err error
	fmt.Fprintf(out, "floor: %d rows in one statement\n", r.opts.totalClusters())
	if r.narrowInsert, r.narrowUpsert, err = runFloor(ctx, p, "floor (2 jsonb)", narrowFloorTable, r.opts, false); err != nil {
		return err
	}
	if r.wideInsert, r.wideUpsert, err = runFloor(ctx, p, "floor (5 jsonb)", wideFloorTable, r.opts, true); err != nil {
		return err
	}
	if r.narrowRow, err = rowSize(ctx, p.db, narrowFloorTable); err != nil {
		return err
	}
	if r.wideRow, err = rowSize(ctx, p.db, wideFloorTable); err != nil {
		return err
	}
	return dropTables(ctx, p.db, narrowFloorTable, wideFloorTable)
}

// runScenarios times the agents' scenarios against the server.
func runScenarios(ctx context.Context, r *results, p *prober, f *fleet, out io.Writer) error {
	o := r.opts
	body, _ := json.Marshal(fullSyncBatch(o, &agent{}, 0, 1))
	r.batchBytes = len(body)
	fullPrepare, fullWork := fullSync(o, f.agents, 1)
	unchangedPrepare, unchangedWork := fullSync(o, f.agents, 2)
	steps := []struct {
		into    *phase
		name    string
		prepare func()
		work    func(context.Context, *phase) error
	}{
		{&r.full, "full sync", fullPrepare, fullWork},
		{&r.unchanged, "unchanged resync", unchangedPrepare, unchangedWork},
		{&r.changed, fmt.Sprintf("changes (%d/hub)", o.changedPerHub()), nil, changes(o, f.agents, 2)},
		{&r.propagation, "propagation", nil, propagation(o, f)},
	}
	for _, step := range steps {
		fmt.Fprintf(out, "%s ...\n", step.name)
		if step.prepare != nil {
			step.prepare() // the agents' own work, outside the measured time
		}
		ph, err := p.measure(ctx, step.name, step.work)
		*step.into = ph
		if err != nil {
			return err
		}
		if err := p.server.alive(); err != nil {
			return err
		}
		if step.into == &r.changed {
			if err := r.readInventory(ctx, p.db); err != nil {
				return err
			}
		}
	}
	return nil
}

// readInventory counts the live inventory rows and their average size.
func (r *results) readInventory(ctx context.Context, db *benchDB) error {
	if err := db.conn.QueryRow(ctx, `SELECT count(*) FROM managed_clusters WHERE deleted_at IS NULL`).Scan(&r.liveRows); err != nil {
		return fmt.Errorf("counting managed_clusters: %w", err)
	}
	var err error
	r.ingestRow, err = rowSize(ctx, db, "managed_clusters")
	return err
}

// benchServer is what a run of the ingest or of the registrations starts
// from: the machine's facts, a fresh database and the serve child on it.
type benchServer struct {
	machine machine
	db      *benchDB
	server  *server
	minter  *minter
	close   func()
}

// startBenchServer reads the machine's facts, creates the run's database
// and starts serve on it; close stops serve and drops the database (unless
// --keep-database). label names the run in its first line.
func startBenchServer(ctx context.Context, o options, out io.Writer, label string) (b *benchServer, err error) {
	b = &benchServer{machine: thisMachine()}
	version, err := exec.CommandContext(ctx, o.FleetManager, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s version: %w", o.FleetManager, err)
	}
	b.machine.fleetManager = strings.Join(strings.Fields(string(version)), " ")
	var cleanups []func()
	b.close = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	dir, err := os.MkdirTemp("", "fleet-bench-")
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { os.RemoveAll(dir) })
	if b.db, err = createDatabase(ctx, o.DB); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { finishDatabase(b.db, o.KeepDatabase, out) })
	if b.machine.postgres, err = b.db.serverFacts(ctx); err != nil {
		return nil, err
	}
	files, err := newServerFiles(dir, o.ServerLog)
	if err != nil {
		return nil, err
	}
	if b.minter, err = newMinter(files.keyDir); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%s: database %s; starting %s serve\n", label, b.db.name, o.FleetManager)
	if b.server, err = startServer(ctx, o, b.db, files); err != nil {
		return nil, err
	}
	cleanups = append(cleanups, b.server.stop)
	return b, nil
}
