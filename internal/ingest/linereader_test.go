package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// refLines is the oracle: strings.Split on "\n", no extra empty line after a
// final "\n", one trailing "\r" stripped from each line.
func refLines(data []byte) [][]byte {
	if len(data) == 0 {
		return nil
	}
	parts := bytes.Split(data, []byte("\n"))
	if data[len(data)-1] == '\n' {
		parts = parts[:len(parts)-1]
	}
	for i, p := range parts {
		parts[i] = bytes.TrimSuffix(p, []byte("\r"))
	}
	return parts
}

// refPieces is the oracle for a reader with limit maxLine: each line longer
// than maxLine is cut into pieces of maxLine bytes (the last one shorter).
type piece struct {
	b      []byte
	line   int64
	offset int64 // -1 for a whole line (no error)
	more   bool
}

func refPieces(data []byte, maxLine int) []piece {
	var out []piece
	for n, l := range refLines(data) {
		if len(l) <= maxLine {
			out = append(out, piece{b: l, line: int64(n + 1), offset: -1})
			continue
		}
		for off := 0; off < len(l); off += maxLine {
			end := min(off+maxLine, len(l))
			out = append(out, piece{b: l[off:end], line: int64(n + 1), offset: int64(off), more: end < len(l)})
		}
	}
	return out
}

// readPieces drains lr, checking the invariants of Offset and LineNumber on
// the way, and returns the pieces and the final error (nil for io.EOF).
func readPieces(t testing.TB, lr *LineReader) ([]piece, error) {
	t.Helper()
	var out []piece
	var consumed int64
	for {
		line, err := lr.Next()
		if err == io.EOF {
			if line != nil {
				t.Fatalf("line %q with io.EOF", line)
			}
			return out, nil
		}
		p := piece{b: bytes.Clone(line), line: lr.LineNumber(), offset: -1}
		if err != nil {
			var lte *LineTooLongError
			if !errors.As(err, &lte) {
				return out, err
			}
			if !errors.Is(err, ErrLineTooLong) {
				t.Fatalf("errors.Is(%v, ErrLineTooLong) = false", err)
			}
			if lte.Line != lr.LineNumber() {
				t.Fatalf("error line %d, LineNumber %d", lte.Line, lr.LineNumber())
			}
			p.offset, p.more = lte.Offset, lte.More
		}
		if cap(line) != len(line) {
			t.Fatalf("line %q has spare capacity %d", line, cap(line)-len(line))
		}
		if lr.Offset() < consumed+int64(len(line)) {
			t.Fatalf("Offset %d after consuming %d and line of %d", lr.Offset(), consumed, len(line))
		}
		consumed = lr.Offset()
		out = append(out, p)
	}
}

func equalPieces(t testing.TB, name string, got, want []piece) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d pieces, want %d\ngot  %v\nwant %v", name, len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.b, w.b) || g.line != w.line || g.offset != w.offset || g.more != w.more {
			t.Fatalf("%s: piece %d = {%q line %d off %d more %v}, want {%q line %d off %d more %v}",
				name, i, g.b, g.line, g.offset, g.more, w.b, w.line, w.offset, w.more)
		}
	}
}

// readers returns the ways a test feeds data to a LineReader.
func readers(data []byte) map[string]io.Reader {
	return map[string]io.Reader{
		"bytes":    bytes.NewReader(data),
		"onebyte":  iotest.OneByteReader(bytes.NewReader(data)),
		"half":     iotest.HalfReader(bytes.NewReader(data)),
		"dataerr":  iotest.DataErrReader(bytes.NewReader(data)),
		"chunks":   &chunkReader{data: data, sizes: []int{1, 2, 3, 5, 7, 11, 13, 4093, 0, 1}},
		"stringrd": strings.NewReader(string(data)),
	}
}

