package metrics

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"haystack/internal/metrics/metricstest"
)

// TestStandardMetrics checks the go_* and process_* families: valid text,
// client_golang's names and types, and plausible values.
func TestStandardMetrics(t *testing.T) {
	r := NewRegistry()
	r.RegisterGoMetrics()
	r.RegisterProcessMetrics()
	runtime.GC() // so the GC summary has a pause to report
	fams, err := metricstest.Parse(string(r.AppendText(nil)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]metricstest.Family{}
	for _, f := range fams {
		got[f.Name] = f
	}
	want := map[string]string{
		"go_gc_duration_seconds": "summary", "go_goroutines": "gauge", "go_info": "gauge",
		"go_memstats_alloc_bytes": "gauge", "go_memstats_alloc_bytes_total": "counter",
		"go_memstats_heap_alloc_bytes": "gauge", "go_memstats_heap_inuse_bytes": "gauge",
		"go_memstats_heap_objects": "gauge", "go_memstats_last_gc_time_seconds": "gauge",
		"go_memstats_next_gc_bytes": "gauge", "go_memstats_sys_bytes": "gauge",
		"go_sched_gomaxprocs_threads": "gauge", "go_threads": "gauge",
	}
	if runtime.GOOS == "linux" {
		for k, v := range map[string]string{
			"process_cpu_seconds_total": "counter", "process_max_fds": "gauge", "process_open_fds": "gauge",
			"process_resident_memory_bytes": "gauge", "process_start_time_seconds": "gauge",
			"process_virtual_memory_bytes": "gauge", "process_virtual_memory_max_bytes": "gauge",
		} {
			want[k] = v
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d families, want %d", len(got), len(want))
	}
	for name, typ := range want {
		if f, ok := got[name]; !ok || f.Type != typ || f.Help == "" {
			t.Errorf("%s: %+v, want type %s with help", name, f, typ)
		}
	}
	val := func(name string) float64 {
		f := got[name]
		if len(f.Samples) == 0 {
			return -1
		}
		return f.Samples[0].Value
	}
	if v, _ := got["go_info"].Samples[0].Get("version"); v != runtime.Version() {
		t.Errorf("go_info version %q", v)
	}
	positive := []string{"go_goroutines", "go_threads", "go_memstats_alloc_bytes", "go_memstats_alloc_bytes_total",
		"go_memstats_heap_inuse_bytes", "go_memstats_heap_objects", "go_memstats_next_gc_bytes", "go_memstats_sys_bytes",
		"go_sched_gomaxprocs_threads", "go_memstats_last_gc_time_seconds"}
	if runtime.GOOS == "linux" {
		positive = append(positive, "process_max_fds", "process_open_fds", "process_resident_memory_bytes",
			"process_virtual_memory_bytes", "process_virtual_memory_max_bytes")
	}
	for _, name := range positive {
		if !(val(name) > 0) {
			t.Errorf("%s = %v, want > 0", name, val(name))
		}
	}
	if val("go_memstats_heap_inuse_bytes") < val("go_memstats_alloc_bytes") {
		t.Errorf("heap in use %v < allocated %v", val("go_memstats_heap_inuse_bytes"), val("go_memstats_alloc_bytes"))
	}
	if v := val("go_sched_gomaxprocs_threads"); v != float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("go_sched_gomaxprocs_threads %v", v)
	}
	gc := got["go_gc_duration_seconds"].Samples
	if len(gc) != 7 || gc[6].Name != "go_gc_duration_seconds_count" || gc[6].Value < 1 {
		t.Errorf("go_gc_duration_seconds: %+v", gc)
	}
	now := float64(time.Now().UnixNano()) / 1e9
	if lg := val("go_memstats_last_gc_time_seconds"); lg > now+1 || lg < now-600 {
		t.Errorf("last GC %v, now %v", lg, now)
	}
	if runtime.GOOS == "linux" {
		// The test binary started within the last 10 minutes (and a
		// second of /proc tick rounding).
		if st := val("process_start_time_seconds"); st > now+1 || st < now-600 {
			t.Errorf("process_start_time_seconds %v, now %v", st, now)
		}
		if cpu := val("process_cpu_seconds_total"); cpu < 0 || cpu > 600 {
			t.Errorf("process_cpu_seconds_total %v", cpu)
		}
		// One more open file shows up in the next scrape.
		before := val("process_open_fds")
		f, err := os.Open(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fams, _ := metricstest.Parse(string(r.AppendText(nil)))
		for _, fam := range fams {
			if fam.Name == "process_open_fds" && fam.Samples[0].Value != before+1 {
				t.Errorf("open fds %v after opening one more, was %v", fam.Samples[0].Value, before)
			}
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses; fields from proc(5).
	line := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 7 0 123456 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := (procStat{utime: 150, stime: 25, starttime: 123456, vsize: 987654321, rss: 2048}); st != want {
		t.Errorf("got %+v, want %+v", st, want)
	}
	for _, bad := range []string{
		"", "4242 cmd S 1", "4242 (cmd) S 1 2 3",
		"4242 (cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 x 25 0 0 20 0 7 0 123456 987654321 2048\n",
		"4242 (cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 7 0 123456 987654321 -\n",
	} {
		if st, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) = %+v, want an error", bad, st)
		}
	}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		if st, err := parseStat(b); err != nil || st.vsize == 0 || st.rss <= 0 {
			t.Errorf("own /proc/self/stat: %+v %v", st, err)
		}
	}
}

func TestParseBootTime(t *testing.T) {
	b := "cpu  1 2 3\nintr 5\nbtime 1796000000\nprocesses 9\n"
	if n, err := parseBootTime([]byte(b)); err != nil || n != 1796000000 {
		t.Errorf("got %d %v", n, err)
	}
	for _, bad := range []string{"", "cpu 1\n", "btime x\n", "btime\n", "xbtime 5\n"} {
		if n, err := parseBootTime([]byte(bad)); err == nil {
			t.Errorf("parseBootTime(%q) = %d, want an error", bad, n)
		}
	}
	if n, err := parseBootTime([]byte("btime 7")); err != nil || n != 7 {
		t.Errorf("no final newline: %d %v", n, err)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (a) S 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 3 4 5\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStat(b)
		if err != nil && st != (procStat{}) {
			t.Fatalf("error %v with a non-zero result %+v", err, st)
		}
	})
}

// FuzzLabelValue writes a counter with an arbitrary label value and as
// its help text, and checks the strict parser reads both back (after
// UTF-8 repair).
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s` + "\nn", "\\", "\"", "\n", "a\xffb", "}", ",x=\"y\"", "\\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := NewRegistry()
		r.NewCounterVec("x_total", v, "k").WithLabelValues(v).Inc()
		fams, err := metricstest.Parse(string(r.AppendText(nil)))
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		s := fams[0].Samples[0]
		got, _ := s.Get("k")
		if want := strings.ToValidUTF8(v, "\uFFFD"); got != want || fams[0].Help != want || s.Value != 1 {
			t.Fatalf("label %q read back as %q (help %q)", v, got, fams[0].Help)
		}
	})
}
