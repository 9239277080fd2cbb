package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
)

// postRaw sends a push from any goroutine (testEnv.do may call Fatal)
// and returns status, Retry-After and body.
func postRaw(url, ct string, body []byte) (int, string, string, error) {
	resp, err := http.Post(url, ct, bytes.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), b.String(), nil
}

// waitWaiting waits until pushes of want bytes wait for budget.
func waitWaiting(t *testing.T, s *Server, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.pushLim.mu.Lock()
		got := s.pushLim.waiting
		s.pushLim.mu.Unlock()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes waiting for push budget, want %d", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPushBudget: a body over --max-inflight-push-bytes is 413; a push
// that finds the budget taken waits, and gets 429 with Retry-After when
// none frees in time (or when as many bytes already wait), or is stored
// once a push in flight releases it. The budget counts decompressed
// bytes (a snappy body is counted decoded).
func TestPushBudget(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxInflightPushBytes = 1000
		c.PushQueueWait = 50 * time.Millisecond
	})
	push := "/loki/api/v1/push"
	body := jsonPush(`{"app":"a"}`, t0, "x0", "x1") // < 200 bytes
	if len(body) > 200 {
		t.Fatalf("body of %d bytes", len(body))
	}

	// Over the whole budget: 413, as a body over --max-body. Snappy
	// makes 1100 bytes of this 60-byte body.
	big := snappy.Encode(nil, EncodePushProto([]PushStream{{Labels: `{app="big"}`, Entries: []PushEntry{{Time: t0, Line: strings.Repeat("b", 1100)}}}}))
	if len(big) >= 1000 {
		t.Fatalf("snappy body of %d bytes", len(big))
	}
	code, body2 := e.do("POST", push, big, "Content-Type", "application/x-protobuf")
	if code != 413 || !strings.Contains(body2, "exceeds --max-inflight-push-bytes (1000)") || !strings.Contains(body2, "nothing was stored") {
		t.Errorf("body over the budget: %d %s", code, body2)
	}

	// The budget taken (as by a push in flight): 429 after the wait.
	release, err := e.srv.admitPush(t.Context(), 950)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, ra, msg, err := postRaw(e.ts.URL+push, "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	if code != 429 || ra != "1" || !strings.Contains(msg, "too many push bytes in flight (950 of --max-inflight-push-bytes 1000; waited up to 50ms); nothing was stored") {
		t.Errorf("push with the budget taken: %d Retry-After %q %s", code, ra, msg)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("answered after %s, before the 50ms wait", d)
	}
	// OTLP too, in its own status form.
	otlp := otlpJSONReq([]tRes{{attrs: []tkv{kvS("service.name", "o")}, scopes: []tScope{{recs: []tRec{{time: uint64(t0), body: strBody("o0")}}}}}})
	if code, _, b := e.otlpPost(otlp, "Content-Type", "application/json"); code != 429 || !strings.Contains(string(b), "too many push bytes in flight") {
		t.Errorf("otlp push with the budget taken: %d %s", code, b)
	}

	release()

	// A push waiting when the budget frees is stored.
	e = newEnv(t, func(c *Config) {
		c.MaxInflightPushBytes = 1000
		c.PushQueueWait = 10 * time.Second
	})
	if release, err = e.srv.admitPush(t.Context(), 950); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		code, _, msg, err := postRaw(e.ts.URL+push, "application/json", body)
		done <- fmt.Sprint(code, " ", msg, err)
	}()
	waitWaiting(t, e.srv, int64(len(body)))
	// As many bytes as the budget waiting: the next push is refused at
	// once rather than holding its body too.
	e.srv.pushLim.mu.Lock()
	e.srv.pushLim.waiting += 1000 - int64(len(body))
	e.srv.pushLim.mu.Unlock()
	start = time.Now()
	if code, ra, msg, _ := postRaw(e.ts.URL+push, "application/json", jsonPush(`{"app":"b"}`, t0, "y")); code != 429 || ra != "1" || time.Since(start) > 5*time.Second {
		t.Errorf("push with the wait queue full: %d %q %s after %s", code, ra, msg, time.Since(start))
	}
	e.srv.pushLim.mu.Lock()
	e.srv.pushLim.waiting -= 1000 - int64(len(body))
	e.srv.pushLim.mu.Unlock()
	release()
	if got := <-done; got != "204 <nil>" {
		t.Errorf("waiting push: %s", got)
	}
	wantLines(t, "stored", e.otlpRead("fake", `{app=~".+"}`), streamLines("app=a,service_name=a", "x0", "x1"))
	pl := &e.srv.pushLim
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.inflight != 0 || pl.waiting != 0 || pl.freed != nil {
		t.Errorf("budget after the pushes: inflight %d, waiting %d, freed %v", pl.inflight, pl.waiting, pl.freed)
	}
}

