package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"haystack/internal/testfs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The disk-full contract, checked on a small tmpfs that the test mounts
// (mount(2) needs root; CI runs as root): a write that fails for lack of
// space is an error naming the file and the cause, with a non-zero exit
// or a 5xx, never a panic; everything acknowledged before it (hay ingest
// exiting 0, a push answered 204) is stored exactly once; the store is
// never left damaged; and once space is freed, running the same command
// again finishes the job. The oracle is the input itself (ingest,
// compact) and the list of lines the server acknowledged (serve).

// diskfullMount mounts a tmpfs of size bytes on a new directory and
// unmounts it at the end of the test.
func diskfullMount(t *testing.T, size int64) string {
	t.Helper()
	return testfs.MountTmpfs(t, fmt.Sprintf("size=%d", size))
}

// diskfullRemount changes the tmpfs at dir: its size ("size=N") or
// read-only ("ro") / read-write ("rw").
func diskfullRemount(t *testing.T, dir, opts string) {
	t.Helper()
	flags := uintptr(unix.MS_REMOUNT)
	switch opts {
	case "ro":
		flags |= unix.MS_RDONLY
		opts = ""
	case "rw":
		opts = ""
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Fatalf("remount %s %q: %v", dir, opts, err)
	}
}

// diskfullAvail is the free space of the filesystem holding dir.
func diskfullAvail(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize) // Bsize is uint32 on s390x
}

