package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// poolWaits scrapes the serve child's /metrics for how often, and how long in
// all, its requests waited for a database connection (the pool's
// go_sql_wait_* counters).
func (s *server) poolWaits(ctx context.Context) (float64, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.metricsURL, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("scraping %s: %w", s.metricsURL, err)
	}
	defer resp.Body.Close()
	var count, seconds float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "go_sql_wait_count_total"):
			count += sampleValue(line)
		case strings.HasPrefix(line, "go_sql_wait_duration_seconds_total"):
			seconds += sampleValue(line)
		}
	}
	return count, time.Duration(seconds * float64(time.Second)), sc.Err()
}

// sampleValue is the value of a Prometheus text-format sample line.
func sampleValue(line string) float64 {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[len(f)-1], 64)
	return v
}

// logKey groups a JSON log line by level and message; lines below WARN and
// lines that are not JSON fall into "other".
func logKey(line string) string {
	var entry struct {
		Level string `json:"level"`
		Msg   string `json:"msg"`
	}
	if json.Unmarshal([]byte(line), &entry) != nil || (entry.Level != "WARN" && entry.Level != "ERROR") {
		return "other"
	}
	return entry.Level + " " + entry.Msg
}

// topCounts returns the n most frequent keys but "other", as "count x key".
func topCounts(counts map[string]int, n int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		if k != "other" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	out := make([]string, 0, n)
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%d x %s", counts[k], k))
	}
	return out
}
