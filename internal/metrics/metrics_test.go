package metrics

import (
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"haystack/internal/metrics/metricstest"
)

// TestExactText compares a small registry's exposition byte for byte.
func TestExactText(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounter("b_total", "A counter; help with \\ and\nnewline.")
	v := r.NewCounterVec("a_total", "A vector.", "reason")
	h := r.NewHistogram("c_seconds", "A histogram.", []float64{0.5, 1, 2})
	hv := r.NewHistogramVec("d_seconds", "A histogram vector.", []float64{1, math.Inf(1)}, "format")
	r.NewGaugeFunc("e", "A gauge function.", func() float64 { return -2.5 })
	r.NewCounterVec("f_total", "An empty vector is left out.", "x")

	c.Inc()
	c.Add(2)
	c.Add(0.25)
	v.WithLabelValues(`q"b\s` + "\nn").Inc()
	v.WithLabelValues("zeta").Add(3)
	v.WithLabelValues("alpha").Inc()
	v.WithLabelValues("alpha").Inc()
	v.WithLabelValues("").Inc()
	// Bounds are inclusive: 0.5 falls in le="0.5", 1 in le="1", 2 in le="2".
	for _, x := range []float64{0.5, 0.25, 1, 2, 2.0000001, 100} {
		h.Observe(x)
	}
	hv.WithLabelValues("json").Observe(1)
	hv.WithLabelValues("json").Observe(1.5)
	hv.WithLabelValues("b").Observe(0)

	want := `# HELP a_total A vector.
# TYPE a_total counter
a_total{reason=""} 1
a_total{reason="alpha"} 2
a_total{reason="q\"b\\s\nn"} 1
a_total{reason="zeta"} 3
# HELP b_total A counter; help with \\ and\nnewline.
# TYPE b_total counter
b_total 3.25
# HELP c_seconds A histogram.
# TYPE c_seconds histogram
c_seconds_bucket{le="0.5"} 2
c_seconds_bucket{le="1"} 3
c_seconds_bucket{le="2"} 4
c_seconds_bucket{le="+Inf"} 6
c_seconds_sum 105.7500001
c_seconds_count 6
# HELP d_seconds A histogram vector.
# TYPE d_seconds histogram
d_seconds_bucket{format="b",le="1"} 1
d_seconds_bucket{format="b",le="+Inf"} 1
d_seconds_sum{format="b"} 0
d_seconds_count{format="b"} 1
d_seconds_bucket{format="json",le="1"} 1
d_seconds_bucket{format="json",le="+Inf"} 2
d_seconds_sum{format="json"} 2.5
d_seconds_count{format="json"} 2
# HELP e A gauge function.
# TYPE e gauge
e -2.5
`
	got := string(r.AppendText(nil))
	if got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
	if _, err := metricstest.Parse(got); err != nil {
		t.Errorf("own output does not parse: %v", err)
	}
	var sb strings.Builder
	if n, err := r.WriteTo(&sb); err != nil || n != int64(len(want)) || sb.String() != want {
		t.Errorf("WriteTo: %d %v", n, err)
	}
}

func TestFloatFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {8, "8"}, {1e21, "1e+21"}, {0.0001, "0.0001"}, {1e-05, "1e-05"},
		{1.581056e+06, "1.581056e+06"}, {math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
	} {
		if got := string(appendFloat(nil, c.v)); got != c.want {
			t.Errorf("appendFloat(%v) = %s, want %s", c.v, got, c.want)
		}
	}
}

func TestCounterAdd(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounter("x", "")
	c.Add(1 << 62)
	c.Add(1e30) // too large for the integer path
	c.Add(0.5)
	if got, want := c.Value(), float64(1<<62)+1e30+0.5; got != want {
		t.Errorf("value %v, want %v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("negative Add did not panic")
		}
	}()
	c.Add(-1)
}

