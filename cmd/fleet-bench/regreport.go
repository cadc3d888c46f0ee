package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// The targets of issue 17.
const (
	rhTrexCreatesPerSecond = 55.7 // rh-trex's creates at concurrency 8, measured side by side
	createRateTarget       = 280.0
	listP99Target          = 50 * time.Millisecond
	getP99Target           = 10 * time.Millisecond
	bulkDeliveredTarget    = 10 * time.Minute // "in minutes"
)

// target is one of the targets with whether the run met it.
type target struct {
	met           bool
	name, figures string
}

// registrationTargets judges the run against the targets.
func registrationTargets(r *regResults) []target {
	var out []target
	for i, c := range r.creates {
		figures := fmt.Sprintf("%.0f/s (%.1fx rh-trex's %.1f/s", c.rate(), c.rate()/rhTrexCreatesPerSecond, rhTrexCreatesPerSecond)
		// The scenarios at fleet size follow the same two at the first size.
		if i >= 2 && r.creates[i-2].rate() > 0 {
			figures += fmt.Sprintf("; %.2f of the rate at %d rows", c.rate()/r.creates[i-2].rate(), r.creates[i-2].rowsBefore)
		}
		figures += "), " + deliveredFigures(c.delivery)
		if n := failureCount(c.failures); n > 0 {
			figures += fmt.Sprintf("; %d refused: %s", n, describeFailures(c.failures))
		}
		out = append(out, target{met: c.rate() >= createRateTarget && c.delivery.all() && len(c.failures) == 0,
			name: "creates at least 280/s and all Delivered: " + c.Name, figures: figures})
	}
	if r.opts.BulkRegistrations > 0 {
		b := r.bulk
		name := fmt.Sprintf("bulk onboarding of %d registrations answered and Delivered within %s", r.opts.BulkRegistrations, bulkDeliveredTarget)
		if !b.offered {
			out = append(out, target{name: name, figures: "not offered by this server"})
		} else {
			figures := fmt.Sprintf("%d created, answered in %s (%.0f items/s), %s", b.created, seconds(b.answered),
				perSecond(b.created, b.answered), deliveredFigures(b.delivery))
			if n := failureCount(b.failures); n > 0 {
				figures += fmt.Sprintf("; %d refused: %s", n, describeFailures(b.failures))
			}
			out = append(out, target{met: b.created == r.opts.BulkRegistrations && b.delivery.all() && b.delivery.after <= bulkDeliveredTarget,
				name: name, figures: figures})
		}
	}
	for _, ph := range r.reads.phases {
		limit, what := listP99Target, "p99 under 50 ms"
		if ph.Name == "get by id" || ph.Name == "import material" {
			limit, what = getP99Target, "p99 under 10 ms"
		}
		p99 := percentile(ph.Latencies, .99)
		out = append(out, target{met: ph.Requests > 0 && p99 < limit, name: what + ": " + ph.Name,
			figures: fmt.Sprintf("p99 %s at %d rows, %d clients", msf(p99), r.readRows, r.opts.ReadConcurrency)})
	}
	return out
}

// deliveredFigures says how many of a scenario's registrations were
// Delivered, and when the last was.
func deliveredFigures(d deliveryOutcome) string {
	switch {
	case d.want == 0:
		return "none created"
	case d.all():
		return fmt.Sprintf("all %d Delivered %s after the first request", d.want, seconds(d.after))
	}
	return fmt.Sprintf("only %d of %d Delivered after %s", d.delivered, d.want, seconds(d.after))
}

