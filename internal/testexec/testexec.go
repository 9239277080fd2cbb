// Package testexec starts a test binary again as a child process, for the
// tests that SIGKILL a writer and check what survived.
//
// Under a cross-architecture run (scripts/test runs the byte-level
// packages as GOARCH=s390x through `go test -exec qemu-s390x-static`) the
// test binary is not native: the parent runs inside qemu, but its own
// exec of the binary fails with "exec format error" unless binfmt_misc is
// set up. scripts/test therefore also sets HAY_TEST_EXEC to the same
// wrapper, and Command puts it in front of the child, so the kill tests
// run big-endian too instead of being skipped there. Killing the wrapper
// kills the emulated program with it (qemu-user runs it in its own
// process).
package testexec

import (
	"os"
	"os/exec"
	"strings"
)

// Env names the wrapper command (split on spaces) that runs a binary of
// the tested architecture, empty for a native run.
const Env = "HAY_TEST_EXEC"

// Command returns the command that runs exe with args, through the
// wrapper named by HAY_TEST_EXEC when it is set.
func Command(exe string, args ...string) *exec.Cmd {
	wrapper := strings.Fields(os.Getenv(Env))
	if len(wrapper) == 0 {
		return exec.Command(exe, args...)
	}
	return exec.Command(wrapper[0], append(append(wrapper[1:], exe), args...)...)
}
