package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"haystack/internal/version"
	"haystack/needle"
)

func init() {
	register(&command{name: "version", summary: "print hay's version, build and the search kernel this machine uses", run: runVersion})
}

func runVersion(args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay version")
		fmt.Fprintln(fs.Output())
		fmt.Fprintln(fs.Output(), "Prints the version and VCS revision of this build, its Go version and")
		fmt.Fprintln(fs.Output(), "platform, and the substring-search kernel chosen for this CPU (worth")
		fmt.Fprintln(fs.Output(), "quoting in a bug report: search speed depends on it). Also: hay --version.")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	printVersion(os.Stdout)
	return nil
}

// printVersion writes the build's line, then the platform and kernels:
//
//	haystack (devel) go1.26.8
//	platform: linux/amd64
//	search kernel: avx512 (supported: generic avx2 avx512)
func printVersion(w io.Writer) {
	fmt.Fprintln(w, version.Get())
	fmt.Fprintf(w, "platform: %s/%s\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "search kernel: %s (supported: %s)\n", needle.Impl(), strings.Join(needle.Kernels(), " "))
}