// TestPushBudgetConcurrent: many concurrent pushes through a budget of
// three bodies: three run, three wait their turn, the others get 429
// with Retry-After at once and retry, as shippers do. All end stored
// exactly once, and the bytes in flight never pass the budget.
func TestPushBudgetConcurrent(t *testing.T) {
	const clients = 16
	body := func(i int) []byte { return jsonPush(fmt.Sprintf(`{"app":"c%02d"}`, i), t0, "l0", "l1", "l2") }
	n := int64(len(body(0)))
	e := newEnv(t, func(c *Config) {
		c.MaxInflightPushBytes = 3 * n
		c.PushQueueWait = 30 * time.Second
	})
	var wg sync.WaitGroup
	var retried atomic.Int32
	for i := range clients {
		wg.Go(func() {
			for {
				code, ra, msg, err := postRaw(e.ts.URL+"/loki/api/v1/push", "application/json", body(i))
				if code == 429 && ra == "1" {
					retried.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if code != 204 {
					t.Errorf("push %d: %d %s %v", i, code, msg, err)
				}
				return
			}
		})
	}
	wg.Wait()
	t.Logf("%d retries", retried.Load())
	if n := e.storedCount("fake"); n != 3*clients {
		t.Errorf("stored %d entries, want %d", n, 3*clients)
	}
	e.srv.pushLim.mu.Lock()
	p := e.srv.pushLim.peak
	e.srv.pushLim.mu.Unlock()
	if p > 3*n || p < n {
		t.Errorf("peak bytes in flight %d, want within [%d, %d]", p, n, 3*n)
	}
}

// BenchmarkPushMemory pushes one body and reports the bytes allocated
// and the peak growth of the heap's objects per entry, which bound what
// the push path holds at once. protobuf: one-byte lines, one stream (the
// E4 workload: hay serve's memory was ~250 bytes an entry). jsonl: lines
// alternating between two label objects (E4: 928 MB for 800,000 lines).
func BenchmarkPushMemory(b *testing.B) {
	const entries = 500_000
	b.Run("protobuf", func(b *testing.B) {
		es := make([]PushEntry, entries)
		for i := range es {
			es[i] = PushEntry{Time: t0 + int64(i), Line: "x"}
		}
		body := snappy.Encode(nil, EncodePushProto([]PushStream{{Labels: `{app="mem"}`, Entries: es}}))
		benchPushMemory(b, "/loki/api/v1/push", "application/x-protobuf", body, entries)
	})
	b.Run("jsonl", func(b *testing.B) {
		const n = entries / 5
		var body bytes.Buffer
		for i := range n {
			fmt.Fprintf(&body, `{"labels":{"app":"mem","pod":"p%d"},"ts":"%d","line":"a line of the push"}`+"\n", i%2, t0+int64(i))
		}
		benchPushMemory(b, "/api/v1/push/jsonl", "application/x-ndjson", body.Bytes(), n)
	})
}

func benchPushMemory(b *testing.B, path, ct string, body []byte, entries int) {
	b.SetBytes(int64(len(body)))
	var alloc, peak float64
	for b.Loop() {
		b.StopTimer()
		s, err := New(Config{DataDir: b.TempDir(), RejectOlderThan: -1, RejectNewerThan: -1})
		if err != nil {
			b.Fatal(err)
		}
		h := s.Handler()
		runtime.GC()
		sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		rtmetrics.Read(sample)
		before := sample[0].Value.Uint64()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		stop := make(chan struct{})
		var max uint64
		var wg sync.WaitGroup
		wg.Go(func() {
			s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			for {
				rtmetrics.Read(s)
				if v := s[0].Value.Uint64(); v > max {
					max = v
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Microsecond):
				}
			}
		})
		b.StartTimer()
		req, _ := http.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		w := newDiscardWriter()
		h.ServeHTTP(w, req)
		b.StopTimer()
		close(stop)
		wg.Wait()
		runtime.ReadMemStats(&ms1)
		if w.code != http.StatusNoContent {
			b.Fatalf("push: %d", w.code)
		}
		alloc += float64(ms1.TotalAlloc - ms0.TotalAlloc)
		peak += float64(max - before)
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(alloc/float64(b.N)/float64(entries), "alloc-B/entry")
	b.ReportMetric(peak/float64(b.N)/float64(entries), "peak-heap-B/entry")
}

// discardWriter is an http.ResponseWriter that keeps only the status.
type discardWriter struct {
	h    http.Header
	code int
}

func newDiscardWriter() *discardWriter               { return &discardWriter{h: http.Header{}, code: 200} }
func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// TestValidateInPlace: the decoders lay a push's entries out in one
// array, stream after stream, and validate keeps the valid ones in it;
// the result equals a naive filter of a copy, with invalid entries at the
// start, middle and end of streams and streams left empty.
func TestValidateInPlace(t *testing.T) {
	s := &Server{cfg: Config{Now: func() time.Time { return time.Unix(0, base) }, MaxLine: 4, MaxLabels: 15,
		MaxLabelNameBytes: 1024, MaxLabelValueBytes: 2048, RejectOlderThan: time.Hour}}
	old := base - 2*int64(time.Hour)
	var ps []PushStream
	type want struct {
		labels string
		time   int64
		line   string
	}
	var oracle []want
	total := 0
	for i := range 6 {
		p := PushStream{Labels: fmt.Sprintf(`{app="s%d"}`, i)}
		for j := range i * 3 {
			e := PushEntry{Time: base - int64(j), Line: fmt.Sprint(j)}
			switch (i + j) % 4 {
			case 1:
				e.Time = old // too old
			case 2:
				e.Line = "longer" // over MaxLine
			}
			p.Entries = append(p.Entries, e)
			total++
			if e.Time != old && len(e.Line) <= 4 {
				// service_name from app (discoverServiceName).
				oracle = append(oracle, want{fmt.Sprintf(`{app="s%d", service_name="s%d"}`, i, i), e.Time, e.Line})
			}
		}
		ps = append(ps, p)
	}
	streams, err := decodePushProto(EncodePushProto(ps))
	if err != nil {
		t.Fatal(err)
	}
	all := inPlace(streams)
	if all == nil {
		t.Fatal("protobuf push not laid out in one array")
	}
	out, _, rj := s.validate(streams)
	if len(out) > 0 && &out[0] != &all[:1][0] {
		t.Error("validate copied the entries")
	}
	var got []want
	for _, e := range out {
		got = append(got, want{e.Labels, e.Time, string(e.Line)})
	}
	if fmt.Sprint(got) != fmt.Sprint(oracle) || rj.entries != total-len(oracle) {
		t.Errorf("validate in place:\n got %v\nwant %v (refused %d)", got, oracle, rj.entries)
	}
	if js, err := decodePushJSON(pushJSON([]oStream{{labels: map[string]string{"a": "1"}, entries: []PushEntry{{base, "x"}}}, {labels: map[string]string{"a": "2"}, entries: []PushEntry{{base, "y"}}}})); err != nil || inPlace(js) == nil {
		t.Errorf("JSON push not laid out in one array: %v", err)
	}
	// Streams in separate arrays (as jsonl's) are copied, not filtered
	// in place.
	sep := []pushStream{{labels: `{a="1"}`, entries: []pushEntry{{Time: base, Line: []byte("x")}}}, {labels: `{a="2"}`, entries: []pushEntry{{Time: base, Line: []byte("y")}}}}
	if inPlace(sep) != nil {
		t.Error("separate arrays taken for one")
	}
	out, _, _ = s.validate(sep)
	if len(out) != 2 || out[0].Labels != `{a="1", service_name="unknown_service"}` || out[1].Labels != `{a="2", service_name="unknown_service"}` || string(sep[1].entries[0].Line) != "y" {
		t.Errorf("separate arrays: %v, input now %v", out, sep)
	}
}

// TestJSONLGroupsByLabels: JSON lines alternating between label sets
// decode into one stream per set (labels written the same), each with
// its entries in line order; the same set written differently is another
// stream of the push that validate maps to the same store stream.
func TestJSONLGroupsByLabels(t *testing.T) {
	body := `{"labels":{"app":"a"},"ts":"1","line":"a1"}
{"labels":"{app=\"b\"}","ts":"2","line":"b1"}
{"labels":{"app":"a"},"ts":"3","line":"a2"}

{"labels":"{app=\"b\"}","ts":"4","line":"b2"}
{"labels":{ "app": "a" },"ts":"5","line":"a3"}
{"stream":{"app":"a"},"ts":"6","line":"a4"}
`
	streams, err := decodePushJSONL([]byte(body), 42)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range streams {
		var ls []string
		for _, e := range st.entries {
			ls = append(ls, fmt.Sprintf("%d:%s", e.Time, e.Line))
		}
		got = append(got, fmt.Sprintf("%s%v %s", st.labels, st.lmap, strings.Join(ls, ",")))
	}
	want := []string{`map[app:a] 1:a1,3:a2,6:a4`, `{app="b"}map[] 2:b1,4:b2`, `map[app:a] 5:a3`}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	e := newEnv(t, nil)
	e.mustPush("/api/v1/push/jsonl", []byte(strings.ReplaceAll(body, `"ts":"`, `"ts":"169999999999999999`)))
	wantLines(t, "stored", e.otlpRead("fake", `{app=~".+"}`), []string{
		"app=a,service_name=a 1699999999999999991 a1", "app=a,service_name=a 1699999999999999993 a2",
		"app=a,service_name=a 1699999999999999995 a3", "app=a,service_name=a 1699999999999999996 a4",
		"app=b,service_name=b 1699999999999999992 b1", "app=b,service_name=b 1699999999999999994 b2",
	})
}

// TestPushBudgetBeforeRead: a push that declares its length takes budget
// before its body is read, so with the budget taken it is answered 429
// without the server reading (and holding) the body: here clients that
// send only the headers still get their answers. (net/http reads and
// discards an unread body under 256 KiB before answering, so the
// declared bodies are larger.)
func TestPushBudgetBeforeRead(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxInflightPushBytes = 1 << 20
		c.PushQueueWait = 50 * time.Millisecond
	})
	release, err := e.srv.admitPush(t.Context(), 900<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	headersOnly := func(path string, length int) (*http.Response, error) {
		c, err := net.Dial("tcp", e.ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, length)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return http.ReadResponse(bufio.NewReader(c), nil)
	}
	for _, path := range []string{"/loki/api/v1/push", "/otlp/v1/logs"} {
		resp, err := headersOnly(path, 300<<10)
		if err != nil {
			t.Fatalf("%s: no answer before the body: %v", path, err)
		}
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s: %d Retry-After %q, want 429 and 1", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	// A declared length over the whole budget is refused unread too.
	if resp, err := headersOnly("/loki/api/v1/push", 2<<20); err != nil || resp.StatusCode != 413 {
		t.Errorf("declared 2 MiB: %v %v, want 413", resp, err)
	}
}
