package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// crashNeedle is in every pushed line, so `hay search -c` counts them all.
const crashNeedle = "zq7crashneedle"

// crashServer is a running `hay serve` whose stderr is kept for the
// report and watched for background compactions.
type crashServer struct {
	cmd       *exec.Cmd
	url       string
	compacted atomic.Int64 // "msg=compacted" log lines so far
	mu        sync.Mutex
	log       bytes.Buffer
	logDone   chan struct{}
}

// startCrashServe starts `hay serve` on dir with args; it fails the test,
// showing the server's output, if the server does not reach "listening".
func startCrashServe(t *testing.T, dir string, args ...string) *crashServer {
	t.Helper()
	cmd := hayCommand(append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	s := &crashServer{cmd: cmd, logDone: make(chan struct{})}
	urlc := make(chan string, 1)
	go func() {
		defer close(s.logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if strings.Contains(line, "msg=compacted") {
				s.compacted.Add(1)
			}
			if _, rest, ok := strings.Cut(line, "listening on "); ok {
				u, _, _ := strings.Cut(rest, " ")
				urlc <- u
			}
		}
	}()
	select {
	case s.url = <-urlc:
		return s
	case <-s.logDone:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-s.logDone
	}
	cmd.Wait()
	t.Fatalf("hay serve did not start on %s: %v\nserver log:\n%s", dir, cmd.ProcessState, s.logs())
	return nil
}

// logs is what the server wrote to stderr so far.
func (s *crashServer) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// kill sends SIGKILL and waits for the process and its log.
func (s *crashServer) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.wait()
}

// wait waits for the process to exit and returns cmd.Wait's error,
// after reading its log to the end: cmd.Wait closes the stderr pipe once
// the process has exited, so calling it first can drop the last lines
// ("hay serve: stopped") before the reader gets them.
func (s *crashServer) wait() error {
	<-s.logDone
	return s.cmd.Wait()
}

// crashBatch is one push: its entries are all stored or none are.
type crashBatch struct {
	n     int  // entries
	acked bool // the server answered 204
}

// crashEntry is what the test sent as one line.
type crashEntry struct {
	batch  int
	stream int // index into the test's streams
	seq    int // position in its stream, from 0, over all rounds
	ts     int64
}

// crashState is everything sent so far, shared by the pushers.
type crashState struct {
	mu      sync.Mutex
	batches []crashBatch
	sent    map[string]crashEntry // line -> entry
	nextSeq []int                 // per stream
	labels  []string              // per stream, canonical
	// Entries of pusher 0 sent and acknowledged, for the querier.
	sent0, acked0 int
}