// chunkReader returns data in reads of the given sizes, cycling; a size of
// 0 is a read that returns nothing and no error.
type chunkReader struct {
	data  []byte
	sizes []int
	k     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(r.sizes[r.k%len(r.sizes)], len(p), len(r.data))
	r.k++
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func checkAllReaders(t *testing.T, name string, data []byte, maxLine int) {
	t.Helper()
	want := refPieces(data, effectiveMax(maxLine))
	for rname, r := range readers(data) {
		lr := NewLineReader(r, maxLine)
		got, err := readPieces(t, lr)
		if err != nil {
			t.Fatalf("%s/%s: %v", name, rname, err)
		}
		equalPieces(t, name+"/"+rname, got, want)
		if lr.Offset() != int64(len(data)) {
			t.Fatalf("%s/%s: final Offset %d, want %d", name, rname, lr.Offset(), len(data))
		}
		if _, err := lr.Next(); err != io.EOF {
			t.Fatalf("%s/%s: Next after EOF: %v", name, rname, err)
		}
	}
}

func effectiveMax(maxLine int) int {
	if maxLine <= 0 {
		return DefaultMaxLine
	}
	return maxLine
}

func TestLineReaderEdges(t *testing.T) {
	cases := []string{
		"",
		"\n",
		"\r\n",
		"\r\n\r\n",
		"\n\n\n",
		"a",
		"a\n",
		"a\r\n",
		"a\r",
		"\r",
		"\r\r\n",
		"a\nb",
		"a\r\nb\r\n",
		"a\nb\r\nc\n\r\nd",
		"mid\rdle\nx\r\ry\r\n",
		"nul\x00byte\n\x00\n",
		"bad utf8 \xff\xfe\xc3\x28\r\n\xe2\x82\n",
		"\x1b[31mred\x1b[0m\r\n",
		"trailing spaces  \t\r\n  \n",
		"no final newline\r\nlast",
	}
	for _, c := range cases {
		checkAllReaders(t, fmt.Sprintf("%q", c), []byte(c), 0)
	}
}

// TestLineReaderBufferBoundaries puts "\r", "\n" and line ends on every
// position around the 64 KiB read buffer's end.
func TestLineReaderBufferBoundaries(t *testing.T) {
	for k := -4; k <= 4; k++ {
		for _, term := range []string{"\n", "\r\n", "\r", ""} {
			var b bytes.Buffer
			b.WriteString(strings.Repeat("x", minBufSize+k))
			b.WriteString(term)
			b.WriteString("next\r\nline\n")
			b.WriteString(strings.Repeat("y", minBufSize-3))
			b.WriteString("\r\n")
			checkAllReaders(t, fmt.Sprintf("k=%d term=%q", k, term), b.Bytes(), 0)
		}
	}
	// Many short lines so that every line end falls somewhere on a buffer
	// boundary over a few megabytes.
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for b.Len() < 3<<20 {
		n := rng.IntN(300)
		for range n {
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
		if rng.IntN(2) == 0 {
			b.WriteByte('\r')
		}
		b.WriteByte('\n')
	}
	checkAllReaders(t, "random lines", b.Bytes(), 0)
}

func TestLineReaderLongLines(t *testing.T) {
	// Every length around a small limit, with each terminator.
	for max := 1; max <= 6; max++ {
		for n := 0; n <= 4*max+3; n++ {
			for _, term := range []string{"\n", "\r\n", "", "\r"} {
				data := []byte("ab\n" + strings.Repeat("z", n) + term + "c\r\n")
				checkAllReaders(t, fmt.Sprintf("max=%d n=%d term=%q", max, n, term), data, max)
			}
		}
	}
	// Lines longer than the initial buffer: whole under the limit, in
	// pieces over it.
	long := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB
	data := append(append([]byte("head\n"), long...), "\r\ntail"...)
	checkAllReaders(t, "3MB default", data, 0)
	checkAllReaders(t, "3MB max 4MB", data, 4<<20)
	checkAllReaders(t, "3MB max 3000000", data, 3_000_000)
	checkAllReaders(t, "3MB max 2999999", data, 2_999_999)
	checkAllReaders(t, "3MB max 100000", data, 100_000)
}

func TestLineReaderErrors(t *testing.T) {
	// A read error is returned after the complete lines; the incomplete line
	// before it is not returned, and the error sticks.
	lr := NewLineReader(iotest.TimeoutReader(strings.NewReader("a\r\nb\nc")), 0)
	got, err := readPieces(t, lr)
	if !errors.Is(err, iotest.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	equalPieces(t, "timeout", got, refPieces([]byte("a\r\nb"), DefaultMaxLine))
	if _, err := lr.Next(); !errors.Is(err, iotest.ErrTimeout) {
		t.Fatalf("second Next: %v, want sticky ErrTimeout", err)
	}

	boom := errors.New("boom")
	lr = NewLineReader(iotest.ErrReader(boom), 0)
	if _, err := lr.Next(); err != boom {
		t.Fatalf("ErrReader: %v", err)
	}

	lr = NewLineReader(&chunkReader{data: []byte("x"), sizes: []int{0}}, 0)
	if _, err := lr.Next(); err != io.ErrNoProgress {
		t.Fatalf("empty reads: %v, want io.ErrNoProgress", err)
	}
}

func TestLineReaderReset(t *testing.T) {
	lr := NewLineReader(strings.NewReader("a\nb\npartial"), 3)
	if l, err := lr.Next(); string(l) != "a" || err != nil {
		t.Fatalf("first line %q, %v", l, err)
	}
	for _, data := range []string{"x\r\ny", "", "long line\n", "\n"} {
		lr.Reset(strings.NewReader(data))
		got, err := readPieces(t, lr)
		if err != nil {
			t.Fatal(err)
		}
		equalPieces(t, fmt.Sprintf("reset %q", data), got, refPieces([]byte(data), 3))
		if lr.Offset() != int64(len(data)) {
			t.Fatalf("reset %q: Offset %d", data, lr.Offset())
		}
	}
	// A reader that failed works again after Reset.
	lr.Reset(iotest.ErrReader(io.ErrUnexpectedEOF))
	if _, err := lr.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("ErrReader: %v", err)
	}
	lr.Reset(strings.NewReader("ok"))
	if l, err := lr.Next(); string(l) != "ok" || err != nil || lr.LineNumber() != 1 {
		t.Fatalf("after error and Reset: %q, %v, line %d", l, err, lr.LineNumber())
	}
}

func TestLineReaderLoghub(t *testing.T) {
	files := loghubFiles(t)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkAllReaders(t, filepath.Base(f), data, 0)
		// And with a limit below the longest line.
		checkAllReaders(t, filepath.Base(f)+" max 100", data, 100)
	}
}

func loghubFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../../testdata/loghub/*.log")
	if err != nil || len(files) != 8 {
		t.Fatalf("loghub samples: %v, %d files", err, len(files))
	}
	return files
}

func TestLineTooLongErrorMessage(t *testing.T) {
	err := error(&LineTooLongError{Line: 7, Offset: 10, Max: 10, More: true})
	if got := err.Error(); got != "line 7: longer than 10 bytes (piece at byte 10)" {
		t.Fatalf("Error() = %q", got)
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), ErrLineTooLong) {
		t.Fatal("wrapped error does not match ErrLineTooLong")
	}
}

func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\r\nb\n\nc"), uint16(0), uint8(0))
	f.Add([]byte("\r\r\n\n\r"), uint16(1), uint8(1))
	f.Add([]byte("long line here\r\n"), uint16(4), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, maxLine uint16, chunk uint8) {
		max := int(maxLine % 64) // 0 means the default
		var r io.Reader = bytes.NewReader(data)
		if chunk > 0 {
			r = &chunkReader{data: data, sizes: []int{int(chunk % 17), 1, int(chunk)}}
		}
		lr := NewLineReader(r, max)
		got, err := readPieces(t, lr)
		if err != nil {
			t.Fatal(err)
		}
		equalPieces(t, "fuzz", got, refPieces(data, effectiveMax(max)))
		if lr.Offset() != int64(len(data)) {
			t.Fatalf("final Offset %d, want %d", lr.Offset(), len(data))
		}
	})
}
