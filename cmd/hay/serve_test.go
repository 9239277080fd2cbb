package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// startServe starts a real `hay serve` on a free port and returns it with
// its base URL (startCrashServe, whose log the test does not read).
func startServe(t *testing.T, dir string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	s := startCrashServe(t, dir, extra...)
	return s.cmd, s.url
}

// storedLines reads every entry of the store at dir (no lock needed).
func storedLines(t *testing.T, dir string) []string {
	t.Helper()
	return storedEntries(t, dir, func(_ *store.Snapshot, b *segment.Block, k int) string { return string(b.Line(k)) })
}

// storedEntries formats every entry of the store at dir with f, in store
// order (no lock needed).
func storedEntries(t *testing.T, dir string, f func(s *store.Snapshot, b *segment.Block, k int) string) []string {
	t.Helper()
	s, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []string
	var b segment.Block
	for _, p := range s.Parts {
		for i := range p.NumBlocks() {
			if err := p.ReadBlock(i, &b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Len() {
				out = append(out, f(s, &b, k))
			}
		}
	}
	return out
}

// TestServeKill runs concurrent pushers against a real `hay serve`, kills
// it with SIGKILL at a random moment, restarts it on the same directory,
// and repeats; at the end every acknowledged entry must be stored exactly
// once, no entry twice, and nothing that was never sent. HAY_KILL_CYCLES
// sets the number of cycles (default 2; docs/BENCHMARKS.md ran 20).
func TestServeKill(t *testing.T) {
	cycles := 2
	if v := os.Getenv("HAY_KILL_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HAY_KILL_CYCLES=%q", v)
		}
		cycles = n
	}
	dir := t.TempDir()
	var mu sync.Mutex
	acked := map[string]bool{}
	sent := map[string]bool{}
	client := &http.Client{Timeout: 10 * time.Second}
	for c := range cycles {
		cmd, url := startServe(t, dir, "--head-bytes", "256KiB")
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 4 {
			wg.Go(func() {
				for b := 0; ; b++ {
					select {
					case <-stop:
						return
					default:
					}
					var body bytes.Buffer
					var ids []string
					for i := range 50 {
						id := fmt.Sprintf("c%d-p%d-b%d-i%d", c, g, b, i)
						ids = append(ids, id)
						fmt.Fprintf(&body, "{\"labels\":{\"pusher\":\"%d\"},\"line\":%q}\n", g, id+" "+strings.Repeat("x", i*7))
					}
					mu.Lock()
					for _, id := range ids {
						sent[id] = true
					}
					mu.Unlock()
					resp, err := client.Post(url+"/api/v1/push/jsonl", "application/x-ndjson", &body)
					if err != nil {
						return // killed
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusNoContent {
						t.Errorf("push: %s", resp.Status)
						return
					}
					mu.Lock()
					for _, id := range ids {
						acked[id] = true
					}
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(150+rand.IntN(400)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		close(stop)
		wg.Wait()
	}
	// A clean restart and a SIGTERM: recovery, then a flush and exit 0.
	cmd, url := startServe(t, dir)
	if resp, err := http.Get(url + "/ready"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("ready after restart: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hay serve after SIGTERM: %v", err)
	}
	if wals, _ := filepath.Glob(filepath.Join(dir, "fake", "wal", "*.wal")); len(wals) != 0 {
		t.Errorf("WAL files left after a clean shutdown: %v", wals)
	}
	count := map[string]int{}
	for _, l := range storedLines(t, filepath.Join(dir, "fake")) {
		id, _, _ := strings.Cut(l, " ")
		count[id]++
		if count[id] == 2 {
			t.Errorf("entry %s stored twice", id)
		}
		if !sent[id] {
			t.Errorf("entry %q was never sent", l)
		}
	}
	lost := 0
	for id := range acked {
		if count[id] != 1 {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged entry %s stored %d times", id, count[id])
			}
		}
	}
	t.Logf("%d cycles: %d entries sent, %d acknowledged, %d stored, %d acknowledged ones missing", cycles, len(sent), len(acked), len(count), lost)
	if len(acked) == 0 {
		t.Error("no push was acknowledged")
	}
}

// TestServeSigterm sends SIGTERM while 4 clients push: the server stops
// accepting, finishes the pushes in flight, flushes and exits 0, and every
// acknowledged entry is stored exactly once, with no WAL left behind.
func TestServeSigterm(t *testing.T) {
	dir := t.TempDir()
	cmd, url := startServe(t, dir)
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for g := range 4 {
		wg.Go(func() {
			for b := 0; ; b++ {
				var body bytes.Buffer
				var ids []string
				for i := range 100 {
					id := fmt.Sprintf("p%d-b%d-i%d", g, b, i)
					ids = append(ids, id)
					fmt.Fprintf(&body, "{\"labels\":{\"pusher\":\"%d\"},\"line\":%q}\n", g, id)
				}
				resp, err := client.Post(url+"/api/v1/push/jsonl", "application/x-ndjson", &body)
				if err != nil {
					return // the server has stopped accepting
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					return // 503 while shutting down
				}
				mu.Lock()
				for _, id := range ids {
					acked[id] = true
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	wg.Wait()
	if err != nil {
		t.Fatalf("hay serve after SIGTERM under load: %v", err)
	}
	if wals, _ := filepath.Glob(filepath.Join(dir, "fake", "wal", "*.wal")); len(wals) != 0 {
		t.Errorf("WAL files left after SIGTERM: %v", wals)
	}
	count := map[string]int{}
	for _, l := range storedLines(t, filepath.Join(dir, "fake")) {
		count[l]++
	}
	for id := range acked {
		if count[id] != 1 {
			t.Errorf("acknowledged %s stored %d times", id, count[id])
		}
	}
	if len(acked) == 0 {
		t.Error("nothing was acknowledged")
	}
}

func TestServeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--bogus"},
		{"serve", "--line-policy", "drop"},
		{"serve", "--max-body", "lots"},
		{"serve", "extra"},
	} {
		if code := runMain(args); code != 2 {
			t.Errorf("hay %q: exit %d, want 2", args, code)
		}
	}
}