// diskfullLeave fills the tmpfs at mnt with a file of allocated pages so
// that about free bytes (rounded down to pages) stay free, and returns
// the function that deletes it again.
func diskfullLeave(t *testing.T, mnt string, free int64) (release func()) {
	t.Helper()
	path := filepath.Join(mnt, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := int64(os.Getpagesize())
	n := (diskfullAvail(t, mnt) - free + page - 1) / page * page
	if n > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
			t.Fatalf("fallocate %d bytes: %v", n, err)
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// diskfullRun runs a real hay process and returns its stderr and exit
// code (stdout is discarded).
func diskfullRun(t *testing.T, args ...string) (stderr string, code int) {
	t.Helper()
	cmd := hayCommand(args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return eb.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return eb.String(), 0
}

// diskfullCheckFailure checks a failed command's message: the cause,
// a path inside the data directory, no panic.
func diskfullCheckFailure(t *testing.T, what, stderr, cause, dataDir string) {
	t.Helper()
	if !strings.Contains(stderr, cause) || !strings.Contains(stderr, dataDir) {
		t.Errorf("%s: the error should name the cause %q and a file in %s; stderr:\n%s", what, cause, dataDir, stderr)
	}
	if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
		t.Errorf("%s panicked:\n%s", what, stderr)
	}
}

// diskfullCheckStore checks the store at dir: hay verify finds no damage
// (notes about a crash's leftovers are fine), and hay search "" prints a
// prefix of want (the whole of it when whole).
func diskfullCheckStore(t *testing.T, what, dir string, want []byte, whole bool) {
	t.Helper()
	if out, code := diskfullRun(t, "verify", "--data", dir); code != 0 {
		t.Fatalf("%s: hay verify exit %d:\n%s", what, code, out)
	}
	got, code := hayInProcess(t, "search", "--data", dir, "")
	if code > 1 {
		t.Fatalf("%s: hay search exit %d", what, code)
	}
	switch {
	case whole && !bytes.Equal(got, want):
		t.Fatalf("%s: the store holds %d bytes, want the input's %d exactly (first difference at line %d)",
			what, len(got), len(want), firstDiffLine(got, want))
	case !bytes.HasPrefix(want, got):
		t.Fatalf("%s: the store is not a prefix of the input (%d bytes, first difference at line %d)",
			what, len(got), firstDiffLine(got, want[:min(len(want), len(got))]))
	}
}

// TestDiskFullIngest runs hay ingest with the disk full at several
// points: in the first WAL record, later in the WAL, writing a segment,
// writing the manifest. Each run either stores the whole input (exit 0)
// or fails naming the file and "no space left on device" while the store
// stays a clean prefix of the input; after the space is freed, the same
// command finishes and the store holds the input exactly.
//
// The head is just under one ingest batch, so each WAL file holds one
// record and is flushed into a segment at once: a full disk then hits a
// segment or the manifest as often as the WAL. (With larger heads a WAL
// file fills up with records first; see /work/notes/enospc-findings.md.)
func TestDiskFullIngest(t *testing.T) {
	mnt := diskfullMount(t, 24<<20)
	input, want := genInput(t, 4<<20)
	free := []int64{0, 200 << 10, 1100 << 10, 1900 << 10, 2200 << 10, 2600 << 10, 3400 << 10}
	failed := 0
	for i, f := range free {
		dir := filepath.Join(mnt, fmt.Sprintf("d%d", i))
		release := diskfullLeave(t, mnt, f)
		what := fmt.Sprintf("%d kB free", f>>10)
		stderr, code := diskfullRun(t, "ingest", "--data", dir, "--head-bytes", "1000000", input)
		t.Logf("%s: hay ingest exit %d %s", what, code, strings.TrimSpace(stderr))
		if code != 0 {
			failed++
			diskfullCheckFailure(t, what+": hay ingest", stderr, "no space left on device", dir)
		}
		diskfullCheckStore(t, what+", after the ingest", dir, want, code == 0)
		release()
		if stderr, code := diskfullRun(t, "ingest", "--data", dir, "--head-bytes", "1000000", input); code != 0 {
			t.Fatalf("%s: the re-run after freeing space: exit %d\n%s", what, code, stderr)
		}
		diskfullCheckStore(t, what+", after the re-run", dir, want, true)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	if failed < len(free)-2 {
		t.Fatalf("only %d of %d runs hit the full disk: the test no longer tests it", failed, len(free))
	}
}

// TestDiskFullCompact runs hay compact with too little space for the
// rewritten segments (none, half of one, about one, two): it fails naming
// the file and the cause or compacts what fits; either way every search
// answers as before, hay verify finds no damage, and no temp file stays
// in segments/. After the space is freed hay compact finishes.
func TestDiskFullCompact(t *testing.T) {
	mnt := diskfullMount(t, 24<<20)
	input, want := genInput(t, 4<<20)
	base := filepath.Join(mnt, "base")
	if stderr, code := diskfullRun(t, "ingest", "--data", base, "--head-bytes", "1000000", input); code != 0 {
		t.Fatalf("ingest: exit %d\n%s", code, stderr)
	}
	segs, err := filepath.Glob(filepath.Join(base, "segments", "*.seg"))
	if err != nil || len(segs) < 3 {
		t.Fatalf("want at least 3 segments to compact, have %d (%v)", len(segs), err)
	}
	fi, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	seg := fi.Size()
	page := int64(os.Getpagesize())
	failed := 0
	for i, f := range []int64{0, seg / 2, seg + page, seg + 2*page, 2 * seg} {
		dir := filepath.Join(mnt, fmt.Sprintf("c%d", i))
		if out, err := exec.Command("cp", "-a", base, dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		what := fmt.Sprintf("%d bytes free (a segment is %d)", f, seg)
		release := diskfullLeave(t, mnt, f)
		stderr, code := diskfullRun(t, "compact", "--data", dir, "--workers", "1", "--merge-bytes", "0")
		if code != 0 {
			failed++
			diskfullCheckFailure(t, what+": hay compact", stderr, "no space left on device", dir)
		}
		diskfullCheckStore(t, what+", after the compaction", dir, want, true)
		diskfullNoTemp(t, what, dir)
		release()
		if stderr, code := diskfullRun(t, "compact", "--data", dir, "--workers", "1", "--merge-bytes", "0"); code != 0 {
			t.Fatalf("%s: hay compact after freeing space: exit %d\n%s", what, code, stderr)
		}
		diskfullCheckStore(t, what+", after the second compaction", dir, want, true)
		diskfullNoTemp(t, what, dir)
		if out, _ := diskfullRun(t, "verify", "--data", dir); strings.Contains(out, "not in the manifest") {
			t.Fatalf("%s: after a successful compaction a segment is left unlisted:\n%s", what, out)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	if failed < 3 {
		t.Fatalf("only %d compactions hit the full disk: the test no longer tests it", failed)
	}
}

// diskfullNoTemp fails if segments/ holds a temp file.
func diskfullNoTemp(t *testing.T, what, dir string) {
	t.Helper()
	tmp, _ := filepath.Glob(filepath.Join(dir, "segments", "*.tmp"))
	if len(tmp) > 0 {
		t.Fatalf("%s: temp files left: %v", what, tmp)
	}
}

// TestDiskFullReadOnly: a store on a read-only filesystem, with entries
// still in the WAL (a killed ingest), is searched exactly (search only
// reads), verified, and refused by ingest and compact with an error
// naming the file and "read-only file system".
func TestDiskFullReadOnly(t *testing.T) {
	mnt := diskfullMount(t, 8<<20)
	dir := filepath.Join(mnt, "data")
	var want bytes.Buffer
	for i := range 3000 {
		fmt.Fprintf(&want, "2026-11-30T10:00:%02d.%03dZ level=info n=%d read-only check\n", i/1000, i%1000, i)
	}
	// An ingest of stdin that stays open: it stores what it read when the
	// input goes quiet and fsyncs within 10 ms; then it is killed, so the
	// entries are in the WAL only.
	cmd := hayCommand("ingest", "--data", dir, "--fsync-interval", "10ms", "-")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write(want.Bytes()); err != nil {
		t.Fatal(err)
	}
	waitStored(t, dir, 3000)
	time.Sleep(100 * time.Millisecond) // past the 10 ms fsync
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg")); len(segs) != 0 {
		t.Fatalf("want the entries in the WAL only, found segments %v", segs)
	}
	diskfullRemount(t, mnt, "ro")
	defer diskfullRemount(t, mnt, "rw")
	diskfullCheckStore(t, "read-only", dir, want.Bytes(), true)
	if got, code := hayInProcess(t, "search", "--data", dir, "-c", "n=2999 "); code != 0 || string(got) != "1\n" {
		t.Fatalf("read-only: search -c n=2999: %q, exit %d", got, code)
	}
	for _, args := range [][]string{
		{"ingest", "--data", dir, "-"},
		{"compact", "--data", dir},
		{"verify", "--repair", "--data", dir},
	} {
		stderr, code := diskfullRun(t, args...)
		if code == 0 {
			t.Fatalf("hay %s on a read-only store: exit 0", args[0])
		}
		diskfullCheckFailure(t, "hay "+strings.Join(args, " ")+" on a read-only store", stderr, "read-only file system", dir)
	}
}

// diskfullPush sends one Loki JSON push of n lines (each unique: prefix,
// push number, entry number, padding) and returns them with the status
// and body of the answer.
func diskfullPush(t *testing.T, client *http.Client, base, prefix string, i, n int) (lines []string, status int, body string) {
	t.Helper()
	now := time.Now().UnixNano()
	vals := make([][2]string, n)
	// Random hex, so that a segment is about half the WAL's size.
	r := rand.New(rand.NewPCG(uint64(i), uint64(len(prefix))))
	pad := make([]byte, 92) // lines of 199 bytes
	for k := range vals {
		for j := range pad {
			pad[j] = byte(r.Uint32())
		}
		line := fmt.Sprintf("%s-%06d-%04d %x", prefix, i, k, pad)
		vals[k] = [2]string{strconv.FormatInt(now+int64(k), 10), line}
		lines = append(lines, line)
	}
	b, err := json.Marshal(map[string]any{"streams": []any{map[string]any{"stream": map[string]string{"app": "diskfull"}, "values": vals}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(base+"/loki/api/v1/push", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("push %d: %v", i, err)
	}
	defer resp.Body.Close()
	var rb bytes.Buffer
	rb.ReadFrom(resp.Body)
	return lines, resp.StatusCode, rb.String()
}

// TestDiskFullServe pushes to a real hay serve until its disk is full:
// the failing push gets a 5xx naming "no space left on device" and
// /ready turns 503. The server is then stopped (round 0: SIGTERM, which
// must exit non-zero naming the cause; round 1: SIGKILL), space is freed
// and it is restarted: pushes are stored again, and at the end every
// push answered 204 is stored exactly once and nothing never sent is.
func TestDiskFullServe(t *testing.T) {
	mnt := diskfullMount(t, 8<<20)
	data := filepath.Join(mnt, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	sent := map[string]bool{}
	var acked []string
	push := func(srv *crashServer, prefix string, i int) (int, string) {
		lines, status, body := diskfullPush(t, client, srv.url, prefix, i, 50)
		for _, l := range lines {
			sent[l] = true
		}
		if status == http.StatusNoContent {
			acked = append(acked, lines...)
		}
		return status, body
	}
	// No background compaction: a compaction that fails for space is
	// another test's subject; here the WAL fills up.
	srv := startCrashServe(t, data, "--compact-interval", "0")
	for round := range 2 {
		release := diskfullLeave(t, mnt, 1<<20)
		prefix := fmt.Sprintf("r%d", round)
		failedAt := -1
		for i := 0; i < 400 && failedAt < 0; i++ {
			switch status, body := push(srv, prefix, i); {
			case status == http.StatusNoContent:
			case status >= 500:
				failedAt = i
				if !strings.Contains(body, "no space left on device") {
					t.Errorf("round %d: the failed push's answer should name the cause: %d %s", round, status, body)
				}
			default:
				t.Fatalf("round %d, push %d: %d %s", round, i, status, body)
			}
		}
		if failedAt < 0 {
			t.Fatalf("round %d: 400 pushes of 10 kB each fit in 1 MB: the disk never filled", round)
		}
		// A few more pushes while the disk stays full: whatever they
		// are answered, 204 must mean stored.
		for i := failedAt + 1; i < failedAt+4; i++ {
			push(srv, prefix, i)
		}
		if resp, err := client.Get(srv.url + "/ready"); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("round %d: /ready after a failed write: %d, want 503", round, resp.StatusCode)
			}
		}
		if round == 0 {
			srv.cmd.Process.Signal(syscall.SIGTERM)
			err := srv.wait()
			if err == nil {
				t.Errorf("hay serve exited 0 after its store failed; log:\n%s", srv.logs())
			}
		} else {
			srv.kill()
		}
		if !strings.Contains(srv.logs(), "no space left on device") {
			t.Errorf("round %d: the server's log should name the cause:\n%s", round, srv.logs())
		}
		if strings.Contains(srv.logs(), "panic") {
			t.Fatalf("round %d: hay serve panicked:\n%s", round, srv.logs())
		}
		release()
		srv = startCrashServe(t, data, "--compact-interval", "0")
		for i := range 3 {
			if status, body := push(srv, prefix+"-after", i); status != http.StatusNoContent {
				t.Fatalf("round %d: push %d after the restart with space freed: %d %s", round, i, status, body)
			}
		}
		t.Logf("round %d: disk full at push %d", round, failedAt)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := srv.wait(); err != nil {
		t.Fatalf("hay serve after the restart: %v\n%s", err, srv.logs())
	}

	stored := storedLines(t, filepath.Join(data, "fake"))
	seen := map[string]int{}
	for _, l := range stored {
		seen[l]++
		if !sent[l] {
			t.Fatalf("stored a line never sent: %q", l)
		}
		if seen[l] == 2 {
			t.Errorf("stored twice: %q", l)
		}
	}
	var missing []string
	for _, l := range acked {
		if seen[l] == 0 {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Fatalf("%d of %d acknowledged lines are not stored, e.g. %q", len(missing), len(acked), missing[0])
	}
	t.Logf("%d lines acknowledged, %d stored", len(acked), len(stored))
}

// waitStored waits up to 10 s until the store in dir holds n entries (a
// running ingest of stdin has stored them).
func waitStored(t *testing.T, dir string, n int) {
	t.Helper()
	want := fmt.Sprintf("%d\n", n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := hayInProcess(t, "search", "--data", dir, "-c", "")
		if string(got) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ingest of stdin stored %q entries, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
