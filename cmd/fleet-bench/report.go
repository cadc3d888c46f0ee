package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// The targets.
const (
	fullSyncFloorFactor  = 3.0
	unchangedShareOfFull = 0.25
	propagationP99Target = 500 * time.Millisecond
	peakRSSTarget        = 200 * megabyte
	megabyte             = 1_000_000
)

// report prints the machine, the figures of every phase, the checks and the
// targets with PASS or MISS.
func report(out io.Writer, r *results) {
	o := r.opts
	fmt.Fprintf(out, "\nfleet-bench %s (took %s)\n", r.started.Format(time.RFC3339), r.took.Round(time.Second))
	fmt.Fprintf(out, "command:  %s\n", strings.Join(os.Args, " "))
	fmt.Fprintf(out, "machine:  %d CPUs (%s), %.1f GiB memory, %s\n", r.machine.cpus, r.machine.cpuModel,
		float64(r.machine.memory)/(1<<30), r.machine.goVersion)
	fmt.Fprintf(out, "          %s\n", r.machine.postgres)
	fmt.Fprintf(out, "server:   %s (%s)\n", r.opts.FleetManager, r.machine.fleetManager)
	fmt.Fprintf(out, "load:     before %s; after %s (1, 5, 15 min)\n", r.machine.loadBefore, r.machine.loadAfter)
	fmt.Fprintf(out, "sizes:    %d hubs x %d clusters = %d rows; batches of %d (%.0f kB of JSON each); %d changed per hub; %d propagation samples %s apart\n\n",
		o.Hubs, o.ClustersPerHub, o.totalClusters(), o.BatchSize, float64(r.batchBytes)/1000, o.changedPerHub(), o.Samples, o.SampleGap)
	printPhases(out, r)
	printDetails(out, r)
	printTargets(out, r)
}

func printPhases(out io.Writer, r *results) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\twall\trows\trows/s\treqs\treq p50\treq p99\tfm CPU\tPG CPU\tbench CPU\tWAL MB\tpool waits\tpeak RSS MB\t")
	for _, ph := range []phase{r.narrowInsert, r.narrowUpsert, r.wideInsert, r.wideUpsert, r.full, r.unchanged, r.changed} {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f (%s)\t%.0f\t\n", ph.Name, seconds(ph.Wall), ph.Rows,
			float64(ph.Rows)/ph.Wall.Seconds(), ph.Requests, ms(percentile(ph.Latencies, .5)), ms(percentile(ph.Latencies, .99)),
			seconds(ph.ServerCPU), seconds(ph.DBCPU), seconds(ph.BenchCPU), float64(ph.WALBytes)/megabyte, ph.PoolWaits,
			seconds(ph.PoolWait), float64(ph.PeakRSS)/megabyte)
	}
	p := r.propagation
	fmt.Fprintf(tw, "%s\t%s\t%d\t-\t%d\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.0f (%s)\t%.0f\t\n", p.Name, seconds(p.Wall), p.Rows, p.Requests,
		ms(percentile(p.Posts, .5)), ms(percentile(p.Posts, .99)), seconds(p.ServerCPU), seconds(p.DBCPU), seconds(p.BenchCPU),
		float64(p.WALBytes)/megabyte, p.PoolWaits, seconds(p.PoolWait), float64(p.PeakRSS)/megabyte)
	tw.Flush()
	fmt.Fprintln(out, "(rows: written by the statement (floor) or sent (scenarios); req: one statement, inventory POST or")
	fmt.Fprintln(out, " POST /clusters; CPU: user+system seconds of fleet-manager serve, of the database's PostgreSQL")
	fmt.Fprintln(out, " backends and of this driver; WAL: server-wide; pool waits: waits for a pooled connection (total wait))")
}

