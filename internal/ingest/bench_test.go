package ingest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type benchFile struct {
	name  string
	data  []byte
	lines [][]byte
}

func loadBenchFiles(b *testing.B) []benchFile {
	b.Helper()
	var out []benchFile
	var all []byte
	for _, f := range loghubFiles(b) {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), "_2k.log")
		out = append(out, benchFile{name: name, data: data, lines: refLines(data)})
		all = append(all, data...)
		if all[len(all)-1] != '\n' {
			all = append(all, '\r', '\n')
		}
	}
	return append(out, benchFile{name: "all", data: all, lines: refLines(all)})
}

func BenchmarkLineReader(b *testing.B) {
	for _, f := range loadBenchFiles(b) {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(f.data)))
			r := bytes.NewReader(f.data)
			for b.Loop() {
				r.Reset(f.data)
				lr := NewLineReader(r, 0)
				for {
					if _, err := lr.Next(); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
				}
			}
		})
	}
}

func BenchmarkParser(b *testing.B) {
	for _, f := range loadBenchFiles(b) {
		b.Run(f.name, func(b *testing.B) {
			benchParse(b, FormatAuto, f.lines)
		})
	}
}

func benchParse(b *testing.B, format Format, lines [][]byte) {
	benchParseTimed(b, format, lines, len(lines))
}

func benchParseTimed(b *testing.B, format Format, lines [][]byte, wantTimed int) {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	b.SetBytes(int64(n))
	p := NewParser(format, nil)
	timed := 0
	for b.Loop() {
		timed = 0
		for _, l := range lines {
			if p.Parse(l).HasTime {
				timed++
			}
		}
	}
	if timed != wantTimed {
		b.Fatalf("%d of %d lines timed, want %d", timed, len(lines), wantTimed)
	}
}

// BenchmarkGeneratedParser parses generated lines: JSON with the time key
// first (zap, slog), as a number, and last (after a long message and nested
// fields); logfmt; and a mix like `hay gen` output where one line in 20 is
// a stack-trace continuation without a timestamp.
func BenchmarkGeneratedParser(b *testing.B) {
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	layouts := map[string]func(i int, ts time.Time) string{
		"first": func(i int, ts time.Time) string {
			return fmt.Sprintf(`{"time":%q,"level":"INFO","msg":"request served","path":"/api/v1/items/%d","status":200,"duration_ms":%d}`,
				ts.Format(time.RFC3339Nano), i, i%977)
		},
		"number": func(i int, ts time.Time) string {
			return fmt.Sprintf(`{"level":"info","ts":%d.%06d,"caller":"server/handler.go:%d","msg":"request served","status":200}`,
				ts.Unix(), ts.Nanosecond()/1000, i%500)
		},
		"last": func(i int, ts time.Time) string {
			return fmt.Sprintf(`{"level":"warn","msg":"slow query \"select * from t where id = %d\"","ctx":{"user":{"id":%d,"roles":["a","b"]},"trace":"%032x"},"@timestamp":%q}`,
				i, i, i, ts.Format(time.RFC3339Nano))
		},
		"logfmt": func(i int, ts time.Time) string {
			return fmt.Sprintf(`ts=%s level=info app=payments host=payments-4glgsqnpp-zbqr5 msg="heartbeat completed" trace_id=%032x`,
				ts.Format("2006-01-02T15:04:05.000Z07:00"), i)
		},
	}
	layouts["mixed"] = func(i int, ts time.Time) string {
		switch i % 20 {
		case 0:
			return "\tat com.example.payments.Handler.process(Handler.java:123)"
		case 1, 5, 9, 13, 17:
			return layouts["logfmt"](i, ts)
		case 2, 6, 10, 14:
			return layouts["first"](i, ts)
		case 3, 7, 11, 15, 19:
			return ts.Format("2006-01-02T15:04:05.000000Z") + " INFO  [api] processing batch 10 of 12 version=v1.24.8 request_id=8d9d8e3f"
		}
		return ts.Format("2006-01-02 15:04:05,000") + " INFO  com.example.payments.Handler - charged card for order 123456 in 45 ms"
	}
	for _, name := range []string{"first", "number", "last", "logfmt", "mixed"} {
		lines := make([][]byte, 20000)
		for i := range lines {
			lines[i] = []byte(layouts[name](i, base.Add(time.Duration(i)*time.Millisecond)))
		}
		want := len(lines)
		if name == "mixed" {
			want -= len(lines) / 20
		}
		b.Run(name, func(b *testing.B) { benchParseTimed(b, FormatAuto, lines, want) })
	}
}

// BenchmarkIngest is the whole parsing path: LineReader into Parser.
func BenchmarkIngest(b *testing.B) {
	for _, f := range loadBenchFiles(b) {
		if f.name != "all" {
			continue
		}
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(f.data)))
			r := bytes.NewReader(f.data)
			p := NewParser(FormatAuto, nil)
			for b.Loop() {
				r.Reset(f.data)
				lr := NewLineReader(r, 0)
				for {
					line, err := lr.Next()
					if err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
					p.Parse(line)
				}
			}
		})
	}
}
