package main

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"haystack/internal/store"
	"haystack/internal/testseed"
)

// TestHelperHay is not a test: run as a child process (HAY_TEST_HELPER=1)
// it is the hay command, with the arguments after "--". This gives the
// crash test a real `hay` process built from this package's code without
// a separate go build.
func TestHelperHay(t *testing.T) {
	if os.Getenv("HAY_TEST_HELPER") != "1" {
		return
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(runMain(args))
}

func hayCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperHay$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "HAY_TEST_HELPER=1")
	return cmd
}

// genInput writes about size bytes of log lines: timestamped and not,
// some long, some empty, CRLF now and then.
func genInput(t *testing.T, size int) (path string, want []byte) {
	r := rand.New(rand.NewPCG(9, 9))
	var b, stored bytes.Buffer
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := 0; b.Len() < size; i++ {
		var line string
		switch r.IntN(10) {
		case 0:
			line = ""
		case 1:
			line = fmt.Sprintf("    at com.example.Foo.bar(Foo.java:%d) %s", i, bytes.Repeat([]byte{'x'}, r.IntN(300)))
		default:
			line = fmt.Sprintf("%s level=info req=%08x line=%d msg=\"served /api/v1/items in %dms\"",
				t0.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), r.Uint32(), i, r.IntN(900))
		}
		stored.WriteString(line + "\n")
		if r.IntN(20) == 0 {
			line += "\r"
		}
		b.WriteString(line + "\n")
	}
	path = filepath.Join(t.TempDir(), "input.log")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, stored.Bytes()
}

// TestIngestKill kills a real `hay ingest` with SIGKILL at random moments,
// checks after each kill that the store holds an exact prefix of the input
// (whole lines, none damaged, none twice) and that verify finds no damage,
// then lets a re-run finish and checks the store holds the input exactly
// once.
func TestIngestKill(t *testing.T) {
	input, want := genInput(t, 12<<20)
	dir := filepath.Join(t.TempDir(), "data")
	r := rand.New(rand.NewPCG(testseed.Seed(t, "HAY_INGEST_KILL_SEED"), 1))
	var last int
	kills, fresh := 0, 0
	for i := 0; kills < 6 && i < 40; i++ {
		// A 1 MB head gives a flush every few batches, so kills land
		// before, during and after flushes and manifest swaps.
		cmd := hayCommand("ingest", "--data", dir, "--head-bytes", "1000000", "--fsync-interval", "10ms", input)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(r.IntN(150)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		killed := false
		if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
			kills++
			killed = true
		} else if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, stderr.Bytes())
		}
		got, code := hayInProcess(t, "search", "--data", dir, "")
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			// Killed before it created the data directory: no store, which
			// hay search reports as trouble (exit 2), with nothing printed.
			if code != 2 || len(got) != 0 {
				t.Fatalf("run %d: search of a missing store: exit %d, %d bytes; want exit 2, nothing", i, code, len(got))
			}
		} else if code > 1 {
			t.Fatalf("run %d: search exit %d", i, code)
		}
		if !bytes.HasPrefix(want, got) {
			t.Fatalf("run %d: store is not a prefix of the input (%d bytes, first difference at line %d)",
				i, len(got), firstDiffLine(got, want[:min(len(want), len(got))]))
		}
		if len(got) < last {
			t.Fatalf("run %d: store shrank from %d to %d bytes", i, last, len(got))
		}
		last = len(got)
		// (A run killed before it created the WAL directory left no store.)
		if _, err := os.Stat(filepath.Join(dir, "wal")); err == nil {
			if _, code := hayInProcess(t, "verify", "--data", dir); code != 0 {
				t.Fatalf("run %d: verify exit %d after a kill", i, code)
			}
		}
		if !killed {
			// The run finished: the store must be the whole input; go
			// on killing in a fresh directory.
			if len(got) != len(want) {
				t.Fatalf("run %d finished with %d of %d bytes stored", i, len(got), len(want))
			}
			fresh++
			dir = filepath.Join(t.TempDir(), fmt.Sprintf("data%d", fresh))
			last = 0
		}
	}
	if kills < 3 {
		t.Fatalf("only %d runs were killed mid-way", kills)
	}
	t.Logf("%d kills; before the final run the store held %d of %d bytes", kills, last, len(want))
	if out, err := hayCommand("ingest", "--data", dir, input).CombinedOutput(); err != nil {
		t.Fatalf("final ingest: %v\n%s", err, out)
	}
	got, _ := hayInProcess(t, "search", "--data", dir, "")
	if !bytes.Equal(got, want) {
		t.Fatalf("after the final run the store holds %d bytes, want the input's %d exactly (first difference at line %d)",
			len(got), len(want), firstDiffLine(got, want))
	}
	// Running again adds nothing.
	if _, code := hayInProcess(t, "ingest", "--data", dir, input); code != 0 {
		t.Fatal("re-run failed")
	}
	n, _ := hayInProcess(t, "search", "--data", dir, "-c", "")
	if wantN := fmt.Sprintf("%d\n", bytes.Count(want, []byte("\n"))); string(n) != wantN {
		t.Fatalf("after a re-run: %s entries, want %s", n, wantN)
	}
}