func printDetails(out io.Writer, r *results) {
	fmt.Fprintln(out)
	for _, ph := range []phase{r.full, r.unchanged, r.changed} {
		fmt.Fprintf(out, "%-18s acks: written %d, unchanged %d, confirmed by hash %d, resent %d, deleted %d, tombstoned %d; retries %d\n", ph.Name+":",
			ph.Ack.Written, ph.Ack.Unchanged, ph.Ack.Confirmed, ph.Ack.Resent, ph.Ack.Deleted, ph.Ack.Tombstoned, ph.Retries)
	}
	p := r.propagation
	fmt.Fprintf(out, "propagation:       %d of %d received; p50 %s, p95 %s, p99 %s, max %s; long-poll failures %d\n",
		p.Rows, p.Requests, ms(percentile(p.Latencies, .5)), ms(percentile(p.Latencies, .95)), ms(percentile(p.Latencies, .99)),
		ms(percentile(p.Latencies, 1)), p.Retries)
	fmt.Fprintf(out, "row size:          floor (2 jsonb) %.0f B, floor (5 jsonb) %.0f B, managed_clusters %.0f B; live inventory rows %d\n",
		r.narrowRow, r.wideRow, r.ingestRow, r.liveRows)
	fmt.Fprintf(out, "serve memory:      peak VmRSS %.1f MB (%d samples, every 100 ms), VmHWM %.1f MB\n",
		float64(r.peakRSS)/megabyte, r.rssSamples, float64(r.hwm)/megabyte)
	fmt.Fprintf(out, "heartbeats:        every %s per agent; %d failed\n", r.opts.HeartbeatInterval, r.heartbeatFailures)
	fmt.Fprintf(out, "serve log:         %d lines at --log-level=warn\n", r.logLines)
	for _, line := range r.logTop {
		fmt.Fprintf(out, "                   %s\n", truncate(line, 160))
	}
	if failed := r.failedChecks(); len(failed) > 0 {
		fmt.Fprintf(out, "CHECKS FAILED:     %s\n", strings.Join(failed, "; "))
	} else {
		fmt.Fprintln(out, "checks:            every acknowledgement and count adds up")
	}
}

func printTargets(out io.Writer, r *results) {
	fmt.Fprintln(out, "\ntargets:")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	full, floor := r.full.Wall, r.narrowInsert.Wall
	verdict(tw, "full sync within 3x the floor insert", full <= time.Duration(fullSyncFloorFactor*float64(floor)),
		fmt.Sprintf("%s vs 3 x %s = %s (%.1fx the floor; %.1fx the 5-jsonb floor)", seconds(full), seconds(floor),
			seconds(time.Duration(fullSyncFloorFactor*float64(floor))), ratio(full, floor), ratio(full, r.wideInsert.Wall)))
	unchanged := r.unchanged.Wall
	verdict(tw, "unchanged resync within 1/4 of the full sync", unchanged <= time.Duration(unchangedShareOfFull*float64(full)),
		fmt.Sprintf("%s vs %s / 4 = %s (%.2f of it)", seconds(unchanged), seconds(full),
			seconds(time.Duration(unchangedShareOfFull*float64(full))), ratio(unchanged, full)))
	p99 := percentile(r.propagation.Latencies, .99)
	verdict(tw, "propagation p99 under 500 ms", p99 < propagationP99Target && r.propagation.Rows == r.propagation.Requests,
		fmt.Sprintf("p99 %s with %d agents long-polling", ms(p99), r.opts.Hubs))
	verdict(tw, "serve peak RSS under 200 MB", r.peakRSS < peakRSSTarget && r.hwm < peakRSSTarget,
		fmt.Sprintf("peak VmRSS %.1f MB, VmHWM %.1f MB", float64(r.peakRSS)/megabyte, float64(r.hwm)/megabyte))
	tw.Flush()
}

func verdict(w io.Writer, target string, met bool, figures string) {
	word := "MISS"
	if met {
		word = "PASS"
	}
	fmt.Fprintf(w, "  %s\t%s\t%s\n", word, target, figures)
}

// failedChecks compares the acknowledgements and counts with what the run
// sent, and describes each that differs.
func (r *results) failedChecks() []string {
	o, total := r.opts, r.opts.totalClusters()
	var failed []string
	expect := func(ok bool, format string, args ...any) {
		if !ok {
			failed = append(failed, fmt.Sprintf(format, args...))
		}
	}
	expect(r.full.Ack == ack{Written: total}, "full sync acks %+v, want %d written", r.full.Ack, total)
	expect(r.unchanged.Ack == ack{Confirmed: total}, "unchanged resync acks %+v, want %d confirmed by hash", r.unchanged.Ack, total)
	changed := o.Hubs * o.changedPerHub()
	expect(r.changed.Ack == ack{Written: changed}, "changes acks %+v, want %d written", r.changed.Ack, changed)
	expect(r.liveRows == total, "%d live inventory rows, want %d", r.liveRows, total)
	expect(r.propagation.Rows == o.Samples, "%d of %d registrations reached their agent", r.propagation.Rows, o.Samples)
	return failed
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond)) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
