package main

import (
	"flag"
	"fmt"
	"os"

	"haystack/internal/store"
)

func init() {
	register(&command{
		name:    "verify",
		summary: "check every checksum in the data directory",
		run:     runVerify,
	})
}

func runVerify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay verify [flags]")
		fmt.Fprintln(fs.Output(), "\nChecks the manifest, the write-ahead log and every block of every segment.")
		fmt.Fprintln(fs.Output(), "Exits 0 when clean, 1 naming each damaged file and block otherwise.")
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	data := fs.String("data", defaultDataDir(), "data `dir`ectory (default $HAY_DATA, else ./hay-data)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	ps, err := store.Verify(*data)
	if err != nil {
		return err
	}
	damaged := 0
	for _, p := range ps {
		fmt.Fprintf(os.Stderr, "%s\n", p)
		if p.Damage {
			damaged++
		}
	}
	if damaged > 0 {
		return fmt.Errorf("%s: %d problem(s) found", *data, damaged)
	}
	snap, err := store.OpenSnapshot(*data)
	if err != nil {
		return err
	}
	defer snap.Close()
	st := snap.Manifest
	var entries, raw, size int64
	for _, s := range st.Segments {
		entries, raw, size = entries+s.Entries, raw+s.RawBytes, size+s.Size
	}
	fmt.Printf("ok: %d segments, %d entries, %.1f MB of entries in %.1f MB, %d streams\n",
		len(st.Segments), entries, float64(raw)/1e6, float64(size)/1e6, snap.NumStreams())
	return nil
}