// TestServeCrashCompact pushes to a real `hay serve` with a tiny head and
// background compaction every few milliseconds, kills it with SIGKILL at a
// random moment (at random, a few milliseconds after a compaction swap,
// while a segment is being written, or as a swap deletes the old files),
// while a querier counts one pusher's entries, and after each kill checks the data directory
// against everything sent: every acknowledged entry stored exactly once,
// each push all or nothing, each stream in push order, nothing never sent,
// nothing stored before lost later; `hay verify` finds no damage; and a
// recovery (store.Open on a copy) leaves exactly the files the manifest
// lists and reads back the same entries. Then it restarts the server on
// the same directory. At the end an idle start is killed at once, and the
// next start must stop cleanly on SIGTERM leaving no WAL file, and
// `hay search -c` must count every stored entry. HAY_CRASH_SEED replays a
// run's choices (the kill moments still depend on timing);
// HAY_CRASH_ROUNDS sets the number of kills (default 12).
func TestServeCrashCompact(t *testing.T) {
	seed := envSeed(t, "HAY_CRASH_SEED")
	rounds := 12
	if v := os.Getenv("HAY_CRASH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HAY_CRASH_ROUNDS=%q", v)
		}
		rounds = n
	}
	t.Logf("seed %d (HAY_CRASH_SEED=%d replays the choices)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	const pushers = 3
	st := &crashState{sent: map[string]crashEntry{}}
	for g := range pushers {
		for _, part := range []string{"a", "b"} {
			labs, err := ingest.ParseLabels(fmt.Sprintf(`{pusher="%d", part=%q}`, g, part))
			if err != nil {
				t.Fatal(err)
			}
			// As stored: hay serve adds service_name, and none of Loki's
			// discover_service_name labels is here to give it a value.
			labs = labs.With("service_name", "unknown_service")
			st.labels = append(st.labels, labs.String())
			st.nextSeq = append(st.nextSeq, 0)
		}
	}

	root := t.TempDir()
	tdir := filepath.Join(root, "fake") // the default tenant's store
	// A 48 KiB head flushes a segment every couple of pushes, and the
	// background compaction merges the new segments every 5 ms, so most
	// moments have a flush or a compaction (or both) in flight.
	serveArgs := []string{"--head-bytes", "48KiB", "--compact-interval", "5ms"}
	present := map[string]bool{} // lines stored after an earlier kill
	var compactions int64
	swapsSeen := 0
	modes := []string{"random moment", "moment after a compaction", "moment a segment is written", "moment a compaction deletes"}
	for round := range rounds {
		srv := startCrashServe(t, root, serveArgs...)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		var wg sync.WaitGroup
		for g := range pushers {
			prng := rand.New(rand.NewPCG(seed, uint64(round*pushers+g+1)))
			wg.Go(func() { crashPush(t, client, srv.url, st, g, prng) })
		}
		var queries int
		wg.Go(func() { queries = crashQuery(t, client, srv.url, st) })
		mode := rng.IntN(len(modes))
		how, swaps := crashKillMoment(tdir, mode, rng)
		if swaps > 0 {
			swapsSeen += swaps
		}
		srv.kill()
		wg.Wait()
		client.CloseIdleConnections()
		compactions += srv.compacted.Load()
		t.Logf("round %d: killed at a %s (%s); %d compactions logged, %d queries", round, modes[mode], how, srv.compacted.Load(), queries)
		crashCheckLogs(t, fmt.Sprintf("round %d", round), srv.logs())
		if os.Getenv("HAY_CRASH_LOGS") != "" {
			t.Logf("round %d server log:\n%s", round, srv.logs())
		}
		crashCheckStore(t, fmt.Sprintf("after kill %d", round), tdir, st, present)
		crashCheckRecovery(t, round, tdir)
		if t.Failed() {
			t.Fatalf("round %d failed; seed %d; server log:\n%s", round, seed, srv.logs())
		}
	}
	if swapsSeen == 0 && compactions == 0 {
		t.Errorf("no background compaction was seen in %d rounds: the test did not exercise compaction", rounds)
	}

	// A start recovers from the last kill and compacts what it finds;
	// SIGTERM then stops it cleanly, flushing everything. Then an idle
	// start is killed at once: its recovery started a WAL file that holds
	// no record (as a kill right after a flush's WAL rotation leaves one).
	// The last start must stop cleanly without leaving that file behind.
	crashStopClean(t, "after the kills", startCrashServe(t, root, serveArgs...), tdir)
	srv := startCrashServe(t, root, serveArgs...)
	srv.kill()
	crashCheckLogs(t, "idle start", srv.logs())
	crashCheckStore(t, "after an idle kill", tdir, st, present)
	crashStopClean(t, "after an idle kill", startCrashServe(t, root, serveArgs...), tdir)
	stored := crashCheckStore(t, "after SIGTERM", tdir, st, present)
	if ps, err := store.Verify(tdir); err != nil || len(ps) != 0 {
		t.Errorf("verify after a clean shutdown: %v %v", err, ps)
	}
	crashCheckFiles(t, "after a clean shutdown", tdir)

	// What search counts is what the store holds: every acknowledged entry
	// and the unacknowledged pushes that made it, whole.
	var acked, unackedStored, unackedLost, ackedEntries int
	for _, b := range st.batches {
		if b.acked {
			acked++
			ackedEntries += b.n
		}
	}
	byBatch := map[int]int{}
	for line := range present {
		byBatch[st.sent[line].batch]++
	}
	want := 0
	for i, b := range st.batches {
		want += byBatch[i]
		if !b.acked {
			if byBatch[i] == b.n {
				unackedStored++
			} else {
				unackedLost++
			}
		}
	}
	if stored != want || want < ackedEntries {
		t.Errorf("store holds %d entries, the batches account for %d (%d acknowledged)", stored, want, ackedEntries)
	}
	out, code := hayInProcess(t, "search", "--data", tdir, "-c", crashNeedle)
	if code != 0 || string(out) != fmt.Sprintf("%d\n", want) {
		t.Errorf("hay search -c %s: %q (exit %d), want %d", crashNeedle, out, code, want)
	}
	if acked == 0 {
		t.Error("no push was acknowledged")
	}
	t.Logf("%d rounds: %d pushes (%d acknowledged, %d unacknowledged stored whole, %d unacknowledged absent), %d entries stored, %d compactions logged, %d compaction swaps seen",
		rounds, len(st.batches), acked, unackedStored, unackedLost, stored, compactions, swapsSeen)
}

