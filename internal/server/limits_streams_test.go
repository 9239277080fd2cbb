package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"haystack/internal/store"
)

// t0 is the time of the tests' first entries: otlpRead reads up to base.
const t0 = base - 100

// streamLines is what otlpRead answers for a stream with app=name and
// lines (times t0, t0+1, ...): the expected read-back of a push.
func streamLines(labels string, lines ...string) []string {
	var out []string
	for i, l := range lines {
		out = append(out, fmt.Sprintf("%s %d %s", labels, t0+int64(i), l))
	}
	return out
}

// TestStreamLimitPartialPush pushes past --max-streams-per-tenant in each
// push format: the entries of existing streams and of new streams within
// the limit are stored (and read back exactly), those of the new streams
// past it are refused with 429 naming the limit and the counts.
func TestStreamLimitPartialPush(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, func(c *Config) {
		c.DataDir = dir
		c.MaxStreamsPerTenant = 3
		c.MaxLine = 100
	})
	e.mustPush("/loki/api/v1/push", pushJSON([]oStream{
		{labels: map[string]string{"app": "a"}, entries: []PushEntry{{t0, "a0"}, {t0 + 1, "a1"}}},
		{labels: map[string]string{"app": "b"}, entries: []PushEntry{{t0, "b0"}}},
	}))
	// c fits (the third stream); d and e do not; a and b exist.
	code, body := e.do("POST", "/loki/api/v1/push", pushJSON([]oStream{
		{labels: map[string]string{"app": "a"}, entries: []PushEntry{{t0 + 2, "a2"}}},
		{labels: map[string]string{"app": "c"}, entries: []PushEntry{{t0, "c0"}, {t0 + 1, "c1"}}},
		{labels: map[string]string{"app": "d"}, entries: []PushEntry{{t0, "d0"}, {t0 + 1, "d1"}, {t0 + 2, "d2"}}},
		{labels: map[string]string{"app": "e"}, entries: []PushEntry{{t0, "e0"}, {t0 + 1, "e1"}, {t0 + 2, "e2"}, {t0 + 3, "e3"}}},
		{labels: map[string]string{"app": "b"}, entries: []PushEntry{{t0 + 1, "b1"}}},
	}))
	if want := `Maximum active stream limit exceeded when trying to create stream {app=\"d\", service_name=\"d\"} (and 1 more new streams): tenant 'fake' has 3 active streams (pushed to in the last 30m), its limit is 3 (--max-streams-per-tenant)`; code != 429 || !strings.Contains(body, want) ||
		!strings.Contains(body, "7 entries of 2 new streams refused, the other 4 stored") {
		t.Errorf("json push past the limit: %d %s", code, body)
	}
	// protobuf: a is stored, f refused.
	code, body = e.do("POST", "/loki/api/v1/push", pushProto([]oStream{
		{labels: map[string]string{"app": "f"}, entries: []PushEntry{{t0, "f0"}}},
		{labels: map[string]string{"app": "a"}, entries: []PushEntry{{t0 + 3, "a3"}}},
	}), "Content-Type", "application/x-protobuf")
	if code != 429 || !strings.Contains(body, `stream {app=\"f\", service_name=\"f\"}: tenant 'fake' has 3 active streams`) || !strings.Contains(body, "1 entries of 1 new streams refused, the other 1 stored") {
		t.Errorf("protobuf push past the limit: %d %s", code, body)
	}
	// jsonl with only a new stream: nothing stored.
	code, body = e.do("POST", "/api/v1/push/jsonl", []byte(fmt.Sprintf(`{"labels":{"app":"g"},"ts":"%d","line":"g0"}`+"\n", t0)))
	if code != 429 || !strings.Contains(body, `{app=\"g\", service_name=\"g\"}`) || !strings.Contains(body, "1 entries of 1 new streams refused; nothing was stored") {
		t.Errorf("jsonl push of a new stream past the limit: %d %s", code, body)
	}
	// Refused entries of validation and of the limit together: 429,
	// both named, and the counts cover both.
	code, body = e.do("POST", "/loki/api/v1/push", pushJSON([]oStream{
		{labels: map[string]string{"app": "b"}, entries: []PushEntry{{t0 + 2, "b2"}, {t0 + 3, strings.Repeat("x", 101)}}},
		{labels: map[string]string{"app": "h"}, entries: []PushEntry{{t0, "h0"}}},
	}))
	if code != 429 || !strings.Contains(body, `{app=\"h\", service_name=\"h\"}`) || !strings.Contains(body, "entry 1: line of 101 bytes exceeds the limit of 100") ||
		!strings.Contains(body, "2 entries refused in all, the other 1 stored") {
		t.Errorf("push with an invalid entry and a stream past the limit: %d %s", code, body)
	}
	// Existing streams are still accepted in full.
	e.mustPush("/loki/api/v1/push", pushJSON([]oStream{{labels: map[string]string{"app": "c"}, entries: []PushEntry{{t0 + 2, "c2"}}}}))
	// Another tenant has its own count.
	for i := range 3 {
		e.mustPush("/loki/api/v1/push", jsonPush(fmt.Sprintf(`{"app":"o%d"}`, i), t0, "o"), "X-Scope-OrgID", "other")
	}
	if code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"app":"o3"}`, t0, "o"), "X-Scope-OrgID", "other"); code != 429 || !strings.Contains(body, "tenant 'other' has 3 active streams") {
		t.Errorf("other tenant's fourth stream: %d %s", code, body)
	}

	var want []string
	want = append(want, streamLines("app=a,service_name=a", "a0", "a1", "a2", "a3")...)
	want = append(want, streamLines("app=b,service_name=b", "b0", "b1", "b2")...)
	want = append(want, streamLines("app=c,service_name=c", "c0", "c1", "c2")...)
	wantLines(t, "stored", e.otlpRead("fake", `{app=~".+"}`), want)
	if n := e.storedCount("fake"); n != len(want) {
		t.Errorf("stored %d entries, want %d", n, len(want))
	}
	if _, body := e.get("/metrics"); !strings.Contains(body, `hay_rejected_total{reason="stream_limit"} 5`) {
		t.Errorf("/metrics: want 5 stream_limit rejections:\n%s", grepLines(body, "hay_rejected_total"))
	}

	// After a restart, the streams the store holds are still accepted;
	// as they push again they count as active, and a new stream past the
	// limit is refused again.
	e.ts.Close()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := New(Config{DataDir: dir, Now: func() time.Time { return time.Unix(0, base) }, MaxStreamsPerTenant: 3})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s2.Handler())
	e2 := &testEnv{t: t, srv: s2, ts: hs}
	defer func() {
		hs.Close()
		if err := s2.Close(); err != nil {
			t.Error(err)
		}
	}()
	e2.mustPush("/loki/api/v1/push", jsonPush(`{"app":"a"}`, t0+4, "a4"))
	e2.mustPush("/loki/api/v1/push", jsonPush(`{"app":"b"}`, t0+4, "b4"))
	e2.mustPush("/loki/api/v1/push", jsonPush(`{"app":"c"}`, t0+4, "c4"))
	if code, body := e2.do("POST", "/loki/api/v1/push", jsonPush(`{"app":"i"}`, t0, "i0")); code != 429 || !strings.Contains(body, "tenant 'fake' has 3 active streams") {
		t.Errorf("new stream after a restart: %d %s", code, body)
	}
	if n := e2.storedCount("fake"); n != len(want)+3 {
		t.Errorf("after restart: %d entries, want %d", n, len(want)+3)
	}
}

// TestStreamLimitOTLP: OTLP resources are streams; past the limit the
// request is answered 429 with a google.rpc.Status in its encoding, and
// the records of the streams within it are stored.
func TestStreamLimitOTLP(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxStreamsPerTenant = 2 })
	res := func(svc string, from int, lines ...string) tRes {
		var recs []tRec
		for i, l := range lines {
			recs = append(recs, tRec{time: uint64(t0 + int64(from+i)), body: strBody(l)})
		}
		return tRes{attrs: []tkv{kvS("service.name", svc)}, scopes: []tScope{{recs: recs}}}
	}
	req := []tRes{res("s1", 0, "x0", "x1"), res("s2", 0, "y0"), res("s3", 0, "z0", "z1", "z2"), res("s1", 2, "x2")}
	for _, enc := range []struct {
		tenant, ct string
		body       []byte
	}{
		{"pb", "application/x-protobuf", otlpProtoReq(req)},
		{"js", "application/json", otlpJSONReq(req)},
	} {
		code, ct, body := e.otlpPost(enc.body, "Content-Type", enc.ct, "X-Scope-OrgID", enc.tenant)
		var msg string
		if enc.ct == "application/x-protobuf" {
			msg = decodeStatusProto(t, body)
		} else {
			var st struct{ Message string }
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatalf("%s: %v: %s", enc.tenant, err, body)
			}
			msg = st.Message
		}
		if code != 429 || ct != enc.ct || !strings.Contains(msg, `Maximum active stream limit exceeded when trying to create stream {service_name="s3"}: tenant '`+enc.tenant+`' has 2 active streams (pushed to in the last 30m), its limit is 2`) ||
			!strings.Contains(msg, "3 entries of 1 new streams refused, the other 4 stored") {
			t.Errorf("%s: %d %s %q", enc.tenant, code, ct, msg)
		}
		want := streamLines("service_name=s1", "x0", "x1", "x2")
		want = append(want, streamLines("service_name=s2", "y0")...)
		wantLines(t, enc.tenant, e.otlpRead(enc.tenant, `{service_name=~".+"}`), want)
	}
}

// TestStreamLimitConcurrent pushes one new stream from each of many
// concurrent clients: exactly the limit's worth are admitted, since a
// push's new streams count against the limit until its Append defines
// them.
func TestStreamLimitConcurrent(t *testing.T) {
	const limit, clients, per = 8, 24, 3
	e := newEnv(t, func(c *Config) { c.MaxStreamsPerTenant = limit })
	start := make(chan struct{})
	codes := make([]int, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			<-start
			body := jsonPush(fmt.Sprintf(`{"app":"c%d"}`, i), t0, slices.Repeat([]string{"l"}, per)...)
			resp, err := http.Post(e.ts.URL+"/loki/api/v1/push", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	close(start)
	wg.Wait()
	ok, limited := 0, 0
	for _, c := range codes {
		switch c {
		case 204:
			ok++
		case 429:
			limited++
		}
	}
	if ok != limit || limited != clients-limit {
		t.Errorf("got %d accepted and %d limited of %d, want %d and %d: %v", ok, limited, clients, limit, clients-limit, codes)
	}
	if n := e.storedCount("fake"); n != limit*per {
		t.Errorf("stored %d entries, want %d", n, limit*per)
	}
	ts, err := e.srv.openTenant("fake", false)
	if err != nil {
		t.Fatal(err)
	}
	if n := ts.w.Stats().Streams; n != limit {
		t.Errorf("stream table holds %d streams, want %d", n, limit)
	}
	if n := len(e.srv.pushLim.active["fake"]); n != limit {
		t.Errorf("%d active streams, want %d", n, limit)
	}
}

// streamLimitEnv is a server with the stream limit and a clock the test
// moves with advance.
func streamLimitEnv(t *testing.T, limit int) (e *testEnv, advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Unix(0, base)
	e = newEnv(t, func(c *Config) {
		c.MaxStreamsPerTenant = limit
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	return e, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}

// TestStreamLimitActiveWindow: the limit counts active streams, those
// pushed to within streamActiveWindow, as Loki counts the streams its
// ingesters hold: once streams go quiet, new ones are admitted. Counting
// every stream the tenant ever had refused every new stream for good once
// pods had come and gone as many times as the limit.
func TestStreamLimitActiveWindow(t *testing.T) {
	e, advance := streamLimitEnv(t, 2)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"pod1"}`, t0, "x"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"pod2"}`, t0, "x"))
	if code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"app":"pod3"}`, t0, "x")); code != 429 {
		t.Fatalf("a third stream: %d %s", code, body)
	}
	advance(20 * time.Minute)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"pod2"}`, t0+1, "y")) // pod2 stays active
	advance(11 * time.Minute)                                              // pod1 quiet for 31 minutes
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"pod3"}`, t0, "x"))
	if code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"app":"pod4"}`, t0, "x")); code != 429 || !strings.Contains(body, "has 2 active streams") {
		t.Fatalf("a fourth stream while pod2 and pod3 are active: %d %s", code, body)
	}
	// pod1, quiet but held by the store, is never refused.
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"pod1"}`, t0+1, "y"))
	if n := e.storedCount("fake"); n != 5 {
		t.Errorf("stored %d entries, want 5", n)
	}
}