func TestHistogramNaN(t *testing.T) {
	r := NewRegistry()
	h := r.NewHistogram("h", "", []float64{1})
	h.Observe(math.NaN())
	want := "# HELP h \n# TYPE h histogram\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\nh_sum NaN\nh_count 1\n"
	if got := string(r.AppendText(nil)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestInvalidUTF8LabelValue(t *testing.T) {
	r := NewRegistry()
	v := r.NewCounterVec("x_total", "", "k")
	v.WithLabelValues("a\xffb").Inc()
	v.WithLabelValues("a\xfeb").Inc()
	v.WithLabelValues("a\uFFFDb").Inc()
	want := "# HELP x_total \n# TYPE x_total counter\nx_total{k=\"a\uFFFDb\"} 3\n"
	if got := string(r.AppendText(nil)); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestRegisterPanics(t *testing.T) {
	for name, f := range map[string]func(r *Registry){
		"duplicate":           func(r *Registry) { r.NewCounter("a", ""); r.NewGaugeFunc("a", "", nil) },
		"bad name":            func(r *Registry) { r.NewCounter("a-b", "") },
		"empty name":          func(r *Registry) { r.NewCounter("", "") },
		"digit first":         func(r *Registry) { r.NewCounter("1a", "") },
		"bad label":           func(r *Registry) { r.NewCounterVec("a", "", "a:b") },
		"reserved label":      func(r *Registry) { r.NewCounterVec("a", "", "__a") },
		"le label":            func(r *Registry) { r.NewHistogramVec("a", "", []float64{1}, "le") },
		"unsorted buckets":    func(r *Registry) { r.NewHistogram("a", "", []float64{2, 1}) },
		"equal buckets":       func(r *Registry) { r.NewHistogram("a", "", []float64{1, 1}) },
		"NaN bucket":          func(r *Registry) { r.NewHistogram("a", "", []float64{math.NaN()}) },
		"go metric twice":     func(r *Registry) { r.RegisterGoMetrics(); r.NewCounter("go_threads", "") },
		"process metric used": func(r *Registry) { r.NewCounter("process_open_fds", ""); r.RegisterProcessMetrics() },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(NewRegistry())
		}()
	}
	// Valid edge cases do not panic.
	r := NewRegistry()
	r.NewCounter("a:b_c9", "")
	r.NewCounterVec("_x", "", "_y9")
	r.NewHistogram("h", "", nil)
}

func TestExponentialBuckets(t *testing.T) {
	b := ExponentialBuckets(0.0005, 2, 4)
	want := []float64{0.0005, 0.001, 0.002, 0.004}
	if len(b) != len(want) {
		t.Fatalf("%v", b)
	}
	for i := range b {
		if b[i] != want[i] {
			t.Errorf("%v, want %v", b, want)
		}
	}
}

// TestConcurrent hammers every kind from many goroutines while scraping,
// then checks exact totals. Run with -race.
func TestConcurrent(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounter("c_total", "")
	cv := r.NewCounterVec("cv_total", "", "k")
	h := r.NewHistogram("h", "", []float64{1, 2})
	hv := r.NewHistogramVec("hv", "", []float64{1}, "k")
	r.RegisterGoMetrics()
	r.RegisterProcessMetrics()
	const workers, iters = 8, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		var err error
		for {
			select {
			case <-stop:
				scraped <- err
				return
			default:
			}
			if _, e := metricstest.Parse(string(r.AppendText(nil))); e != nil && err == nil {
				err = e
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			for i := range iters {
				c.Inc()
				c.Add(0.5)
				k := strconv.Itoa(i % 5)
				cv.WithLabelValues(k).Inc()
				h.Observe(float64(i%3) + 0.5) // 0.5, 1.5, 2.5: one per bucket
				hv.WithLabelValues(strconv.Itoa(w)).Observe(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-scraped; err != nil {
		t.Errorf("a concurrent scrape was invalid: %v", err)
	}
	if got, want := c.Value(), 1.5*workers*iters; got != want {
		t.Errorf("counter %v, want %v", got, want)
	}
	fams, err := metricstest.Parse(string(r.AppendText(nil)))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]metricstest.Family{}
	for _, f := range fams {
		byName[f.Name] = f
	}
	for _, s := range byName["cv_total"].Samples {
		if s.Value != workers*iters/5 {
			t.Errorf("cv_total %v = %v, want %v", s.Labels, s.Value, workers*iters/5)
		}
	}
	if n := len(byName["cv_total"].Samples); n != 5 {
		t.Errorf("%d cv_total children, want 5", n)
	}
	n := float64(workers * iters)
	hs := byName["h"].Samples
	third := float64(workers * ((iters + 2) / 3))  // i%3 == 0
	second := float64(workers * ((iters + 1) / 3)) // i%3 == 1
	for i, want := range []float64{third, third + second, n} {
		if hs[i].Value != want {
			t.Errorf("h bucket %d = %v, want %v", i, hs[i].Value, want)
		}
	}
	rest := n - third - second
	if sum := hs[len(hs)-2]; sum.Name != "h_sum" || sum.Value != 0.5*third+1.5*second+2.5*rest {
		t.Errorf("%s %v, want h_sum %v", sum.Name, sum.Value, 0.5*third+1.5*second+2.5*rest)
	}
	if hs[len(hs)-1].Value != n {
		t.Errorf("h_count %v, want %v", hs[len(hs)-1].Value, n)
	}
	if got := len(byName["hv"].Samples); got != workers*4 {
		t.Errorf("%d hv samples, want %d", got, workers*4)
	}
	for _, s := range byName["hv"].Samples {
		if s.Name == "hv_count" && s.Value != iters {
			t.Errorf("hv_count %v = %v, want %d", s.Labels, s.Value, iters)
		}
	}
}

func TestHandler(t *testing.T) {
	r := NewRegistry()
	r.NewCounter("a_total", "A.").Add(7)
	want := "# HELP a_total A.\n# TYPE a_total counter\na_total 7\n"
	for _, enc := range []string{"", "gzip", "deflate, gzip;q=0.5", "gzip;q=0", "identity"} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		rec := httptest.NewRecorder()
		r.Handler().ServeHTTP(rec, req)
		resp := rec.Result()
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("%q: Content-Type %q", enc, ct)
		}
		var body io.Reader = resp.Body
		gz := resp.Header.Get("Content-Encoding") == "gzip"
		if wantGz := strings.Contains(enc, "gzip") && !strings.Contains(enc, "q=0,") && !strings.HasSuffix(enc, "q=0"); gz != wantGz {
			t.Errorf("%q: gzip %v, want %v", enc, gz, wantGz)
		}
		if gz {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		if resp.StatusCode != http.StatusOK || string(b) != want {
			t.Errorf("%q: %d %q", enc, resp.StatusCode, b)
		}
	}
}