// crashPush pushes batches of two streams (pusher g's a and b) in one Loki
// JSON push each, one at a time, until a push fails (the server was
// killed). A batch counts as acknowledged only on 204.
func crashPush(t *testing.T, client *http.Client, base string, st *crashState, g int, r *rand.Rand) {
	for {
		type value [2]string
		type stream struct {
			Stream map[string]string `json:"stream"`
			Values []value           `json:"values"`
		}
		var req struct {
			Streams []stream `json:"streams"`
		}
		st.mu.Lock()
		id := len(st.batches)
		n := 0
		t0 := time.Now().UnixNano()
		for k, part := range []string{"a", "b"} {
			si := g*2 + k
			s := stream{Stream: map[string]string{"pusher": strconv.Itoa(g), "part": part}}
			for range 1 + r.IntN(80) {
				seq := st.nextSeq[si]
				st.nextSeq[si]++
				ts := t0 + int64(n)
				line := fmt.Sprintf("%s p%d%s seq=%d batch=%d %s", crashNeedle, g, part, seq, id, strings.Repeat("x", r.IntN(400)))
				st.sent[line] = crashEntry{batch: id, stream: si, seq: seq, ts: ts}
				s.Values = append(s.Values, value{strconv.FormatInt(ts, 10), line})
				n++
			}
			req.Streams = append(req.Streams, s)
		}
		st.batches = append(st.batches, crashBatch{n: n})
		if g == 0 {
			st.sent0 += n
		}
		st.mu.Unlock()
		body, err := json.Marshal(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp, err := client.Post(base+"/loki/api/v1/push", "application/json", bytes.NewReader(body))
		if err != nil {
			return // killed
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("push %d: %s %s", id, resp.Status, msg)
			return
		}
		st.mu.Lock()
		st.batches[id].acked = true
		if g == 0 {
			st.acked0 += n
		}
		st.mu.Unlock()
	}
}

// crashQuery counts pusher 0's entries with an instant metric query until
// a request fails (the server was killed). Each count must include every
// entry acknowledged before the query and nothing never sent, whatever
// flush or compaction swap runs meanwhile. It returns the queries made.
func crashQuery(t *testing.T, client *http.Client, base string, st *crashState) int {
	n := 0
	for {
		st.mu.Lock()
		lo := st.acked0
		st.mu.Unlock()
		q := url.Values{
			"query": {`sum(count_over_time({pusher="0"}[1h]))`},
			"time":  {strconv.FormatInt(time.Now().Add(time.Second).UnixNano(), 10)},
		}
		resp, err := client.Get(base + "/loki/api/v1/query?" + q.Encode())
		if err != nil {
			return n
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return n // killed mid-answer
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("query: %s %s", resp.Status, body)
			return n
		}
		var r struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Errorf("query: %v: %s", err, body)
			return n
		}
		got := 0
		if len(r.Data.Result) == 1 {
			v, _ := r.Data.Result[0].Value[1].(string)
			got, err = strconv.Atoi(v)
			if err != nil {
				t.Errorf("query: count %q: %s", v, body)
				return n
			}
		} else if len(r.Data.Result) > 1 {
			t.Errorf("query: %d series, want one: %s", len(r.Data.Result), body)
			return n
		}
		st.mu.Lock()
		hi := st.sent0
		st.mu.Unlock()
		if got < lo || got > hi {
			t.Errorf("query counted %d entries of pusher 0: %d were acknowledged before it, %d sent", got, lo, hi)
			return n
		}
		n++
	}
}

