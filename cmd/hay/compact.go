package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
)

func init() {
	register(&command{
		name:    "compact",
		summary: "rewrite stored segments for faster selective searches",
		run:     runCompact,
	})
}

func runCompact(args []string) error {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay compact [flags]")
		fmt.Fprintln(fs.Output(), "\nFlushes what ingest left in the write-ahead log, then rewrites every segment")
		fmt.Fprintln(fs.Output(), "not compacted before into smaller blocks with stronger compression, merging")
		fmt.Fprintln(fs.Output(), "consecutive ones: a needle the skip index finds in a few blocks then decodes")
		fmt.Fprintln(fs.Output(), "about half as much, every search opens fewer segments, and the store stays")
		fmt.Fprintln(fs.Output(), "about as large. Results of every search are unchanged. It costs")
		fmt.Fprintln(fs.Output(), "about 1.5x ingest's CPU time, once. Searches may run meanwhile; ingest and")
		fmt.Fprintln(fs.Output(), "serve may not (one writer holds the data directory's lock). Ctrl-C stops it")
		fmt.Fprintln(fs.Output(), "safely (exit 130): what was rewritten stays rewritten. Run it again after each ingest;")
		fmt.Fprintln(fs.Output(), "it skips what it compacted before, except small segments it left: once")
		fmt.Fprintln(fs.Output(), "consecutive ones add up to half of --merge-bytes they are merged into one.")
		fmt.Fprintln(fs.Output(), "--codec and the other layout flags apply to the segments this run rewrites.")
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	data := fs.String("data", defaultDataDir(), "data `dir`ectory ($HAY_DATA when set)")
	workers := fs.Int("workers", 0, "segments rewritten at once (0: one per core)")
	blockSize := fs.Int("block-size", store.CompactSegment.BlockSize, "target raw `bytes` per block (smaller: selective searches decode less, the skip index grows)")
	level := fs.Int("level", store.CompactSegment.Level, "zstd `level`: 1 fastest, 2 zstd's default (what ingest writes), 3 better, 4 best")
	codecName := fs.String("codec", "default", "block `codec`: default (zstd; LZ4 for blocks LZ4 stores 4x smaller), zstd, lz4 or none. On generated logs lz4 stores 1.4x as much as default and full scans take 0.7x the time; none 4.2x as much, 0.45x the time")
	merge := fs.Int64("merge-bytes", store.DefaultMergeBytes, "merge consecutive segments into one of up to this many raw `bytes` (0: rewrite each alone)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if *workers < 0 {
		return fmt.Errorf("%w: --workers must be 0 or more", errUsage)
	}
	if *blockSize < 4<<10 || *blockSize > segment.MaxBlockSize {
		return fmt.Errorf("%w: --block-size must be from 4096 to %d", errUsage, segment.MaxBlockSize)
	}
	if *level < 1 || *level > 4 {
		return fmt.Errorf("%w: --level must be 1, 2, 3 or 4", errUsage)
	}
	if *merge < 0 {
		return fmt.Errorf("%w: --merge-bytes must be 0 or more", errUsage)
	}
	codec, err := segment.ParseCodec(*codecName)
	if err != nil {
		return fmt.Errorf("%w: --codec: %v", errUsage, err)
	}
	layout := segment.Options{BlockSize: *blockSize, Level: *level, Codec: codec}
	mergeBytes := *merge
	if mergeBytes == 0 {
		mergeBytes = -1 // store.CompactOptions: negative means no merging
	}
	if err := store.CheckStore(*data); err != nil {
		return tenantLayoutHint(*data, err) // Open would make a store there
	}
	release, err := checkNotServed("compact", *data)
	if err != nil {
		return err
	}
	defer release()
	st, err := store.Open(*data, store.Options{FsyncInterval: -1})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t0 := time.Now()
	tty := isTerminal(os.Stderr)
	progress := func(done, total int64) {
		if tty {
			fmt.Fprintf(os.Stderr, "\rcompact: %.0f of %.0f MB of entries (%d%%) ", float64(done)/1e6, float64(total)/1e6, done*100/max(total, 1))
		}
	}
	cs, err := st.Compact(ctx, store.CompactOptions{Segment: &layout, MergeBytes: mergeBytes, Workers: *workers, Progress: progress})
	if tty && cs.Segments > 0 {
		fmt.Fprintln(os.Stderr)
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, context.Canceled) {
		msg := fmt.Sprintf("interrupted after %d segments; they stay compacted, and running hay compact again finishes the rest", cs.Segments)
		if cs.Segments == 0 {
			msg = "interrupted before any segment was rewritten; the store is as it was"
		}
		err = &exitError{code: 130, err: errors.New(msg)} // as hay search and ingest
	}
	var werr error
	if cs.Segments > 0 {
		_, werr = fmt.Printf("compacted %d segments into %d, %.1f MB of entries: %.1f MB -> %.1f MB in %.1f s\n",
			cs.Segments, cs.Written, float64(cs.RawBytes)/1e6, float64(cs.Before)/1e6, float64(cs.After)/1e6, time.Since(t0).Seconds())
	} else if err == nil {
		_, werr = fmt.Println("nothing to compact")
	}
	if werr != nil && err == nil {
		// As hay search: a summary lost on a full disk or a closed
		// output is a failure (it exited 0), named on stderr. The
		// store itself is compacted.
		err = fmt.Errorf("the store is compacted, but its summary was not written: %w", werr)
	}
	return err
}
