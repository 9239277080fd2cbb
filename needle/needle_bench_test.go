package needle

import (
	"bytes"
	"fmt"
	"testing"
)

// benchText is log-like text to search: repeated realistic lines with
// counters mixed in so the text is not periodic at a small distance.
func benchText(size int) []byte {
	lines := []string{
		"2026-11-01T00:00:01.123Z INFO  [api] GET /v1/users/%d 200 12ms\n",
		"ts=2026-11-01T00:00:02Z level=warn app=payments msg=\"retrying charge\" trace_id=4bf92f35%08x span_id=%x\n",
		"{\"time\":\"2026-11-01T00:00:03Z\",\"level\":\"info\",\"service\":\"auth\",\"msg\":\"token issued\",\"user\":%d}\n",
		"2026-11-01 00:00:04,747 DEBUG org.apache.hadoop.hdfs.DataNode: Receiving block blk_%d src: /10.250.19.102:54106\n",
	}
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, lines[i%len(lines)], i*7919)
	}
	return b.Bytes()[:size:size]
}

// absentNeedle returns a needle of length n made of bytes from text but
// found nowhere in it: a reversed slice of the text, so its first and last
// bytes are as common as log text makes them.
func absentNeedle(text []byte, n int) []byte {
	for off := 0; off+n <= len(text); off += 13 {
		nd := bytes.Clone(text[off : off+n])
		for i, j := 0, len(nd)-1; i < j; i, j = i+1, j-1 {
			nd[i], nd[j] = nd[j], nd[i]
		}
		if !bytes.Contains(text, nd) {
			return nd
		}
	}
	return bytes.Repeat([]byte{'~'}, n)
}

// benchKernels runs fn for bytes.Index and for every kernel, as sub-benchmarks.
func benchKernels(b *testing.B, h, n []byte) {
	b.Run("bytes", func(b *testing.B) {
		b.SetBytes(int64(len(h)))
		for b.Loop() {
			bytes.Index(h, n)
		}
	})
	for _, name := range Kernels() {
		s, _ := NewKernel(n, false, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(h)))
			for b.Loop() {
				s.Index(h)
			}
		})
	}
}

// BenchmarkIndex: an absent needle, by needle length and haystack size.
func BenchmarkIndex(b *testing.B) {
	full := benchText(16 << 20)
	for _, n := range []int{1, 2, 4, 8, 16, 32, 100} {
		for _, size := range []int{16, 256, 4 << 10, 64 << 10, 1 << 20, 16 << 20} {
			if n > size {
				continue
			}
			h := full[:size:size]
			nd := absentNeedle(h, n)
			b.Run(fmt.Sprintf("n=%d/size=%s", n, sizeName(size)), func(b *testing.B) {
				benchKernels(b, h, nd)
			})
		}
	}
}

func BenchmarkIndexFold(b *testing.B) {
	h := benchText(1 << 20)
	nd := []byte("connection TIMED OUT")
	for _, name := range Kernels() {
		s, _ := NewKernel(nd, true, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(h)))
			for b.Loop() {
				s.Index(h)
			}
		})
	}
}

// BenchmarkWorst: the cases issue 2 names, each against bytes.Index.
func BenchmarkWorst(b *testing.B) {
	text := benchText(1 << 20)
	rows := bytes.Repeat([]byte{'a'}, 1<<20)
	cases := []struct {
		name string
		h, n []byte
	}{
		{"aQa-in-a", rows, []byte("aQa")},
		{"space-timeout", text, []byte(" timeout")},
		{"status=50", text, []byte("status=50")},
		{"1-byte", text, []byte("~")},
		{"100-byte", text, absentNeedle(text, 100)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) { benchKernels(b, c.h, c.n) })
	}
}

// BenchmarkIndexByteAbsent is the ceiling to compare a whole-buffer scan
// with: bytes.IndexByte for a byte that is not there.
func BenchmarkIndexByteAbsent(b *testing.B) {
	h := benchText(25 << 20)
	b.SetBytes(int64(len(h)))
	for b.Loop() {
		bytes.IndexByte(h, '~')
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkLines is the line-by-line case of issue 2: one Index call per
// log line of ~100-250 bytes, for needles that are absent, rare and common.
func BenchmarkLines(b *testing.B) {
	text := benchText(4 << 20)
	lines := bytes.Split(text, []byte("\n"))
	for i, l := range lines {
		lines[i] = l[:len(l):len(l)]
	}
	for _, nd := range []string{"OutOfMemoryError", "timeout", "user_id=", "level=warn", "GET", "blk_99"} {
		n := []byte(nd)
		b.Run(nd+"/bytes", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				for _, l := range lines {
					bytes.Index(l, n)
				}
			}
		})
		for _, name := range Kernels() {
			s, _ := NewKernel(n, false, name)
			b.Run(nd+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					for _, l := range lines {
						s.Index(l)
					}
				}
			})
		}
	}
}
