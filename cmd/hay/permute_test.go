package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagsAfterArguments: flags typed after files or the PATTERN work as
// GNU tools' do (Go's flag package alone stops at the first argument and
// took them for file names: `hay ingest app.log --stream app=api` stored
// app.log under the wrong labels, then failed on a file "--stream").
func TestFlagsAfterArguments(t *testing.T) {
	data, file := grepArgsStore(t, "err one\nERR two\nfine\n-c four\n")
	for _, c := range []struct{ hay, grep []string }{
		{[]string{"err", "-c"}, []string{"-F", "-c", "err"}},
		{[]string{"err", "-i", "-c"}, []string{"-F", "-i", "-c", "err"}},
		{[]string{"err", "-A1"}, []string{"-F", "-A1", "err"}},
		{[]string{"err", "--limit", "1"}, []string{"-F", "-m", "1", "err"}},
		{[]string{"-i", "--", "err", "-c"}, nil}, // two PATTERNs after --: usage
		{[]string{"--", "-c"}, []string{"-F", "--", "-c"}},
		// grep's bundled switches.
		{[]string{"-ic", "err"}, []string{"-F", "-ic", "err"}},
		{[]string{"-ci", "err"}, []string{"-F", "-ci", "err"}},
		{[]string{"err", "-ic"}, []string{"-F", "-ic", "err"}},
		{[]string{"-e", "-ic", "-c"}, []string{"-F", "-c", "-e", "-ic"}},
		{[]string{"-vc", "err"}, nil}, // -v takes a value: refused
		{[]string{"-A1", "-ic", "err"}, []string{"-F", "-A1", "-ic", "err"}},
		// grep prints "--" between groups even with no context lines.
		{[]string{"-C", "0", "-i", "err"}, []string{"-F", "-C", "0", "-i", "err"}},
		{[]string{"-A", "0", "e"}, []string{"-F", "-A", "0", "e"}},
		{[]string{"-B0", "four"}, []string{"-F", "-B0", "four"}},
		{[]string{"-c", "--", "-c"}, []string{"-F", "-c", "--", "-c"}},
	} {
		got, code := hayInProcess(t, append([]string{"search", "--data", data}, c.hay...)...)
		if c.grep == nil {
			if code != 2 {
				t.Errorf("hay search %q: %q exit %d, want 2", c.hay, got, code)
			}
			continue
		}
		want, wcode := grepArgs(t, file, c.grep...)
		if code != wcode || !bytes.Equal(got, want) {
			t.Errorf("hay search %q: %q exit %d; grep %q: %q exit %d", c.hay, got, code, c.grep, want, wcode)
		}
	}

	// ingest: the labels given after the file are the file's.
	dir := t.TempDir()
	f := filepath.Join(dir, "app.log")
	if err := os.WriteFile(f, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, "data")
	if _, code := hayInProcess(t, "ingest", f, "--stream", "app=api", "--data", d); code != 0 {
		t.Fatalf("ingest with flags after the file: exit %d", code)
	}
	if out, code := hayInProcess(t, "search", "--data", d, "-c", "--query", `{app="api"}`); code != 0 || string(out) != "2\n" {
		t.Errorf(`search {app="api"}: %q exit %d, want "2\n"`, out, code)
	}
	if _, err := os.Stat("hay-data"); err == nil {
		t.Error("ingest created ./hay-data: --data after the file was not read")
	}
}

// TestDashVTakesNoFlag: hay search's -v takes the literal to drop, so a
// grep user's `-v -i error` searched for entries with "error" and without
// "-i": the opposite of what was asked, exit 0. Such a value is refused;
// -v=-i still drops "-i" on purpose.
func TestDashVTakesNoFlag(t *testing.T) {
	data, file := grepArgsStore(t, "error one\nfine -i\nERROR two\n")
	for _, args := range [][]string{{"-v", "-i", "error"}, {"-v", "-c", "e"}, {"-v", "-e", "ERROR"}, {"-v", "--limit", "1"}} {
		_, code, stderr := hayInProcessStderr(t, append([]string{"search", "--data", data}, args...)...)
		if code != 2 || !strings.Contains(stderr, "-v takes a value, and got the flag") {
			t.Errorf("hay search %q: exit %d, stderr %q; want 2 naming the flag", args, code, stderr)
		}
	}
	got, code := hayInProcess(t, "search", "--data", data, "-v=-i")
	want, wcode := grepArgs(t, file, "-F", "-v", "-e", "-i")
	if code != wcode || !bytes.Equal(got, want) {
		t.Errorf("hay search -v=-i: %q exit %d; grep: %q exit %d", got, code, want, wcode)
	}
}
