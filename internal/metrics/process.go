package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// processMetricNames are the families RegisterProcessMetrics adds (on
// Linux; elsewhere none is written).
var processMetricNames = [...]string{
	"process_cpu_seconds_total",
	"process_max_fds",
	"process_open_fds",
	"process_resident_memory_bytes",
	"process_start_time_seconds",
	"process_virtual_memory_bytes",
	"process_virtual_memory_max_bytes",
}

// RegisterProcessMetrics registers the standard process_* metrics (CPU
// time, memory, file descriptors, start time), read from /proc/self at each
// scrape on Linux. On other systems they are registered but never written.
// A figure that cannot be read is left out of that scrape.
func (r *Registry) RegisterProcessMetrics() {
	r.register(&processCollector{}, processMetricNames[:]...)
}

// procStat holds the fields of /proc/<pid>/stat that the metrics use.
type procStat struct {
	utime, stime uint64 // clock ticks
	starttime    uint64 // clock ticks after boot
	vsize        uint64 // bytes
	rss          int64  // pages
}

// parseStat parses /proc/<pid>/stat (proc(5)). The command name, field 2,
// is in parentheses and may itself contain spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	var st procStat
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || bytes.IndexByte(b, '(') < 0 {
		return st, errors.New("metrics: /proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return st, fmt.Errorf("metrics: /proc stat: %d fields after the command name, want at least 22", len(f))
	}
	var err error
	u := func(n int) uint64 {
		v, e := strconv.ParseUint(string(f[n-3]), 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("metrics: /proc stat field %d: %w", n, e)
		}
		return v
	}
	st.utime, st.stime, st.starttime, st.vsize = u(14), u(15), u(22), u(23)
	rss, e := strconv.ParseInt(string(f[24-3]), 10, 64)
	if e != nil && err == nil {
		err = fmt.Errorf("metrics: /proc stat field 24: %w", e)
	}
	st.rss = rss
	if err != nil {
		return procStat{}, err
	}
	return st, nil
}

// parseBootTime returns the btime line of /proc/stat: boot time in seconds
// since the epoch.
func parseBootTime(b []byte) (uint64, error) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("metrics: /proc/stat btime: %w", err)
			}
			return n, nil
		}
	}
	return 0, errors.New("metrics: /proc/stat has no btime line")
}
