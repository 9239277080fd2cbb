package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/logtest"
	"haystack/internal/server"
	"haystack/internal/store"
)

func init() {
	register(&command{
		name:    "demo",
		summary: "generate a million realistic log lines, store them and serve the web UI on them",
		run:     runDemo,
	})
}

// The demo's data directory holds demoMarker, which records what was
// generated (seed, lines, time span), and the store of the server's
// default tenant, DIR/fake, where `hay serve --data DIR` finds it too.
// The store records how many lines it holds under the source key
// demoSource, in the same WAL record as the lines themselves, so after an
// interruption (Ctrl-C, kill -9, a full disk) the next run knows exactly
// where to resume: the generator is deterministic, so it regenerates the
// lines already stored, drops them, and appends the rest.
const (
	demoMarker = "demo.json"
	demoSource = "hay demo"
)

// demoInfo is the content of the marker file.
type demoInfo struct {
	Format  int       `json:"format"` // 1
	Seed    int64     `json:"seed"`
	Lines   int64     `json:"lines"`
	Streams int       `json:"streams"`
	Start   time.Time `json:"start"` // the first line's time
	SpanNS  int64     `json:"span_ns"`
}

func (d demoInfo) config() logtest.Config {
	return logtest.Config{Lines: d.Lines, Seed: d.Seed, Streams: d.Streams, Start: d.Start, Span: time.Duration(d.SpanNS)}
}

// demoLabels are the stream labels of logtest stream s. The host is left
// out: the UI shows every label on every row, and one host per app adds
// nothing to filter by.
func demoLabels(s logtest.Stream) string {
	return ingest.Labels{
		{Name: "app", Value: s.App},
		{Name: "env", Value: "prod"},
		{Name: "source", Value: "demo"},
	}.String()
}

// demoOptions are `hay demo`'s flags.
type demoOptions struct {
	listen string
	lines  int64
	data   string
	seed   int64
	fresh  bool
}

func runDemo(args []string) error {
	// The first Ctrl-C stops the ingest at a batch boundary (the next run
	// resumes) or shuts the server down cleanly; NotifyContext's stop
	// lets a second one kill at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	return demo(ctx, args, os.Stdout, nil)
}

// demo is `hay demo` until ctx is done. It prints the banner to out and,
// when the server is listening, calls listening (tests) with its base URL.
func demo(ctx context.Context, args []string, out io.Writer, listening func(base string)) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay demo [flags]")
		fmt.Fprintln(fs.Output())
		fmt.Fprintln(fs.Output(), "Generates realistic logs (8 services, the last 24 hours, with a few incidents to find),")
		fmt.Fprintln(fs.Output(), "stores them in the data directory, and serves the web UI and the API on them, as")
		fmt.Fprintln(fs.Output(), "`hay serve` does. A later run reuses the data (and resumes an interrupted ingest).")
		fmt.Fprintln(fs.Output(), "Ctrl-C stops it.")
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
	}
	var o demoOptions
	fs.StringVar(&o.listen, "listen", "127.0.0.1:3100", "listen `address`")
	fs.Int64Var(&o.lines, "lines", 1_000_000, "lines to generate (a value other than the stored demo's deletes it and generates again)")
	fs.StringVar(&o.data, "data", "hay-demo", "data `dir`ectory (created; reused when it already holds this demo)")
	fs.Int64Var(&o.seed, "seed", 0, "generator seed (likewise: another seed generates again)")
	fs.BoolVar(&o.fresh, "fresh", false, "discard the demo data in --data and generate it again, ending now")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if o.lines < 1 {
		return fmt.Errorf("%w: --lines must be at least 1", errUsage)
	}

	// The port first: finding it taken after generating and storing a
	// million lines wasted the minute that took (3100 is Loki's port,
	// busy wherever a Loki runs).
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("%w (use --listen to pick another address)", err)
	}
	defer ln.Close()
	t0 := time.Now()
	info, reused, err := demoPrepare(ctx, o)
	if err != nil {
		return err
	}
	took := time.Since(t0)

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(server.Config{
		DataDir:              o.data,
		QueryTimeout:         30 * time.Second,
		MaxConcurrentQueries: 2 * runtime.GOMAXPROCS(0),
		RejectOlderThan:      168 * time.Hour,
		RejectNewerThan:      10 * time.Minute,
		Logger:               logger,
		CompactInterval:      time.Minute, // what is pushed to the demo
	})
	if err != nil {
		return err
	}
	if err := srv.OpenExisting(); err != nil {
		srv.Close()
		return err
	}
	base := "http://" + ln.Addr().String()
	printBanner(out, o, info, base, reused, took)
	if listening != nil {
		listening(base)
	}
	if err := serveUntil(ctx, srv, ln, logger, "hay demo"); err != nil {
		return err
	}
	fmt.Fprintln(out, "hay demo: stopped (the data stays in "+o.data+"; the next run reuses it)")
	return nil
}

