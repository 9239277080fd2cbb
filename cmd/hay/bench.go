package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// benchCommands are the sub-benchmarks of `hay bench`. Adding one is one
// entry here, with its run function in its own bench_NAME.go file; each
// parses its own flags, like a top-level command.
var benchCommands = []*command{
	{name: "kernels", summary: "substring kernels vs the textbook methods over generated log lines (docs/BENCHMARKS.md, Kernels)", run: runBenchKernels},
	{name: "push", summary: "HTTP push throughput against a `hay serve` child process (docs/BENCHMARKS.md, HTTP API)", run: runBenchPush},
	{name: "query", summary: "HTTP query latency under concurrent clients against a `hay serve` child process (docs/BENCHMARKS.md, HTTP API)", run: runBenchQuery},
	{name: "e2e", summary: "generate, ingest, then time hay search -c against rg -c -F by needle class (docs/BENCHMARKS.md, End to end)", run: runBenchE2E},
}

// benchHelpers are run like benchCommands but not listed: tools that
// benchmark scripts call (scripts/bench-victorialogs).
var benchHelpers = []*command{
	{name: "vl-jsonline", summary: "raw lines to VictoriaLogs JSON lines", run: runBenchVLJSON},
}

func init() {
	register(&command{
		name:    "bench",
		summary: "run a benchmark: " + benchNames(),
		run:     runBench,
	})
}

func benchNames() string {
	s := ""
	for i, c := range benchCommands {
		if i > 0 {
			s += ", "
		}
		s += c.name
	}
	return s
}

func benchUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: hay bench NAME [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Benchmarks:")
	for _, c := range benchCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'hay bench NAME --help' for a benchmark's flags.")
}

func runBench(args []string) error {
	if len(args) == 0 {
		benchUsage(os.Stderr)
		return fmt.Errorf("%w: missing benchmark name", errUsage)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		benchUsage(os.Stdout)
		return flag.ErrHelp
	}
	for _, c := range append(benchCommands[:len(benchCommands):len(benchCommands)], benchHelpers...) {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	benchUsage(os.Stderr)
	return fmt.Errorf("%w: unknown benchmark %q", errUsage, args[0])
}