// crashKillMoment waits for the moment to kill and returns how it came
// and how many compaction swaps it saw. It watches the segments
// directory: a flush or a compaction writes a temp file and renames it,
// and only a compaction deletes segment files, right after the manifest
// swap that replaced them. (The server logs a compaction only when a
// Compact call ends, and under steady pushes with a tiny head each call
// keeps finding new segments, so the log is no clock.) Mode 0 kills at a
// random moment, mode 1 a few milliseconds after the k-th swap (the next
// compaction starts at once or 5 ms later), mode 2 while the n-th temp
// segment is being written, mode 3 as soon as the k-th swap's deletions
// show.
func crashKillMoment(tdir string, mode int, rng *rand.Rand) (how string, swaps int) {
	start := time.Now()
	in := func() time.Duration { return time.Since(start).Round(time.Millisecond) }
	if mode == 0 {
		d := time.Duration(100+rng.IntN(800)) * time.Millisecond
		time.Sleep(d)
		return fmt.Sprintf("%v in", d), -1
	}
	k := 1 + rng.IntN(3)
	skip := rng.IntN(40)
	delay := time.Duration(rng.IntN(8000)) * time.Microsecond
	// A warm-up first, so that later kills find a larger store.
	time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
	deadline := time.Now().Add(2 * time.Second)
	prev := map[string]bool{}
	seenTmp := map[string]bool{}
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir(filepath.Join(tdir, "segments"))
		cur := map[string]bool{}
		for _, e := range ents {
			n := e.Name()
			if strings.HasSuffix(n, ".tmp") {
				if mode == 2 && !seenTmp[n] {
					seenTmp[n] = true
					if len(seenTmp) > skip {
						return fmt.Sprintf("%s being written, %v in", n, in()), swaps
					}
				}
				continue
			}
			cur[n] = true
		}
		for n := range prev {
			if !cur[n] {
				swaps++
				break
			}
		}
		prev = cur
		if swaps >= k {
			switch mode {
			case 1:
				time.Sleep(delay)
				return fmt.Sprintf("%v after compaction swap %d, %v in", delay, k, in()), swaps
			case 3:
				return fmt.Sprintf("while compaction swap %d deletes, %v in", k, in()), swaps
			}
		}
		time.Sleep(300 * time.Microsecond)
	}
	return fmt.Sprintf("timed out after %v (k=%d, skip=%d)", in(), k, skip), swaps
}

// crashStopClean stops srv with SIGTERM: it must exit 0, log no error and
// leave no WAL file (everything is in segments).
func crashStopClean(t *testing.T, when string, srv *crashServer, tdir string) {
	t.Helper()
	if resp, err := http.Get(srv.url + "/ready"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: not ready after a restart: %v %v", when, err, resp)
	}
	time.Sleep(50 * time.Millisecond) // let a compaction start
	srv.cmd.Process.Signal(syscall.SIGTERM)
	err := srv.wait()
	crashCheckLogs(t, when, srv.logs())
	if err != nil {
		t.Fatalf("%s: hay serve after SIGTERM: %v\nserver log:\n%s", when, err, srv.logs())
	}
	if wals, _ := filepath.Glob(filepath.Join(tdir, "wal", "*.wal")); len(wals) != 0 {
		var sizes []int64
		for _, w := range wals {
			if fi, err := os.Stat(w); err == nil {
				sizes = append(sizes, fi.Size())
			}
		}
		t.Errorf("%s: WAL files left after a clean shutdown: %v (sizes %v)", when, wals, sizes)
	}
}

// crashCheckLogs fails on a panic, a race report or an error the server
// logged.
func crashCheckLogs(t *testing.T, when string, logs string) {
	t.Helper()
	for _, bad := range []string{"panic", "fatal error", "DATA RACE", "level=ERROR"} {
		if strings.Contains(logs, bad) {
			t.Errorf("%s: server log has %q:\n%s", when, bad, logs)
		}
	}
}