// reportRegistrations prints the machine, the figures of every scenario and
// the targets with PASS or MISS.
func reportRegistrations(out io.Writer, r *regResults) {
	o := r.opts
	fmt.Fprintf(out, "\nfleet-bench --registrations %s (took %s)\n", r.started.Format(time.RFC3339), r.took.Round(time.Second))
	fmt.Fprintf(out, "command:  %s\n", strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " "))
	fmt.Fprintf(out, "machine:  %d CPUs (%s), %.1f GiB memory, %s\n", r.machine.cpus, r.machine.cpuModel,
		float64(r.machine.memory)/(1<<30), r.machine.goVersion)
	fmt.Fprintf(out, "          %s\n", r.machine.postgres)
	fmt.Fprintf(out, "server:   %s (%s), reconcilers on\n", o.FleetManager, r.machine.fleetManager)
	fmt.Fprintf(out, "load:     before %s; after %s (1, 5, 15 min)\n", r.machine.loadBefore, r.machine.loadAfter)
	fmt.Fprintf(out, "fleet:    %d agent hubs in zone %s, each agent long-polling its desired set and acknowledging each revision at once\n",
		o.Hubs, benchZone)
	fmt.Fprintf(out, "data:     %d, then %d registrations of %s loaded by SQL (placed, Delivered, ready), then VACUUM ANALYZE\n",
		initialRegistrations, r.loadedRows, benchOrg)
	fmt.Fprintf(out, "creates:  %d clients, each scenario ", o.CreateConcurrency)
	if o.CreateCount > 0 {
		fmt.Fprintf(out, "%d POSTs", o.CreateCount)
	} else {
		fmt.Fprintf(out, "posting for %s", o.CreateDuration)
	}
	fmt.Fprintf(out, "; as %s, or as %d organisations in turn\n\n", benchOrg, o.CreateOrgs)
	printCreates(out, r.creates)
	printBulk(out, r)
	fmt.Fprintf(out, "\nreads as %s's user at %d live registrations (deep page: %d), %d clients, %s each:\n",
		benchOrg, r.readRows, r.deepPage, o.ReadConcurrency, o.ReadDuration)
	printReadPhases(out, &r.reads)
	fmt.Fprintln(out)
	for _, n := range r.notes {
		fmt.Fprintln(out, "note:", n)
	}
	fmt.Fprintf(out, "serve memory: peak VmRSS %.1f MB, VmHWM %.1f MB; heartbeats failed: %d\n",
		float64(r.peakRSS)/megabyte, float64(r.hwm)/megabyte, r.beatFails)
	fmt.Fprintf(out, "serve log:    %d lines at --log-level=warn\n", r.logLines)
	for _, line := range r.logTop {
		fmt.Fprintf(out, "              %s\n", truncate(line, 160))
	}
	fmt.Fprintln(out, "\ntargets:")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, t := range registrationTargets(r) {
		verdict(tw, t.name, t.met, t.figures)
	}
	tw.Flush()
}

func printCreates(out io.Writer, creates []createResult) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\trows\tcreated\trefused\tposting\treq/s\tp50\tp99\tfm CPU/req\tPG CPU/req\tall Delivered\tfm+PG CPU/reg\tpool waits\t")
	for _, c := range creates {
		requests := c.created + failureCount(c.failures)
		delivered := seconds(c.delivery.after)
		if !c.delivery.all() {
			delivered = fmt.Sprintf("%d/%d", c.delivery.delivered, c.delivery.want)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t\n", c.Name, c.rowsBefore, c.created, requests-c.created,
			seconds(c.posting), c.rate(), msf(percentile(c.Latencies, .5)), msf(percentile(c.Latencies, .99)),
			msf(perRequest(c.postCPU.server, requests)), msf(perRequest(c.postCPU.db, requests)), delivered,
			msf(perRequest(c.ServerCPU+c.DBCPU, c.created)), c.postCPU.waits)
	}
	tw.Flush()
	for _, c := range creates {
		if len(c.failures) > 0 {
			fmt.Fprintf(out, "refused (%s): %s\n", c.Name, describeFailures(c.failures))
		}
	}
	fmt.Fprintln(out, "(rows: live registrations before; p50/p99: of the POSTs answered 202; CPU/req: user+system time of serve and")
	fmt.Fprintln(out, " of the database's backends while posting, per POST; all Delivered: from the first POST until every registration")
	fmt.Fprintln(out, " created had its Delivered condition True; fm+PG CPU/reg: serve's and the backends' time from the first POST")
	fmt.Fprintln(out, " until then, placement, publication and the agents' desired sets included, per registration created)")
}

func printBulk(out io.Writer, r *regResults) {
	o, b := r.opts, r.bulk
	fmt.Fprintln(out)
	switch {
	case o.BulkRegistrations == 0:
		fmt.Fprintln(out, "bulk onboarding: skipped (--bulk-registrations=0)")
		return
	case !b.offered:
		fmt.Fprintf(out, "bulk onboarding: not offered (no POST %s on this server)\n", batchPath)
		return
	}
	fmt.Fprintf(out, "bulk onboarding: %d registrations in batches of %d (each with an Idempotency-Key) from %d clients, each its own organisation, at %d rows\n",
		o.BulkRegistrations, o.BulkBatchSize, b.clients, b.rowsBefore)
	fmt.Fprintf(out, "  created %d, refused %d (%s); %d batches answered 200 of %d\n", b.created, failureCount(b.failures),
		describeFailures(b.failures), b.batches, o.batchCount())
	fmt.Fprintf(out, "  all answered after %s: %.0f items/s; batch p50 %s, p99 %s\n", seconds(b.answered), perSecond(b.created, b.answered),
		msf(percentile(b.Latencies, .5)), msf(percentile(b.Latencies, .99)))
	fmt.Fprintf(out, "  %s\n", deliveredFigures(b.delivery))
	fmt.Fprintf(out, "  CPU while answering: serve %s, PostgreSQL %s (%.2f ms and %.2f ms per item); until all Delivered: serve %s, PostgreSQL %s\n",
		seconds(b.postCPU.server), seconds(b.postCPU.db), float64(perRequest(b.postCPU.server, b.created))/float64(time.Millisecond),
		float64(perRequest(b.postCPU.db, b.created))/float64(time.Millisecond), seconds(b.ServerCPU), seconds(b.DBCPU))
}
