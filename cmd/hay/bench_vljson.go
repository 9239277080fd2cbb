package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"haystack/internal/ingest"
)

// `hay bench vl-jsonline` is a helper of scripts/bench-victorialogs, not
// listed by `hay bench help`: it turns raw log lines into the JSON lines
// VictoriaLogs' /insert/jsonline takes, one object per line,
//
//	{"_msg":"<the line>","_time":"<RFC 3339>","source":"gen"}
//
// so that VictoriaLogs stores exactly the lines hay ingests. The time is
// the one hay's ingest finds in the line (package ingest, format auto); a
// line without one (a stack trace's "\tat ..." line) takes the previous
// line's time, which keeps the data in the time range it came from, and
// the first lines without any take the current time.

func runBenchVLJSON(args []string) error {
	return benchVLJSON(args, os.Stdin, os.Stdout, os.Stderr)
}

func benchVLJSON(args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("hay bench vl-jsonline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	source := fs.String("source", "gen", "value of the source field of every line")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: hay bench vl-jsonline [--source S] [FILE] > lines.json")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Converts raw log lines (FILE, or stdin) into VictoriaLogs JSON lines.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("%w: want at most one FILE", errUsage)
	}
	in := stdin
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	out := bufio.NewWriterSize(stdout, 1<<20)
	if err := vlJSONLines(in, out, *source, time.Now); err != nil {
		return err
	}
	return out.Flush()
}

// vlJSONLines writes one VictoriaLogs JSON object per line of r to w.
func vlJSONLines(r io.Reader, w *bufio.Writer, source string, now func() time.Time) error {
	lr := ingest.NewLineReader(r, maxLine)
	p := ingest.NewParser(ingest.FormatAuto, now)
	src, err := json.Marshal(source)
	if err != nil {
		return err
	}
	var buf []byte
	var last time.Time
	for {
		line, err := lr.Next()
		if err == io.EOF {
			return nil
		}
		var long *ingest.LineTooLongError
		if err != nil && !errors.As(err, &long) {
			return err
		}
		// A piece of an over-long line is an entry of its own, as in hay.
		e := p.Parse(line)
		t := last
		switch {
		case e.HasTime:
			t = time.Unix(0, e.Time).UTC()
		case t.IsZero():
			t = now().UTC()
		}
		last = t
		msg, err := json.Marshal(string(e.Line))
		if err != nil {
			return err
		}
		buf = append(buf[:0], `{"_msg":`...)
		buf = append(buf, msg...)
		buf = append(buf, `,"_time":"`...)
		buf = t.AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, `","source":`...)
		buf = append(buf, src...)
		buf = append(buf, "}\n"...)
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
}
