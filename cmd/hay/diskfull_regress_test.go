package main

// Regression tests of the disk-full bugs found on a small tmpfs: each
// failed before its fix (a flush failure hiding acknowledged entries, a
// torn WAL record refused after space came back, pushes acknowledged into
// a removed directory, compactions never retried, partial copies left by
// repair, a compaction's manifest failure blocking pushes, a directory
// replaced under ingest). They need root for mount(2), as diskfull_test.go:
//
//	go test -run TestENOSPC -v ./cmd/hay/

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// enospcCount asks a running server how many entries of {app="diskfull"}
// it has (a Loki instant metric query over the last hour).
func enospcCount(t *testing.T, client *http.Client, base string) string {
	t.Helper()
	q := url.Values{"query": {`sum(count_over_time({app="diskfull"}[1h]))`}}
	resp, err := client.Get(base + "/loki/api/v1/query?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Data.Result) == 0 {
		return "0"
	}
	return fmt.Sprint(r.Data.Result[0].Value[1])
}

// F1: a background flush that fails for space makes the running server
// stop showing the entries of the head it was flushing, all acknowledged.
func TestENOSPCServeFlushFailureHidesAcked(t *testing.T) {
	mnt := diskfullMount(t, 16<<20)
	data := filepath.Join(mnt, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// A 256 KiB head: pushes of 100 lines of 199 bytes (215 bytes each
	// as the head counts them) fill it at the 13th push. The compaction
	// tick is what looks at the failed flush (Store.wait).
	srv := startCrashServe(t, data, "--head-bytes", "256KiB", "--compact-interval", "200ms")
	client := &http.Client{Timeout: 20 * time.Second}
	acked := 0
	push := func(i int) {
		_, status, body := diskfullPush(t, client, srv.url, "f1", i, 100)
		if status != http.StatusNoContent {
			t.Fatalf("push %d: %d %s", i, status, body)
		}
		acked += 100
	}
	for i := range 12 {
		push(i)
	}
	if got := enospcCount(t, client, srv.url); got != "1200" {
		t.Fatalf("before the disk filled the server counts %s entries, want 1200", got)
	}
	// Room for the 13th push (about 22 kB) and the next WAL file's
	// header, not for the head's segment (about 160 kB).
	release := diskfullLeave(t, mnt, 64<<10)
	defer release()
	push(12) // fills the head: the WAL is rotated, the flush starts and fails
	time.Sleep(time.Second)
	if !strings.Contains(srv.logs(), "no space left on device") {
		t.Fatalf("the flush did not fail for space; log:\n%s", srv.logs())
	}
	got := enospcCount(t, client, srv.url)
	ready, err := client.Get(srv.url + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	ready.Body.Close()
	if got != fmt.Sprint(acked) {
		t.Errorf("after the failed flush the running server counts %s entries; %d were acknowledged (all still in the WAL)", got, acked)
	}
	if ready.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/ready says %d after the store failed (a flush failed; the next push will be refused)", ready.StatusCode)
	}
}

// F2: hay ingest that fills the disk in the middle of the WAL leaves a
// store that no command opens, even after space is freed: the WAL file
// that ends in the partial record is followed by the one Close started.
func TestENOSPCIngestTornWALNotLast(t *testing.T) {
	input, want := genInput(t, 12<<20)
	mnt := diskfullMount(t, 8<<20) // the default 32 MiB head: no flush before the disk is full
	dir := filepath.Join(mnt, "data")
	stderr, code := diskfullRun(t, "ingest", "--data", dir, input)
	if code == 0 {
		t.Fatal("12 MB ingested into 8 MiB")
	}
	diskfullCheckFailure(t, "hay ingest", stderr, "no space left on device", dir)
	if out, code := diskfullRun(t, "verify", "--data", dir); code != 0 {
		t.Errorf("after the failed ingest hay verify exits %d (the store is refused as damaged):\n%s", code, out)
	}
	diskfullRemount(t, mnt, "size=64m")
	if stderr, code := diskfullRun(t, "ingest", "--data", dir, input); code != 0 {
		t.Fatalf("space freed, the same hay ingest again: exit %d\n%s", code, stderr)
	}
	diskfullCheckStore(t, "after the re-run", dir, want, true)
}

// F3: a tenant directory removed under a running hay serve: pushes go on
// being answered 204 (into a WAL file that no longer has a name) and are
// lost; /ready says ready.
func TestENOSPCServeDataDirRemoved(t *testing.T) {
	data := t.TempDir()
	srv := startCrashServe(t, data, "--compact-interval", "0")
	client := &http.Client{Timeout: 20 * time.Second}
	if _, status, body := diskfullPush(t, client, srv.url, "before", 0, 10); status != http.StatusNoContent {
		t.Fatalf("first push: %d %s", status, body)
	}
	tenant := filepath.Join(data, "fake")
	if err := os.RemoveAll(tenant); err != nil {
		t.Fatal(err)
	}
	var acked []string
	for i := range 5 {
		lines, status, _ := diskfullPush(t, client, srv.url, "after", i, 10)
		if status == http.StatusNoContent {
			acked = append(acked, lines...)
		}
	}
	ready, err := client.Get(srv.url + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	ready.Body.Close()
	srv.cmd.Process.Signal(syscall.SIGTERM)
	srv.wait()
	if len(acked) == 0 {
		return // refused: the contract holds
	}
	stored := map[string]bool{}
	if _, err := os.Stat(tenant); err == nil {
		for _, l := range storedLines(t, tenant) {
			stored[l] = true
		}
	}
	lost := 0
	for _, l := range acked {
		if !stored[l] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d lines pushed after the tenant directory was removed were answered 204 and are not stored (/ready said %d); log:\n%s",
			lost, len(acked), ready.StatusCode, srv.logs())
	}
}

// F4: a background compaction that fails for space marks the segments it
// was rewriting as unreadable: the server says "retried later", but after
// the space is freed they are never compacted until a restart.
func TestENOSPCCompactionSkippedAfterENOSPC(t *testing.T) {
	// The disk must fill between the flush and the first compaction
	// tick; under load a tick may come first: try again then.
	for attempt := range 3 {
		if enospcSkipCase(t, attempt) {
			return
		}
	}
	t.Fatal("the compaction never ran out of space")
}

func enospcSkipCase(t *testing.T, attempt int) bool {
	mnt := diskfullMount(t, 16<<20)
	data := filepath.Join(mnt, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := startCrashServe(t, data, "--head-bytes", "256KiB", "--compact-interval", "2s")
	defer srv.kill()
	client := &http.Client{Timeout: 20 * time.Second}
	// 13 pushes fill the head once: one segment, flushed at once.
	for i := range 13 {
		if _, status, body := diskfullPush(t, client, srv.url, "f4", i, 100); status != http.StatusNoContent {
			t.Fatalf("push %d: %d %s", i, status, body)
		}
	}
	// Wait for the flush: the manifest lists the segment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, _ := os.ReadFile(filepath.Join(data, "fake", "MANIFEST"))
		if strings.Contains(string(m), ".seg") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the head was not flushed; log:\n%s", srv.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	release := diskfullLeave(t, mnt, 16<<10) // no room to rewrite the segment
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.logs(), "compaction failed") {
		if srv.compacted.Load() > 0 {
			release()
			t.Logf("attempt %d: compacted before the disk filled", attempt)
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction failed; log:\n%s", srv.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	release()
	// Two more ticks with space: the segment must be compacted by then
	// (polled, so a compaction at the first tick ends the wait).
	for deadline := time.Now().Add(4500 * time.Millisecond); srv.compacted.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if srv.compacted.Load() == 0 {
		t.Errorf("space freed, 2 compaction ticks later the segment is still not compacted; log:\n%s", srv.logs())
	}
	return true
}

// F5: hay verify --repair on a full disk fails (good) but leaves a
// truncated "copy" of the WAL file in lost+found.
func TestENOSPCRepairFullDiskLeavesPartialCopy(t *testing.T) {
	mnt := diskfullMount(t, 8<<20)
	dir := filepath.Join(mnt, "data")
	// Entries in the WAL only: an ingest of stdin, killed once they are
	// fsynced.
	var in strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&in, "2026-11-30T10:00:00.%06dZ level=info n=%d repair check %s\n", i, i, strings.Repeat("y", 100))
	}
	cmd := hayCommand("ingest", "--data", dir, "--fsync-interval", "10ms", "-")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte(in.String())); err != nil {
		t.Fatal(err)
	}
	waitStored(t, dir, 20000)
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	wals, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if len(wals) != 1 {
		t.Fatalf("want one WAL file, have %v", wals)
	}
	// Damage a record in the middle: what --repair is for.
	f, err := os.OpenFile(wals[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt([]byte{0xff, 0xfe}, fi.Size()/3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	release := diskfullLeave(t, mnt, 64<<10) // less than the WAL file's copy
	stderr, code := diskfullRun(t, "verify", "--repair", "--data", dir)
	if code == 0 {
		t.Fatalf("the repair copied a %d-byte file into 64 kB", fi.Size())
	}
	diskfullCheckFailure(t, "hay verify --repair on a full disk", stderr, "no space left on device", dir)
	var partial []string
	filepath.Walk(filepath.Join(dir, "lost+found"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			partial = append(partial, fmt.Sprintf("%s (%d bytes)", p, fi.Size()))
		}
		return nil
	})
	if len(partial) > 0 {
		t.Errorf("the failed repair left files in lost+found that are not copies of anything: %v\nstderr: %s", partial, stderr)
	}
	release()
	if stderr, code := diskfullRun(t, "verify", "--repair", "--data", dir); code != 0 {
		t.Fatalf("the repair with space: exit %d\n%s", code, stderr)
	}
}

// F6: a background compaction whose manifest write fails for space (the
// new segment fitted, the 1-page MANIFEST.tmp did not) fails the whole
// tenant for writes until a restart, although the old manifest stands:
// every later push is refused, also once space is freed, and the log
// said "retried later".
func TestENOSPCCompactionManifestFailsWriter(t *testing.T) {
	for extra := range 4 {
		if enospcManifestCase(t, extra) {
			return
		}
	}
	t.Fatal("no free-space budget made the compaction's manifest write fail")
}

// enospcManifestCase runs one attempt with the rounded-up segment size
// plus extra pages free; it reports whether the manifest write failed.
func enospcManifestCase(t *testing.T, extra int) bool {
	mnt := diskfullMount(t, 16<<20)
	data := filepath.Join(mnt, fmt.Sprintf("data%d", extra))
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Without detected_level: the pushes' sizes below were counted
	// without its metadata (with it, the head fills earlier).
	srv := startCrashServe(t, data, "--head-bytes", "256KiB", "--compact-interval", "1s", "--discover-log-levels=false")
	defer srv.kill()
	client := &http.Client{Timeout: 20 * time.Second}
	for i := range 13 { // the 13th push fills the head
		if _, status, body := diskfullPush(t, client, srv.url, "f6", i, 100); status != http.StatusNoContent {
			t.Fatalf("push %d: %d %s", i, status, body)
		}
	}
	var seg string
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, _ := os.ReadFile(filepath.Join(data, "fake", "MANIFEST"))
		segs, _ := filepath.Glob(filepath.Join(data, "fake", "segments", "*.seg"))
		if strings.Contains(string(m), ".seg") && len(segs) == 1 {
			seg = segs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the head was not flushed; log:\n%s", srv.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(os.Getpagesize())
	release := diskfullLeave(t, mnt, (fi.Size()+page-1)/page*page+int64(extra)*page)
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.logs(), "compact") {
		if time.Now().After(deadline) {
			t.Fatalf("no compaction ran; log:\n%s", srv.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	release()
	if !strings.Contains(srv.logs(), "write manifest") {
		return false // the segment did not fit, or everything did
	}
	time.Sleep(100 * time.Millisecond)
	_, status, body := diskfullPush(t, client, srv.url, "f6-after", 0, 10)
	if status != http.StatusNoContent {
		t.Errorf("space freed after a compaction's manifest write failed (the old manifest stands): a push gets %d %s\nlog:\n%s", status, body, srv.logs())
	}
	return true
}

// F7: the data directory replaced under a running hay ingest (say, a
// backup of another store restored over it): ingest exits 0, though half
// of its lines went to the moved-away directory, and its flush wrote its
// manifest over the other store's, which hay verify then finds damaged
// (a segment "holds 4112 entries, the manifest says 4857").
func TestENOSPCIngestDataDirReplaced(t *testing.T) {
	base := t.TempDir()
	dir, other := filepath.Join(base, "data"), filepath.Join(base, "other")
	input, _ := genInput(t, 3<<20)
	if stderr, code := diskfullRun(t, "ingest", "--data", other, "--head-bytes", "1000000", input); code != 0 {
		t.Fatalf("ingest of the other store: exit %d\n%s", code, stderr)
	}
	part := func(from int) []byte {
		var b strings.Builder
		for i := from; i < from+15000; i++ {
			fmt.Fprintf(&b, "2026-11-30T10:00:00.%06dZ n=%d replaced-dir %s\n", i, i, strings.Repeat("z", 100))
		}
		return []byte(b.String())
	}
	cmd := hayCommand("ingest", "--data", dir, "--head-bytes", "1000000", "--fsync-interval", "10ms", "-")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write(part(0)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _ := hayInProcess(t, "search", "--data", dir, "-c", "replaced-dir")
		if string(n) == "15000\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first part was not stored: %q", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	crashCopyDir(t, other, dir)
	stdin.Write(part(15000))
	stdin.Close()
	err = cmd.Wait()
	if out, code := diskfullRun(t, "verify", "--data", dir); code != 0 {
		t.Errorf("the store now at %s (a copy of another, undamaged store) is damaged by the ingest that ran in the directory it replaced:\n%s", dir, out)
	}
	if err == nil {
		t.Errorf("hay ingest exited 0 after its data directory was replaced; its first 15000 lines are not in %s\nstderr: %s", dir, stderr.String())
	}
}
