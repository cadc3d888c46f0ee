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

// run sets up the database, the server and the fleet, runs every phase and
// prints the report. It fails when the run broke or the acknowledgements did
// not add up, never because a target was missed.
func run(ctx context.Context, o options, out io.Writer) error {
	r := &results{opts: o, started: time.Now()}
	r.machine = machine{cpus: runtime.NumCPU(), cpuModel: cpuModel(), goVersion: runtime.Version(), loadBefore: loadAverage()}
	r.machine.memory, _ = fileFieldKB("/proc/meminfo", "MemTotal")
	version, err := exec.CommandContext(ctx, o.FleetManager, "version").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", o.FleetManager, err)
	}
	r.machine.fleetManager = strings.Join(strings.Fields(string(version)), " ")
	dir, err := os.MkdirTemp("", "fleet-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := createDatabase(ctx, o.DB)
	if err != nil {
		return err
	}
	defer finishDatabase(db, o.KeepDatabase, out)
	if r.machine.postgres, err = db.serverFacts(ctx); err != nil {
		return err
	}
	files, err := newServerFiles(dir, o.ServerLog)
	if err != nil {
		return err
	}
	m, err := newMinter(files.keyDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "fleet-bench: database %s; starting %s serve\n", db.name, o.FleetManager)
	s, err := startServer(ctx, o, db, files)
	if err != nil {
		return err
	}
	defer s.stop()
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
	bg, stopBackground := context.WithCancel(ctx)
	defer stopBackground()
	rss := &rssPoller{pid: s.pid()}
	go rss.run(bg, 100*time.Millisecond)
	backend, err := newBackendCPU(ctx, db)
	if err != nil {
		return err
	}
	defer backend.close()
	go backend.run(bg, 250*time.Millisecond)
	p := &prober{db: db, server: s, rss: rss, backend: backend}
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
	r.heartbeatFailures, r.peakRSS, r.rssSamples = beatFailures.Load(), rss.peak.Load(), rss.samples.Load()
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