// TestIngestResumeGrowingFile: a file ingested, appended to and ingested
// again is stored once; a rewritten file is taken as new content.
func TestIngestResumeGrowingFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	f := filepath.Join(t.TempDir(), "app.log")
	os.WriteFile(f, []byte("one\ntwo\n"), 0o644)
	hayInProcess(t, "ingest", "--data", dir, f)
	fh, _ := os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("three\n")
	fh.Close()
	hayInProcess(t, "ingest", "--data", dir, f)
	if got, _ := hayInProcess(t, "search", "--data", dir, ""); string(got) != "one\ntwo\nthree\n" {
		t.Fatalf("after growth: %q", got)
	}
	os.WriteFile(f, []byte("ONE\ntwo\nthree\nfour\n"), 0o644)
	hayInProcess(t, "ingest", "--data", dir, f)
	if got, _ := hayInProcess(t, "search", "--data", dir, ""); string(got) != "one\ntwo\nthree\nONE\ntwo\nthree\nfour\n" {
		t.Fatalf("after rewrite: %q", got)
	}
	// Two files, two streams, merged by time (no timestamps here: by
	// ingestion time, so file order).
	g := filepath.Join(t.TempDir(), "other.log")
	os.WriteFile(g, []byte("2020-01-01T00:00:00Z old\n"), 0o644)
	hayInProcess(t, "ingest", "--data", dir, "--stream", "env=test", g)
	got, _ := hayInProcess(t, "search", "--data", dir, "--json", "old")
	if want := `{"time":"2020-01-01T00:00:00Z","labels":{"env":"test","source":"other.log"},"line":"2020-01-01T00:00:00Z old"}` + "\n"; string(got) != want {
		t.Fatalf("json: %s", got)
	}
	if got, _ := hayInProcess(t, "search", "--data", dir, "o"); string(got) != "2020-01-01T00:00:00Z old\none\ntwo\ntwo\nfour\n" {
		t.Fatalf("merged by time: %q", got)
	}
	if got, _ := hayInProcess(t, "search", "--data", dir, "--until", "2021-01-01T00:00:00Z", ""); string(got) != "2020-01-01T00:00:00Z old\n" {
		t.Fatalf("--until: %q", got)
	}
	if got, _ := hayInProcess(t, "search", "--data", dir, "--since", "2021-01-01T00:00:00Z", "-c", ""); string(got) != "7\n" {
		t.Fatalf("--since: %q", got)
	}
	if got, _ := hayInProcess(t, "search", "--data", dir, "--since", "1h", "-c", "o"); string(got) != "4\n" {
		t.Fatalf("--since 1h: %q", got)
	}
}

// TestIngestStdinIdle: lines piped to a running ingest are stored (and
// searchable) as soon as the input goes quiet, not when a batch fills;
// SIGINT while it waits for input ends it cleanly with everything stored.
func TestIngestStdinIdle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cmd := hayCommand("ingest", "--data", dir, "--stream", "app=pipe")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor := func(want string) {
		t.Helper()
		var got []byte
		for range 100 {
			if _, err := os.Stat(filepath.Join(dir, "wal")); err == nil {
				got, _ = hayInProcess(t, "search", "--data", dir, "")
				if string(got) == want {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("store holds %q, want %q", got, want)
	}
	in.Write([]byte("first\nsecond\n"))
	waitFor("first\nsecond\n")
	in.Write([]byte("third\n"))
	waitFor("first\nsecond\nthird\n")
	cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !bytes.Contains(stderr.Bytes(), []byte("interrupted")) {
		t.Fatalf("after SIGINT: %v, stderr %q", err, stderr.Bytes())
	}
	if got, _ := hayInProcess(t, "search", "--data", dir, ""); string(got) != "first\nsecond\nthird\n" {
		t.Fatalf("after SIGINT the store holds %q", got)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg")); len(segs) != 1 {
		t.Fatalf("the head was not flushed on SIGINT: segments %v", segs)
	}
}

// TestIngestRotatedSameHeader: a file rewritten with the same first
// kilobyte (a fixed header) and grown past the stored length is a new file,
// ingested whole: the check also covers the bytes before the stored offset.
// Before, only the first kilobyte was checked, ingest resumed in the middle
// of the new content, and its first entries were lost (found by the ingest
// differential test). A plain grown file still resumes, also from a source
// recorded with the older, prefix-only check.
func TestIngestRotatedSameHeader(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "app.log")
	header := "# " + strings.Repeat("h", 1100) + "\n"
	os.WriteFile(f, []byte(header+"old 1\nold 2\n"), 0o644)
	data := filepath.Join(dir, "data")
	if _, code := hayInProcess(t, "ingest", "--data", data, f); code != 0 {
		t.Fatal(code)
	}
	os.WriteFile(f, []byte(header+"new 1\nnew 2\nnew 3\n"), 0o644)
	if _, code := hayInProcess(t, "ingest", "--data", data, f); code != 0 {
		t.Fatal(code)
	}
	got, _ := hayInProcess(t, "search", "--data", data, "-e", "old", "-e", "new")
	if want := "old 1\nold 2\nnew 1\nnew 2\nnew 3\n"; string(got) != want {
		t.Fatalf("after a rotation with the same header: %q, want %q", got, want)
	}
	fh, _ := os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("new 4\n")
	fh.Close()
	hayInProcess(t, "ingest", "--data", data, f)
	if got, _ := hayInProcess(t, "search", "--data", data, "-c", "new"); string(got) != "4\n" {
		t.Fatalf("after growth: %q new entries, want 4", got)
	}

	// A source recorded by the prefix-only check still resumes.
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := filepath.Abs(f)
	src, _ := st.Source(key)
	content, _ := os.ReadFile(f)
	src.Check = crc32.Checksum(content[:store.CheckLen], crc32cTable)
	if err := st.Append(&store.Batch{Sources: []store.Source{src}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	fh, _ = os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("new 5\n")
	fh.Close()
	hayInProcess(t, "ingest", "--data", data, f)
	if got, _ := hayInProcess(t, "search", "--data", data, "-c", "new"); string(got) != "5\n" {
		t.Fatalf("resumed from a prefix-only check: %q new entries, want 5", got)
	}
}