// demoExamples are the searches the banner suggests: a rare needle, a
// LogQL query with a parser and a label filter, and a case-insensitive
// phrase. Each is the UI's page URL query (see web/API.md).
func demoExamples() []struct{ query, what string } {
	return []struct{ query, what string }{
		{"q=OutOfMemoryError", "a rare needle: Java heap exhaustion, with stack traces"},
		{"q=" + url.QueryEscape(`{app="payments"} | logfmt | status >= 500`), "LogQL: the payments service's 5xx answers"},
		{"q=" + url.QueryEscape("connection refused") + "&case=1", `"connection refused", ignoring case`},
	}
}

func printBanner(w io.Writer, o demoOptions, info demoInfo, base string, reused bool, took time.Duration) {
	how := fmt.Sprintf("generated and stored in %.1fs", took.Seconds())
	if reused {
		how = "reused; --fresh generates them again"
	}
	end := info.Start.Add(time.Duration(info.SpanNS))
	fmt.Fprintf(w, "\nHaystack demo: %d log lines from %d services, %s to %s (%s; data in %s)\n\n",
		info.Lines, info.Streams, info.Start.Local().Format("Jan 2 15:04"), end.Local().Format("Jan 2 15:04"), how, o.data)
	// The UI shows the last 24 hours by default; older demo data needs
	// its own range in the links.
	rng := ""
	if time.Since(end) > time.Hour {
		rng = fmt.Sprintf("&from=%d&to=%d", info.Start.UnixMilli(), end.UnixMilli()+1)
	}
	fmt.Fprintf(w, "  Open %s/", base)
	if rng != "" {
		fmt.Fprint(w, "?"+rng[1:])
	}
	fmt.Fprint(w, " in a browser. Some searches to try:\n\n")
	for _, e := range demoExamples() {
		fmt.Fprintf(w, "    %s/?%s%s\n        %s\n", base, e.query, rng, e.what)
	}
	fmt.Fprintf(w, "\n  Or from a terminal, as grep (hay is go run ./cmd/hay if not installed):\n\n")
	fmt.Fprintf(w, "    hay search --server %s -i 'connection refused'\n", base)
	fmt.Fprint(w, "\n  Press Ctrl-C to stop.\n\n")
}

// demoPrepare makes o.data hold the demo's store, complete, and returns
// what it holds and whether it was already there.
func demoPrepare(ctx context.Context, o demoOptions) (demoInfo, bool, error) {
	storeDir := filepath.Join(o.data, server.DefaultTenant)
	markerPath := filepath.Join(o.data, demoMarker)
	want := demoInfo{Format: 1, Seed: o.seed, Lines: o.lines, Streams: logtest.DefaultStreams, SpanNS: int64(24 * time.Hour)}

	info, err := readDemoMarker(markerPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Never write into (or, with --fresh, delete from) a directory
		// that is not ours: --data may point at real data by mistake.
		ents, _ := os.ReadDir(o.data)
		for _, e := range ents {
			if e.Name() == demoMarker+".tmp" {
				continue // a marker whose writing was interrupted
			}
			return demoInfo{}, false, fmt.Errorf("%s is not empty and holds no %s: not a hay demo directory; choose another --data", o.data, demoMarker)
		}
	case err != nil:
		return demoInfo{}, false, err
	case o.fresh || info.Seed != want.Seed || info.Lines != want.Lines || info.Streams != want.Streams || info.SpanNS != want.SpanNS:
		if !o.fresh {
			fmt.Fprintf(os.Stderr, "hay demo: %s holds %d lines with seed %d; generating %d lines with seed %d instead\n",
				o.data, info.Lines, info.Seed, want.Lines, want.Seed)
		}
		if err := os.RemoveAll(storeDir); err != nil {
			return demoInfo{}, false, err
		}
		if err := os.Remove(markerPath); err != nil {
			return demoInfo{}, false, err
		}
	default:
		want = info // the same demo: keep its time span
	}
	if want.Start.IsZero() {
		// The last 24 hours, ending now (to the second).
		end := time.Now().UTC().Truncate(time.Second)
		want.Start = end.Add(-time.Duration(want.SpanNS))
		if err := writeDemoMarker(markerPath, want); err != nil {
			return demoInfo{}, false, err
		}
	}

	st, err := store.Open(storeDir, store.Options{FsyncInterval: -1})
	if err != nil {
		return demoInfo{}, false, err
	}
	src, _ := st.Source(demoSource)
	done := src.Offset
	if done > want.Lines {
		st.Close()
		return demoInfo{}, false, fmt.Errorf("%s holds %d demo lines, more than the %d its %s says: remove the directory or use --fresh", storeDir, done, want.Lines, demoMarker)
	}
	if done == want.Lines {
		// Stored by an earlier run, which may have been stopped while
		// compacting: finish that (a no-op when it is done).
		err := demoCompact(ctx, st)
		if err := st.Close(); err != nil {
			return demoInfo{}, false, err
		}
		return want, true, err
	}
	if done > 0 {
		fmt.Fprintf(os.Stderr, "hay demo: resuming after the %d lines already stored\n", done)
	} else {
		fmt.Fprintf(os.Stderr, "hay demo: generating %d log lines into %s (later runs reuse them)\n", want.Lines, o.data)
	}
	ierr := demoIngest(ctx, st, want, done)
	if ierr == nil {
		ierr = demoCompact(ctx, st)
	}
	if err := st.Close(); ierr == nil {
		ierr = err
	}
	if errors.Is(ierr, context.Canceled) {
		ierr = errors.New("interrupted; the lines stored so far are kept and the next run resumes after them")
	}
	return want, false, ierr
}

