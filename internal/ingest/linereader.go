package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxLine is the line length limit NewLineReader uses when given
// maxLine <= 0. One MiB keeps the reader's memory small and bounded while
// leaving room for long stack traces and big JSON documents.
const DefaultMaxLine = 1 << 20

// minBufSize is the initial read buffer. Reads of 64 KiB amortise the
// per-call cost of the underlying reader and of bytes.IndexByte's setup; a
// larger buffer measured no faster on the loghub samples.
const minBufSize = 64 << 10

// ErrLineTooLong is matched (with errors.Is) by the *LineTooLongError that
// LineReader.Next returns with each piece of a line longer than the limit.
var ErrLineTooLong = errors.New("line too long")

// LineTooLongError reports a piece of a line longer than the reader's limit.
//
// Such a line is never dropped and never truncated silently: Next returns it
// in consecutive pieces of at most maxLine bytes, each together with a
// *LineTooLongError. The pieces concatenated are exactly the line (without
// its "\r\n" or "\n"). The caller decides what to do:
//
//   - stop: treat the first such error as fatal;
//   - truncate: keep the piece with Offset == 0 and skip the others;
//   - split: keep every piece as an entry of its own.
type LineTooLongError struct {
	Line   int64 // 1-based line number of the long line
	Offset int64 // byte offset of this piece within the line
	Max    int   // the reader's limit
	More   bool  // more pieces of the same line follow
}

// Error describes the long line and the piece.
func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("line %d: longer than %d bytes (piece at byte %d)", e.Line, e.Max, e.Offset)
}

// Is makes errors.Is(err, ErrLineTooLong) true.
func (e *LineTooLongError) Is(target error) bool { return target == ErrLineTooLong }

// maxEmptyReads bounds how many times in a row a reader may return no data
// and no error before Next gives up with io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// LineReader splits a byte stream into lines.
//
// Lines are split on "\n" and one trailing "\r" is stripped from each (also
// from a last line without "\n"). A last line without "\n" is kept; an input
// ending in "\n" has no extra empty line after it, so an empty input has no
// lines and "\n" has one empty line, as grep counts them. Every other byte is
// kept exactly.
//
// Memory is bounded by about maxLine+2 bytes (at least 64 KiB) whatever the
// input. A LineReader is not safe for concurrent use.
type LineReader struct {
	r       io.Reader
	buf     []byte
	start   int // first unconsumed byte in buf
	end     int // end of valid data in buf
	err     error
	maxLine int

	offset   int64 // bytes consumed (returned lines plus their terminators)
	lineNo   int64 // number of the line last returned
	scanned  int   // bytes after start known to hold no "\n"
	partOff  int64 // within a long line: offset of the next piece, else 0
	inLong   bool  // the next piece continues a long line
	bufLimit int   // largest buffer we grow to: maxLine + 2
}

// NewLineReader returns a LineReader reading from r. Lines whose content
// (after stripping "\r") is longer than maxLine bytes come back in pieces with
// a *LineTooLongError; maxLine <= 0 means DefaultMaxLine.
func NewLineReader(r io.Reader, maxLine int) *LineReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	lr := &LineReader{r: r, maxLine: maxLine, bufLimit: maxLine + 2}
	size := minBufSize
	if size > lr.bufLimit {
		// Small limits (tests, fuzzing) still get a buffer that holds a few
		// lines so that reads stay large.
		size = max(lr.bufLimit, 4096)
	}
	lr.buf = make([]byte, size)
	return lr
}

// Reset makes lr read from r as if it were new, keeping its buffer (so one
// LineReader can frame many files without allocating) and its limit.
func (lr *LineReader) Reset(r io.Reader) {
	*lr = LineReader{r: r, buf: lr.buf, maxLine: lr.maxLine, bufLimit: lr.bufLimit}
}

// Offset returns the number of input bytes consumed so far: the bytes of
// every line returned by Next, with their terminators. After Next returns a
// complete line, Offset is where the next line starts, so ingestion can
// resume there.
func (lr *LineReader) Offset() int64 { return lr.offset }

// LineNumber returns the 1-based number of the line last returned by Next
// (0 before the first). All pieces of a long line share its number.
func (lr *LineReader) LineNumber() int64 { return lr.lineNo }

