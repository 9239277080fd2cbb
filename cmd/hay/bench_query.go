package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

func runBenchQuery(args []string) error {
	fs := flag.NewFlagSet("bench query", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay bench query [--clients N] [--duration D] [--lines N]")
		fmt.Fprintln(fs.Output(), "\nStarts hay serve as a child process, pushes --lines generated lines, then runs")
		fmt.Fprintln(fs.Output(), "Loki log and metric queries and native searches from N clients for --duration;")
		fmt.Fprintln(fs.Output(), "prints p50/p99 per query kind.\n\nFlags:")
		fs.PrintDefaults()
	}
	clients := fs.Int("clients", 8, "concurrent querying clients")
	duration := fs.Duration("duration", 30*time.Second, "how long to query")
	lines := fs.Int("lines", 200_000, "lines pushed first (generated corpus, 8 streams, the last hour)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	d, err := os.MkdirTemp("", "hay-bench-query-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(d)
	srv, err := startBenchServer(filepath.Join(d, "data"), "--max-concurrent-queries", fmt.Sprint(2**clients))
	if err != nil {
		return err
	}
	defer srv.stop()
	const batch = 1000
	bodies, _, nbytes := pushBodies(max(1, *lines/batch), batch, "protobuf", 2)
	client := &http.Client{}
	for _, b := range bodies {
		if err := pushBody(client, srv.url, "protobuf", b); err != nil {
			return err
		}
	}
	fmt.Printf("pushed %d lines (%.1f MB)\n", len(bodies)*batch, float64(nbytes)/1e6)

	now := time.Now()
	start, end := now.Add(-2*time.Hour).UnixNano(), now.Add(time.Minute).UnixNano()
	type kind struct {
		name, path string
	}
	kinds := []kind{
		{"loki log query, filter, limit 100", fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&limit=100",
			url.QueryEscape(`{app="payments"} |= "error"`), start, end)},
		{"loki metric sum by count_over_time", fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&step=60",
			url.QueryEscape(`sum by (app) (count_over_time({app=~".+"} |= "timeout" [1m]))`), start, end)},
		{"native search literal, limit 100", fmt.Sprintf("/api/v1/search?q=%s&start=%d&end=%d&limit=100",
			url.QueryEscape("user_id="), start, end)},
	}
	var mu sync.Mutex
	lat := make([][]time.Duration, len(kinds))
	var fails int
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	for c := range *clients {
		wg.Go(func() {
			client := &http.Client{}
			for i := c; time.Now().Before(deadline); i++ {
				k := i % len(kinds)
				t0 := time.Now()
				resp, err := client.Get(srv.url + kinds[k].path)
				ok := err == nil
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					ok = resp.StatusCode == 200
				}
				d := time.Since(t0)
				mu.Lock()
				if ok {
					lat[k] = append(lat[k], d)
				} else {
					fails++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	pct := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[min(len(ds)-1, int(float64(len(ds))*p))]
	}
	var all []time.Duration
	fmt.Printf("%d clients for %s, %d failed requests\n", *clients, *duration, fails)
	for k := range kinds {
		slices.Sort(lat[k])
		all = append(all, lat[k]...)
		fmt.Printf("  %-38s n=%-6d p50=%-10s p99=%s\n", kinds[k].name, len(lat[k]), pct(lat[k], 0.5).Round(10*time.Microsecond), pct(lat[k], 0.99).Round(10*time.Microsecond))
	}
	slices.Sort(all)
	fmt.Printf("  %-38s n=%-6d p50=%-10s p99=%s (%.1f queries/s)\n", "all", len(all), pct(all, 0.5).Round(10*time.Microsecond), pct(all, 0.99).Round(10*time.Microsecond), float64(len(all))/duration.Seconds())
	return nil
}
