package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times on Linux.
const clockTicks = 100

// processCPU returns the user+system time of process pid from /proc.
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unreadable times", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// procStatusKB returns a "kB" field of /proc/<pid>/status (VmRSS, VmHWM) in bytes.
func procStatusKB(pid int, field string) (int64, error) {
	return fileFieldKB(fmt.Sprintf("/proc/%d/status", pid), field)
}

// fileFieldKB reads "<field>: <n> kB" from a /proc file, in bytes.
func fileFieldKB(path, field string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("%s: no %s", path, field)
}

// rssPoller samples a process's VmRSS and keeps the highest value, over the
// whole run and since the last resetPhase.
type rssPoller struct {
	pid     int
	peak    atomic.Int64
	phase   atomic.Int64
	samples atomic.Int64
}

// run samples every interval until ctx ends or the process is gone.
func (p *rssPoller) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *rssPoller) sample() {
	rss, err := procStatusKB(p.pid, "VmRSS")
	if err != nil {
		return
	}
	p.samples.Add(1)
	for _, v := range []*atomic.Int64{&p.peak, &p.phase} {
		for old := v.Load(); rss > old && !v.CompareAndSwap(old, rss); old = v.Load() {
		}
	}
}

func (p *rssPoller) resetPhase() {
	p.sample()
	rss, _ := procStatusKB(p.pid, "VmRSS")
	p.phase.Store(rss)
}

func (p *rssPoller) phasePeak() int64 {
	p.sample()
	return p.phase.Load()
}

// loadAverage returns /proc/loadavg's three averages.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if name, value, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}