// demoCompact rewrites the demo's segments as hay compact does, so that
// the needles the UI suggests decode half as much; a progress line shows
// on a terminal. It returns at once when there is nothing to compact.
func demoCompact(ctx context.Context, st *store.Store) error {
	tty := isTerminal(os.Stderr)
	announced := false
	cs, err := st.Compact(ctx, store.CompactOptions{Progress: func(done, total int64) {
		if tty {
			fmt.Fprintf(os.Stderr, "\rhay demo: compacting for faster searches: %d%% ", done*100/max(total, 1))
			announced = true
		}
	}})
	if announced {
		fmt.Fprintln(os.Stderr)
	}
	if err == nil && cs.Segments > 0 && !tty {
		fmt.Fprintf(os.Stderr, "hay demo: compacted %d segments (%.1f MB -> %.1f MB)\n", cs.Segments, float64(cs.Before)/1e6, float64(cs.After)/1e6)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	return nil
}

// demoIngest generates the demo's lines and appends those from line done
// on to st, in batches that record the progress, with a progress bar on a
// terminal.
func demoIngest(ctx context.Context, st *store.Store, info demoInfo, done int64) error {
	g := logtest.NewGenerator(info.config())
	ids := make([]uint32, g.NumStreams())
	for i := range ids {
		ids[i] = st.Stream(demoLabels(g.Stream(i)))
	}
	pr := newIngestProgress(os.Stderr)
	defer pr.stop()
	pr.startFile("generating demo logs", info.Lines, done)

	var (
		arena   []byte
		ends    []int
		entries = make([]store.Entry, 0, batchEntries)
		batch   store.Batch
		n       int64 // lines generated
		inBytes int64 // bytes of the batch, newlines counted
	)
	// Lines already stored are generated again and dropped: the generator
	// has no way to jump ahead, and at ~300 MB/s it hardly matters.
	for ; n < done; n++ {
		arena, _, _ = g.Next(arena[:0])
	}
	arena = arena[:0]
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		prev := 0
		for i := range entries {
			entries[i].Line = arena[prev:ends[i]:ends[i]]
			prev = ends[i]
		}
		batch.Entries = entries
		batch.Sources = append(batch.Sources[:0], store.Source{Key: demoSource, Offset: n})
		if err := st.Append(&batch); err != nil {
			return err
		}
		pr.add(inBytes, int64(len(entries)), n)
		arena, ends, entries, inBytes = arena[:0], ends[:0], entries[:0], 0
		return nil
	}
	for n < info.Lines {
		var s int
		var ts time.Time
		n0 := len(arena)
		arena, s, ts = g.Next(arena)
		n++
		inBytes += int64(len(arena)-n0) + 1
		ends = append(ends, len(arena))
		entries = append(entries, store.Entry{Time: ts.UnixNano(), Stream: ids[s]})
		if len(arena) >= batchBytes || len(entries) >= batchEntries {
			if err := flush(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func readDemoMarker(path string) (demoInfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return demoInfo{}, err
	}
	var d demoInfo
	if err := json.Unmarshal(b, &d); err != nil || d.Format != 1 || d.Lines < 1 || d.Start.IsZero() {
		return demoInfo{}, fmt.Errorf("%s: not a hay demo marker (remove the directory or use another --data)", path)
	}
	return d, nil
}

// writeDemoMarker writes the marker durably before any line is stored,
// so a store in the directory always has the marker that describes it.
func writeDemoMarker(path string, d demoInfo) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDirOf(path)
}

func syncDirOf(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