// Next returns the next line, without its "\n" and without one trailing
// "\r". The slice aliases the reader's buffer and is valid until the next
// call to Next. At the end of the input Next returns io.EOF. A read error is
// returned as is once every complete line before it has been returned; the
// incomplete line in front of the error is not returned. Errors are sticky.
//
// A line longer than maxLine is returned in pieces, each with a non-nil
// *LineTooLongError (see its doc); that error is not sticky.
func (lr *LineReader) Next() ([]byte, error) {
	for {
		data := lr.buf[lr.start:lr.end]
		// Look for "\n" only where it can end a line of acceptable length:
		// content of maxLine bytes plus an optional "\r".
		// Bytes before lr.scanned are known not to hold one: a slow reader
		// feeding a long line must not make the search quadratic.
		look := data
		if len(look) > lr.maxLine+2 {
			look = look[:lr.maxLine+2]
		}
		i := -1
		if lr.scanned < len(look) {
			if i = bytes.IndexByte(look[lr.scanned:], '\n'); i >= 0 {
				i += lr.scanned
			}
		}
		if i >= 0 {
			lr.scanned = 0
			// Cap the capacity so that a caller's append cannot clobber the
			// lines after this one.
			line := data[:i:i]
			if i > 0 && line[i-1] == '\r' {
				line = line[: i-1 : i-1]
			}
			if len(line) > lr.maxLine {
				// Content of exactly maxLine+1 bytes.
				return lr.piece()
			}
			lr.start += i + 1
			lr.offset += int64(i + 1)
			return lr.complete(line)
		}
		lr.scanned = len(look)
		if len(data) >= lr.maxLine+2 {
			// No "\n" in the first maxLine+2 bytes: the content is at least
			// maxLine+1 bytes long whatever follows.
			return lr.piece()
		}
		if lr.err != nil {
			if len(data) == 0 || lr.err != io.EOF {
				return nil, lr.err
			}
			// The last line, without "\n".
			line := data[:len(data):len(data)]
			if line[len(line)-1] == '\r' {
				line = line[: len(line)-1 : len(line)-1]
			}
			if len(line) > lr.maxLine {
				return lr.piece()
			}
			lr.start, lr.scanned = lr.end, 0
			lr.offset += int64(len(data))
			return lr.complete(line)
		}
		lr.fill()
	}
}

// complete returns a whole line, or the last piece of a long line with its
// error.
func (lr *LineReader) complete(line []byte) ([]byte, error) {
	if lr.inLong {
		err := &LineTooLongError{Line: lr.lineNo, Offset: lr.partOff, Max: lr.maxLine}
		lr.inLong = false
		lr.partOff = 0
		return line, err
	}
	lr.lineNo++
	return line, nil
}

// piece cuts the next maxLine bytes of a long line, which continues after
// them.
func (lr *LineReader) piece() ([]byte, error) {
	p := lr.buf[lr.start : lr.start+lr.maxLine : lr.start+lr.maxLine]
	lr.start += lr.maxLine
	lr.scanned = max(lr.scanned-lr.maxLine, 0)
	lr.offset += int64(lr.maxLine)
	if !lr.inLong {
		lr.lineNo++
		lr.inLong = true
		lr.partOff = 0
	}
	err := &LineTooLongError{Line: lr.lineNo, Offset: lr.partOff, Max: lr.maxLine, More: true}
	lr.partOff += int64(lr.maxLine)
	return p, err
}

// fill reads more data, first making room by moving the unconsumed bytes to
// the front of the buffer or growing it (up to bufLimit).
//
// Next calls fill only when the buffered data holds no complete line, so the
// bytes moved are one partial line, and every read gets the rest of the
// buffer rather than a sliver at its end.
func (lr *LineReader) fill() {
	if lr.start > 0 {
		n := copy(lr.buf, lr.buf[lr.start:lr.end])
		lr.start, lr.end = 0, n
	}
	if lr.end == len(lr.buf) {
		// Next cuts a piece once maxLine+2 bytes are buffered, so a full
		// buffer is always below bufLimit here.
		nb := make([]byte, max(min(2*len(lr.buf), lr.bufLimit), len(lr.buf)+1))
		copy(nb, lr.buf[:lr.end])
		lr.buf = nb
	}
	for range maxEmptyReads {
		n, err := lr.r.Read(lr.buf[lr.end:])
		if n < 0 || n > len(lr.buf)-lr.end {
			lr.err = errors.New("ingest: reader returned an invalid count")
			return
		}
		lr.end += n
		if err != nil {
			lr.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	lr.err = io.ErrNoProgress
}