// crashCheckStore reads every entry the store at tdir holds (segments and
// WAL, as any reader would) and checks it against st: each entry was
// sent, is stored once, in its own stream with its own time, in push
// order within its stream; each push is stored whole or not at all, and
// whole if acknowledged; what present holds (stored at an earlier check)
// is still there. It adds what it found to present and returns the number
// of entries stored.
func crashCheckStore(t *testing.T, when string, tdir string, st *crashState, present map[string]bool) int {
	t.Helper()
	if out, code := hayInProcess(t, "verify", "--data", tdir); code != 0 {
		t.Errorf("%s: hay verify exit %d: %s", when, code, out)
		if ps, err := store.Verify(tdir); err == nil {
			for _, p := range ps {
				t.Logf("%s: verify: %s", when, p)
			}
		}
	}
	snap, err := store.OpenSnapshot(tdir)
	if err != nil {
		t.Fatalf("%s: open snapshot: %v", when, err)
	}
	defer snap.Close()
	for _, d := range snap.Damaged {
		t.Errorf("%s: damaged: %v", when, d)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	seen := map[string]bool{}
	perBatch := map[int]int{}
	last := make([]int, len(st.labels))
	for i := range last {
		last[i] = -1
	}
	errs := 0
	fail := func(format string, args ...any) {
		errs++
		if errs <= 10 {
			t.Errorf("%s: "+format, append([]any{when}, args...)...)
		}
	}
	var b segment.Block
	for _, p := range snap.Parts {
		for i := range p.NumBlocks() {
			if err := p.ReadBlock(i, &b); err != nil {
				t.Fatalf("%s: %s block %d: %v", when, p.Name(), i, err)
			}
			for k := range b.Len() {
				line := string(b.Line(k))
				e, ok := st.sent[line]
				if !ok {
					fail("%s holds an entry never sent: %.80q", p.Name(), line)
					continue
				}
				if seen[line] {
					fail("%s holds an entry a second time: %.80q", p.Name(), line)
					continue
				}
				seen[line] = true
				perBatch[e.batch]++
				if got := snap.Labels(b.Streams[k]); got != st.labels[e.stream] {
					fail("entry %.60q in stream %s, sent to %s", line, got, st.labels[e.stream])
				}
				if b.Times[k] != e.ts {
					fail("entry %.60q has time %d, sent with %d", line, b.Times[k], e.ts)
				}
				if e.seq <= last[e.stream] {
					fail("stream %s: seq %d stored after seq %d (%s)", st.labels[e.stream], e.seq, last[e.stream], p.Name())
				}
				last[e.stream] = e.seq
			}
		}
	}
	for id, bt := range st.batches {
		got := perBatch[id]
		switch {
		case bt.acked && got != bt.n:
			fail("acknowledged push %d: %d of its %d entries stored", id, got, bt.n)
		case got != 0 && got != bt.n:
			fail("unacknowledged push %d stored in part: %d of %d entries", id, got, bt.n)
		}
	}
	for line := range present {
		if !seen[line] {
			fail("entry stored before is gone: %.80q", line)
		}
	}
	for line := range seen {
		present[line] = true
	}
	if errs > 10 {
		t.Errorf("%s: %d problems in all", when, errs)
	}
	return len(seen)
}

// crashCheckRecovery recovers a copy of the store as the next start will
// (store.Open), then checks that exactly the files the manifest lists are
// left and that verify finds nothing at all, and, after Close, that the
// copy holds the entries the crashed directory shows, in the same order.
func crashCheckRecovery(t *testing.T, round int, tdir string) {
	t.Helper()
	before := crashEntries(t, tdir)
	cp := filepath.Join(t.TempDir(), "copy")
	crashCopyDir(t, tdir, cp)
	s, err := store.Open(cp, store.Options{})
	if err != nil {
		t.Fatalf("round %d: open after the kill: %v", round, err)
	}
	when := fmt.Sprintf("round %d after recovery", round)
	crashCheckFiles(t, when, cp)
	if ps, err := store.Verify(cp); err != nil || len(ps) != 0 {
		t.Errorf("%s: verify: %v %v", when, err, ps)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("%s: close: %v", when, err)
	}
	if after := crashEntries(t, cp); !slices.Equal(before, after) {
		t.Errorf("%s: %d entries, the crashed directory reads %d (or in another order)", when, len(after), len(before))
	}
}

// crashCheckFiles checks that a store directory holds the manifest's
// segments and nothing else besides LOCK, MANIFEST, STREAMS and WAL files from
// WALStart on. A stale MANIFEST.tmp from a crash is not allowed either:
// Open deletes it.
func crashCheckFiles(t *testing.T, when, dir string) {
	t.Helper()
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	m := snap.Manifest
	snap.Close()
	var want []string
	for _, sm := range m.Segments {
		want = append(want, sm.Name)
	}
	var got []string
	ents, err := os.ReadDir(filepath.Join(dir, "segments"))
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: segments/ holds %v, the manifest lists %v", when, got, want)
	}
	ents, err = os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	for _, e := range ents {
		switch e.Name() {
		case "LOCK", "MANIFEST", "STREAMS", "wal", "segments":
		default:
			t.Errorf("%s: unexpected file %s", when, e.Name())
		}
	}
	ents, err = os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	for _, e := range ents {
		seq, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".wal"), 16, 64)
		if err != nil || !strings.HasSuffix(e.Name(), ".wal") || seq < m.WALStart {
			t.Errorf("%s: wal/%s left (WAL starts at %016x)", when, e.Name(), m.WALStart)
		}
	}
}

// crashEntries lists the store's entries as "labels time line", in order.
func crashEntries(t *testing.T, dir string) []string {
	t.Helper()
	return storedEntries(t, dir, func(s *store.Snapshot, b *segment.Block, k int) string {
		return fmt.Sprintf("%s %d %s", s.Labels(b.Streams[k]), b.Times[k], b.Line(k))
	})
}

// crashCopyDir copies the directory tree src to dst (regular files only).
func crashCopyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
