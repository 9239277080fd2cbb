package needle

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// benchLogSize is the size of the benchmark haystack: bigger than L2, about
// the size of L3 here, like a large decoded block set.
const benchLogSize = 25 << 20

// benchLog returns benchLogSize bytes of log-like text, the same on every
// run: a realistic mix of line shapes with varying numbers, addresses and
// ids, built here so the benchmark depends on nothing else.
var benchLog = sync.OnceValue(func() []byte {
	r := rand.New(rand.NewPCG(2026, 11))
	levels := []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	services := []string{"api-gateway", "auth", "billing", "scheduler", "kafka-consumer", "nginx"}
	paths := []string{"/api/v1/users", "/api/v1/orders", "/healthz", "/metrics", "/static/app.js", "/login"}
	methods := []string{"GET", "GET", "POST", "PUT", "DELETE"}
	var b bytes.Buffer
	b.Grow(benchLogSize + 512)
	for b.Len() < benchLogSize {
		ts := fmt.Sprintf("2026-11-%02dT%02d:%02d:%02d.%03dZ", 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000))
		switch r.IntN(6) {
		case 0:
			fmt.Fprintf(&b, "%d.%d.%d.%d - - [%s] \"%s %s HTTP/1.1\" %d %d \"-\" \"Mozilla/5.0 (X11; Linux x86_64)\"\n",
				10+r.IntN(200), r.IntN(256), r.IntN(256), r.IntN(256), ts,
				methods[r.IntN(len(methods))], paths[r.IntN(len(paths))], []int{200, 200, 200, 301, 404, 500}[r.IntN(6)], r.IntN(50000))
		case 1:
			fmt.Fprintf(&b, "%s %s [%s] request_id=%016x user_id=%d duration_ms=%d status=%d msg=\"request completed\"\n",
				ts, levels[r.IntN(len(levels))], services[r.IntN(len(services))], r.Uint64(), r.IntN(1e6), r.IntN(2000), []int{200, 201, 400, 503}[r.IntN(4)])
		case 2:
			fmt.Fprintf(&b, "{\"time\":\"%s\",\"level\":\"%s\",\"service\":\"%s\",\"trace_id\":\"%016x%016x\",\"span_id\":\"%016x\",\"message\":\"processed batch of %d records in %dms\"}\n",
				ts, levels[r.IntN(len(levels))], services[r.IntN(len(services))], r.Uint64(), r.Uint64(), r.Uint64(), r.IntN(5000), r.IntN(900))
		case 3:
			fmt.Fprintf(&b, "%s host-%02d kernel: [%d.%06d] eth0: link up, 1000 Mbps, full duplex, rx_bytes=%d tx_bytes=%d\n",
				ts, r.IntN(40), r.IntN(100000), r.IntN(1000000), r.Uint32(), r.Uint32())
		case 4:
			fmt.Fprintf(&b, "%s %s [%s] connection to db-%d.internal:5432 failed: timeout after %dms, retrying (attempt %d of 5)\n",
				ts, levels[4+r.IntN(2)], services[r.IntN(len(services))], r.IntN(8), r.IntN(30000), 1+r.IntN(5))
		default:
			fmt.Fprintf(&b, "%s %s [%s] Exception in thread \"worker-%d\" java.lang.IllegalStateException: queue full\n\tat com.example.Worker.run(Worker.java:%d)\n",
				ts, levels[5], services[r.IntN(len(services))], r.IntN(64), 10+r.IntN(400))
		}
	}
	return b.Bytes()[:benchLogSize]
})

// BenchmarkScanAbsent is the raw kernel over the whole buffer with two
// anchors that never occur in it (one call returns mask 0): the prefilter's
// throughput ceiling. Anchors one byte apart, as for most needles.
func BenchmarkScanAbsent(b *testing.B) {
	benchScanAbsent(b, benchLog())
}

// BenchmarkScanAbsentL2 is BenchmarkScanAbsent over 128 KiB, which stays in
// L2: the kernels' compute ceiling rather than the memory system's.
func BenchmarkScanAbsentL2(b *testing.B) {
	benchScanAbsent(b, benchLog()[:128<<10])
}

func benchScanAbsent(b *testing.B, h []byte) {
	const c1, c2 = '~', '^'
	if bytes.IndexByte(h, c1) >= 0 || bytes.IndexByte(h, c2) >= 0 {
		b.Fatal("benchmark anchors occur in the buffer")
	}
	for _, k := range supported() {
		b.Run(k.String(), func(b *testing.B) {
			last := len(h) - 2
			b.SetBytes(int64(len(h)))
			for b.Loop() {
				if _, mask := k.scan(&scanArgs{off2: 1, off4: 1, c1: c1, c2: c2, c3: c1, c4: c2}, h, 0, last); mask != 0 {
					b.Fatal("candidate reported for absent anchors")
				}
			}
		})
	}
}

// BenchmarkScanAbsentFold is BenchmarkScanAbsent for the fold loops.
func BenchmarkScanAbsentFold(b *testing.B) {
	h := benchLog()
	const c1, c2 = '~', '^' | 0x20 // '~' has the case bit already
	for _, k := range supported() {
		b.Run(k.String(), func(b *testing.B) {
			last := len(h) - 2
			b.SetBytes(int64(len(h)))
			for b.Loop() {
				if _, mask := k.scan(&scanArgs{off2: 1, off4: 1, c1: c1, c2: c2, c3: c1, c4: c2, or1: 0x20, or2: 0x20, or3: 0x20, or4: 0x20}, h, 0, last); mask != 0 {
					b.Fatal("candidate reported for absent anchors")
				}
			}
		})
	}
}

// BenchmarkSearchAbsent is the whole driver (anchor choice, scan, verify)
// for realistic needles that do not occur. The anchors of "connection reset
// by peer" do occur ("by" in "rx_bytes"), so the scan stops at false
// candidates every few hundred bytes; those of "OutOfMemoryError" never do.
func BenchmarkSearchAbsent(b *testing.B) {
	h := benchLog()
	for _, needle := range []string{"OutOfMemoryError", "connection reset by peer"} {
		if bytes.Contains(h, []byte(needle)) {
			b.Fatalf("benchmark needle %q occurs in the buffer", needle)
		}
		for _, name := range Kernels() {
			s, err := NewKernel([]byte(needle), false, name)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name+"/"+needle, func(b *testing.B) {
				b.SetBytes(int64(len(h)))
				for b.Loop() {
					if s.Index(h) != -1 {
						b.Fatal("found an absent needle")
					}
				}
			})
		}
	}
}

// BenchmarkScanIndexByteAbsent is the yardstick: bytes.IndexByte for a byte
// absent from the same buffer.
func BenchmarkScanIndexByteAbsent(b *testing.B) {
	h := benchLog()
	b.SetBytes(int64(len(h)))
	for b.Loop() {
		if bytes.IndexByte(h, '~') != -1 {
			b.Fatal("found an absent byte")
		}
	}
}
