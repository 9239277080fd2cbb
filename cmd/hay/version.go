package main

import (
	"bufio"
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
	return printVersion(os.Stdout)
}

// printVersion writes the build's line, then the platform and kernels:
//
//	haystack (devel) go1.26.8
//	platform: linux/amd64
//	search kernel: avx512 (supported: generic avx2 avx512)
//
// It returns the write's error, as hay search does with its output: `hay
// version > /dev/full` exited 0 with nothing written.
func printVersion(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintln(b, version.Get())
	fmt.Fprintf(b, "platform: %s/%s\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(b, "search kernel: %s (supported: %s)\n", needle.Impl(), strings.Join(needle.Kernels(), " "))
	return b.Flush()
}
