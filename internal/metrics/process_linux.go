package metrics

import (
	"os"
	"sync"
	"syscall"
)

// userHZ is the unit of the clock-tick fields of /proc/<pid>/stat: Linux
// reports them in USER_HZ, 100 on every architecture Go supports
// (client_golang's procfs assumes the same).
const userHZ = 100

type processCollector struct {
	once  sync.Once
	start float64 // seconds since the epoch; 0 if unknown
}

// startTime computes the process start time once: it does not change, and
// /proc/stat is long on machines with many cores.
func (p *processCollector) startTime(st procStat) float64 {
	p.once.Do(func() {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return
		}
		if bt, err := parseBootTime(b); err == nil {
			p.start = float64(bt) + float64(st.starttime)/userHZ
		}
	})
	return p.start
}

func (p *processCollector) collect(out []family) []family {
	g := func(name, help string, x float64) family {
		return family{name, help, "gauge", appendSample(nil, name, "", x)}
	}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		if st, err := parseStat(b); err == nil {
			out = append(out,
				family{"process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter",
					appendSample(nil, "process_cpu_seconds_total", "", float64(st.utime+st.stime)/userHZ)},
				g("process_resident_memory_bytes", "Resident memory size in bytes.", float64(st.rss)*float64(os.Getpagesize())),
				g("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(st.vsize)))
			if start := p.startTime(st); start != 0 {
				out = append(out, g("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", start))
			}
		}
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, err := d.Readdirnames(-1)
		d.Close()
		if err == nil {
			out = append(out, g("process_open_fds", "Number of open file descriptors.", float64(len(names))))
		}
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		out = append(out, g("process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur)))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		out = append(out, g("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", float64(lim.Cur)))
	}
	return out
}