// TestStreamLimitRetryNoDuplicates: a push answered 429 by the stream
// limit after some of its streams were stored is resent whole by
// shippers (Promtail, Alloy, Vector, the OpenTelemetry collector retry a
// 429); a resend within partialPushTTL stores only what was refused
// before, once admitted, so no entry is stored twice. Loki drops such
// duplicates too.
func TestStreamLimitRetryNoDuplicates(t *testing.T) {
	e, advance := streamLimitEnv(t, 2)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"gone"}`, t0, "g0"))
	advance(29 * time.Minute)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"old"}`, t0, "o0"))
	// gone and old are active: new1 and new2 do not both fit.
	batch := pushJSON([]oStream{
		{labels: map[string]string{"app": "old"}, entries: []PushEntry{{t0 + 1, "o1"}, {t0 + 2, "o2"}}},
		{labels: map[string]string{"app": "new1"}, entries: []PushEntry{{t0, "n1"}}},
		{labels: map[string]string{"app": "new2"}, entries: []PushEntry{{t0, "n2"}}},
	})
	if code, body := e.do("POST", "/loki/api/v1/push", batch); code != 429 || !strings.Contains(body, `new1`) || !strings.Contains(body, "2 new streams refused, the other 2 stored") {
		t.Fatalf("first attempt: %d %s", code, body)
	}
	// A minute later gone has been quiet for 30: new1 fits, new2 not.
	advance(61 * time.Second)
	for i := range 3 { // the shipper's retries
		// The counts cover the whole batch: o1 o2 (stored by the first
		// attempt), n1 (by the first retry) and n2, refused.
		if code, body := e.do("POST", "/loki/api/v1/push", batch); code != 429 || !strings.Contains(body, "new2") || !strings.Contains(body, "the other 3 stored") {
			t.Fatalf("retry %d: %d %s", i, code, body)
		}
		advance(10 * time.Second)
	}
	if n := e.storedCount("fake"); n != 5 {
		t.Fatalf("after the retries: %d entries stored, want 5 (g0 o0 o1 o2 n1, each once)", n)
	}
	var want []string
	want = append(want, streamLines("app=gone,service_name=gone", "g0")...)
	want = append(want, streamLines("app=new1,service_name=new1", "n1")...)
	want = append(want, streamLines("app=old,service_name=old", "o0", "o1", "o2")...)
	wantLines(t, "stored", e.otlpRead("fake", `{app=~".+"}`), want)
	// Past partialPushTTL the batch is a new push: its admitted entries
	// are stored again (hay keeps exact duplicates of pushes it did not
	// see refused, as it does of pushes it answered 204).
	advance(16 * time.Minute)
	if code, _ := e.do("POST", "/loki/api/v1/push", batch); code != 429 {
		t.Fatalf("after the TTL: %d", code)
	}
	if n := e.storedCount("fake"); n != 8 {
		t.Errorf("a batch resent after the TTL: %d entries, want 8", n)
	}
}

