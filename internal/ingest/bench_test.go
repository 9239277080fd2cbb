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
	if timed != len(lines) {
		b.Fatalf("%d of %d lines timed", timed, len(lines))
	}
}

// BenchmarkJSONParser parses generated JSON lines with the time key first
// (zap, slog) and last (after a long message and nested fields).
func BenchmarkJSONParser(b *testing.B) {
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
	}
	for _, name := range []string{"first", "number", "last"} {
		lines := make([][]byte, 20000)
		for i := range lines {
			lines[i] = []byte(layouts[name](i, base.Add(time.Duration(i)*time.Millisecond)))
		}
		b.Run(name, func(b *testing.B) { benchParse(b, FormatAuto, lines) })
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
