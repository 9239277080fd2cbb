package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/snappy"

	"haystack/internal/logtest"
)

// benchPushBodies returns 64 protobuf push bodies (not yet
// snappy-compressed) of 1000 generated lines each, the lines grouped by
// stream, and the lines' total size.
func benchPushBodies() (bodies [][]byte, raw int64) {
	g := logtest.NewGenerator(logtest.Config{Seed: 1, Lines: 64000})
	for range 64 {
		m := map[int]*PushStream{}
		var order []int
		for range 1000 {
			line, st, ts := g.Next(nil)
			if m[st] == nil {
				m[st] = &PushStream{Labels: fmt.Sprintf(`{app=%q, host=%q}`, g.Stream(st).App, g.Stream(st).Host)}
				order = append(order, st)
			}
			m[st].Entries = append(m[st].Entries, PushEntry{Time: ts.UnixNano(), Line: string(line)})
			raw += int64(len(line))
		}
		var ss []PushStream
		for _, st := range order {
			ss = append(ss, *m[st])
		}
		bodies = append(bodies, EncodePushProto(ss))
	}
	return bodies, raw
}

// BenchmarkPushProtobuf measures the push handler (snappy, protobuf
// decode, validation, WAL write, fsync, head) for 1000-line batches, in
// process, one request at a time.
func BenchmarkPushProtobuf(b *testing.B) {
	s, err := New(Config{DataDir: b.TempDir(), RejectOlderThan: -1, RejectNewerThan: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bodies, raw := benchPushBodies()
	for i, body := range bodies {
		bodies[i] = snappy.Encode(nil, body)
	}
	h := s.Handler()
	b.SetBytes(raw / 64)
	i := 0
	for b.Loop() {
		req := httptest.NewRequest("POST", "/loki/api/v1/push", bytes.NewReader(bodies[i%64]))
		req.Header.Set("Content-Type", "application/x-protobuf")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			b.Fatalf("push: %d %s", w.Code, w.Body)
		}
		i++
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "lines/s")
}
