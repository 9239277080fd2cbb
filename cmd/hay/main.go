// Command hay is Haystack's command line: a grep-like search over a durable,
// compressed log store, plus the tools around it.
//
// Each subcommand lives in its own file and registers itself in init with
// register; main only dispatches. Subcommands parse their own flags with a
// flag.FlagSet so that `hay CMD --help` describes CMD.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"haystack/internal/store"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// command is one `hay` subcommand.
type command struct {
	name    string
	summary string                    // one line for `hay help`
	run     func(args []string) error // args exclude the subcommand name
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("hay: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by bad arguments: main exits 2 for it, as
// grep and flag do.
var errUsage = errors.New("usage")

// parseFlags parses a subcommand's arguments: --help comes back as
// flag.ErrHelp (main exits 0 for it, the usage already printed), any
// other flag error as errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return parseFlagsWith(fs, args, nil, nil)
}

// parseFlagsWith is parseFlags with permuteFlags' strict flags, and
// rewrite (hay search's grep forms) run on the permuted arguments.
func parseFlagsWith(fs *flag.FlagSet, args []string, strict map[string]bool, rewrite func([]string) []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if (a == "-h" || a == "-help" || a == "--help" || a == "--h") && fs.Output() == os.Stderr {
			// Help asked for goes to stdout (hay search --help | less);
			// the usage printed for a mistake stays on stderr.
			fs.SetOutput(os.Stdout)
		}
	}
	args, err := permuteFlags(fs, args, strict)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if rewrite != nil {
		args = rewrite(args)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// permuteFlags moves flags that follow positional arguments in front of
// them, as GNU tools accept them (`hay ingest app.log --stream app=api`,
// `hay search timeout -c`): Go's flag package stops at the first
// positional argument, and would take the later flags for file names or
// patterns (after ingesting the files before them under the wrong
// labels). A flag keeps its value when it takes one; "--" still ends the
// flags, and the positional arguments go after a "--" of their own, so
// one that starts with '-' stays positional.
//
// The value of a flag named in strict must not be one of fs's flags:
// `hay search -v -i error`, where -v takes the literal to drop, is almost
// always grep's -v switch typed before another flag, and silently
// dropping "-i" inverts the answer. `-v=-i` still says it on purpose.
func permuteFlags(fs *flag.FlagSet, args []string, strict map[string]bool) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil || hasValue || isBoolFlag(f) || i+1 == len(args) {
			continue
		}
		v := args[i+1]
		if vn, _, _ := strings.Cut(strings.TrimLeft(v, "-"), "="); strict[name] && len(v) > 1 && v[0] == '-' && fs.Lookup(vn) != nil {
			return nil, fmt.Errorf("%s takes a value, and got the flag %s: put %s before it, or write %s=%s if %q is meant as its value", a, v, v, a, v, v)
		}
		flags = append(flags, v)
		i++
	}
	if len(pos) == 0 {
		return flags, nil
	}
	return append(append(flags, "--"), pos...), nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// usage writes the list of commands to out; the error is the write's.
func usage(out io.Writer) error {
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "hay: search logs like grep, over a durable compressed store.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: hay COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'hay COMMAND --help' for a command's flags.")
	return w.Flush()
}

func main() {
	exiting = true
	os.Exit(runMain(os.Args[1:]))
}

// exiting is set by main: the process ends as soon as the command returns,
// so a command may leave to exit what exit releases anyway. Tests call
// runMain with it unset.
var exiting bool

func runMain(args []string) int {
	if len(args) > 1 && args[0] == "help" {
		// hay help search: what hay search --help says, as go help build.
		args = append(slices.Clone(args[1:]), "--help")
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if err := usage(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "hay: %v\n", err)
			return 1
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		if err := printVersion(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "hay: %v\n", err)
			return 1
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "hay: unknown command %q\n\n", args[0])
		usage(os.Stderr)
		return 2
	}
	err := c.run(args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(os.Stderr, "hay %s: %v\n", c.name, err)
		return 2
	case errors.Is(err, errNoMatch):
		return 1
	case errors.As(err, new(*exitError)):
		fmt.Fprintf(os.Stderr, "hay %s: %v\n", c.name, err)
		var ee *exitError
		errors.As(err, &ee)
		return ee.code
	default:
		fmt.Fprintf(os.Stderr, "hay %s: %v\n", c.name, err)
		return 1
	}
}

// exitError gives an error its own exit status: hay search exits 2 on
// trouble (a missing or damaged store, a failed read), as grep does, so
// that 1 always means "nothing matched".
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errNoMatch makes a command exit 1 silently, as grep does when nothing matched.
var errNoMatch = errors.New("no match")

// tenantLayoutHint adds, to an error saying dir holds no store, where the
// stores are when dir is hay serve's (or the demo's) data directory: one
// store per tenant in dir/<tenant>. Without it, `hay search --data
// hay-demo` said there was no store at all.
func tenantLayoutHint(dir string, err error) error {
	if !errors.Is(err, store.ErrNoStore) {
		return err
	}
	if tenants := tenantStores(dir); len(tenants) > 0 {
		return fmt.Errorf("%w; %s is hay serve's data directory, with one store per tenant (%s): give one, e.g. --data %s", err, dir, strings.Join(tenants, ", "), filepath.Join(dir, tenants[0]))
	}
	return err
}

// tenantStores lists the subdirectories of dir that are stores.
func tenantStores(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && store.CheckStore(filepath.Join(dir, e.Name())) == nil {
			out = append(out, e.Name())
		}
	}
	return out
}
