package metrics

import (
	"runtime"
	"runtime/debug"
	"time"
)

// goMetricNames are the families RegisterGoMetrics adds: the ones Grafana's
// Go dashboards read, with client_golang's names, types and help texts.
var goMetricNames = [...]string{
	"go_gc_duration_seconds",
	"go_goroutines",
	"go_info",
	"go_memstats_alloc_bytes",
	"go_memstats_alloc_bytes_total",
	"go_memstats_heap_alloc_bytes",
	"go_memstats_heap_inuse_bytes",
	"go_memstats_heap_objects",
	"go_memstats_last_gc_time_seconds",
	"go_memstats_next_gc_bytes",
	"go_memstats_sys_bytes",
	"go_sched_gomaxprocs_threads",
	"go_threads",
}

type goCollector struct{}

// RegisterGoMetrics registers the standard go_* metrics: goroutines,
// threads, heap and GC figures, and go_info{version}. go_gc_duration_seconds
// is a summary (quantiles 0, 0.25, 0.5, 0.75, 1) of the recent stop-the-world
// pauses from debug.ReadGCStats, as in client_golang; it costs a copy and a
// sort of at most 256 durations per scrape and nothing between scrapes.
//
// The memory figures come from runtime.ReadMemStats, which stops the world
// for a few microseconds per scrape. runtime/metrics would not, but its
// package init builds a table (~0.1 ms, 95 allocations here) in every
// process that links it, which is what this package exists to avoid.
func (r *Registry) RegisterGoMetrics() {
	r.register(goCollector{}, goMetricNames[:]...)
}

func (goCollector) collect(out []family) []family {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g := func(name, help string, x float64) family {
		return family{name, help, "gauge", appendSample(nil, name, "", x)}
	}
	threads, _ := runtime.ThreadCreateProfile(nil)
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	var sum []byte
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		x := 0.0
		if gc.NumGC > 0 {
			x = gc.PauseQuantiles[i].Seconds()
		}
		sum = appendSample(sum, "go_gc_duration_seconds", "", x, "quantile", q)
	}
	sum = appendSample(sum, "go_gc_duration_seconds", "_sum", gc.PauseTotal.Seconds())
	sum = appendSample(sum, "go_gc_duration_seconds", "_count", float64(gc.NumGC))
	lastGC := 0.0
	if !gc.LastGC.IsZero() {
		lastGC = float64(gc.LastGC.UnixNano()) / 1e9
	}
	return append(out,
		family{"go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", "summary", sum},
		g("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		family{"go_info", "Information about the Go environment.", "gauge", appendSample(nil, "go_info", "", 1, "version", runtime.Version())},
		g("go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", float64(ms.Alloc)),
		family{"go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", "counter",
			appendSample(nil, "go_memstats_alloc_bytes_total", "", float64(ms.TotalAlloc))},
		g("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", float64(ms.Alloc)),
		g("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", float64(ms.HeapInuse)),
		g("go_memstats_heap_objects", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", float64(ms.HeapObjects)),
		g("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", lastGC),
		g("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", float64(ms.NextGC)),
		g("go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", float64(ms.Sys)),
		g("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", float64(runtime.GOMAXPROCS(0))),
		g("go_threads", "Number of OS threads created.", float64(threads)),
	)
}