// TestStreamLimitPartialRecordRace: concurrent resends of one batch read
// and write its record under the lock (skipStored read the record's map
// after releasing it: a fatal concurrent map read and write; review R1;
// -race reports it).
func TestStreamLimitPartialRecordRace(t *testing.T) {
	var pl pushLimiter
	const fp = 42
	pl.rememberPartial("t", fp, []store.LabeledEntry{{Labels: `{app="a"}`}}, true, 0)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 2000 {
			pl.rememberPartial("t", fp, []store.LabeledEntry{{Labels: fmt.Sprintf(`{app="s%d"}`, i)}}, true, int64(i))
		}
	})
	wg.Go(func() {
		for range 2000 {
			pl.skipStored("t", fp, []store.LabeledEntry{{Labels: `{app="a"}`}, {Labels: `{app="z"}`}}, 0)
		}
	})
	wg.Wait()
}

// TestStreamLimitFailedAppendNotActive: a push whose Append fails (client
// gone, disk full, writer closed) leaves its new streams inactive: they
// filled the tenant's limit for 30 minutes and real new streams were
// refused (review R2).
func TestStreamLimitFailedAppendNotActive(t *testing.T) {
	s, err := New(Config{DataDir: t.TempDir(), Now: func() time.Time { return time.Unix(0, base) }, MaxStreamsPerTenant: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // reports the writer closed below; not what is tested
	ts, err := s.openTenant("fake", true)
	if err != nil {
		t.Fatal(err)
	}
	ts.w.Close() // the deterministic stand-in for any failing Append
	ents := []store.LabeledEntry{
		{Labels: `{app="x"}`, Time: t0, Line: []byte("x")},
		{Labels: `{app="y"}`, Time: t0, Line: []byte("y")},
	}
	if _, _, err := s.storeEntries(context.Background(), "fake", ents, 0); err == nil {
		t.Fatal("append to a closed writer succeeded")
	}
	known := make([]bool, 1)
	if n := ts.w.KnownStreams([]string{`{app="x"}`}, known); n != 0 {
		t.Fatalf("store holds %d streams", n)
	}
	_, sr, _ := s.admitStreams(ts, []store.LabeledEntry{{Labels: `{app="z"}`, Time: t0, Line: []byte("z")}})
	if sr != nil {
		t.Errorf("new stream refused after a failed push: the tenant counts %d active streams, the store holds none (limit %d)", sr.have, sr.limit)
	}
}

// TestStreamLimitPartialRecordsPerTenant: each tenant keeps its own
// partial-push records, so another tenant's many partially refused pushes
// do not push out a record a resend needs (one server-wide map did;
// review R3).
func TestStreamLimitPartialRecordsPerTenant(t *testing.T) {
	var pl pushLimiter
	a := []store.LabeledEntry{{Labels: `{app="a"}`}}
	pl.rememberPartial("a", 1, a, true, 0)
	for i := range 4 * maxPartialPushes {
		// other partially refused pushes (any tenant), 1 ms apart
		pl.rememberPartial("other", uint64(1000+i), []store.LabeledEntry{{Labels: `{app="o"}`}}, true, int64(time.Duration(i+1)*time.Millisecond))
	}
	// The resend of push 1 comes ~1 s after it (well within its 15 min).
	if got := pl.skipStored("a", 1, []store.LabeledEntry{{Labels: `{app="a"}`}, {Labels: `{app="c"}`}}, int64(time.Second)); len(got) != 1 {
		t.Errorf("resend 1 s later: %d entries left to store, want 1 (a's were stored before)", len(got))
	}
}
