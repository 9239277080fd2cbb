package store

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"haystack/internal/testexec"
	"haystack/internal/testseed"
)

// killWriterEnv, when set, makes TestStreamsFileKill the child: a Writer
// on the directory it names, appending batches of new streams (and a
// line of an old one) with a tiny head, so that flushes, each appending
// to STREAMS, run all the time; after each acknowledged batch it prints
// "ack N" (N streams acknowledged so far), until it is killed.
const killWriterEnv = "HAY_STORE_KILL_WRITER"

func killWriterChild(dir string) {
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 2 << 10}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	start := len(w.s.streamDef) // ids go on from what earlier runs stored
	out := bufio.NewWriter(os.Stdout)
	for n := start; ; {
		var es []LabeledEntry
		for range 20 {
			es = append(es, LabeledEntry{Labels: killLabels(n), Time: int64(n), Line: []byte("line " + strconv.Itoa(n))})
			n++
		}
		es = append(es, LabeledEntry{Labels: killLabels(0), Time: int64(n), Line: []byte("old")})
		if err := w.Append(context.Background(), es); err != nil {
			fmt.Fprintln(out, "error", err)
			out.Flush()
			os.Exit(1)
		}
		fmt.Fprintln(out, "ack", n)
		out.Flush()
	}
}

func killLabels(i int) string {
	return fmt.Sprintf(`{pod="p%d", pad="%s"}`, i, strings.Repeat("x", i%37))
}

// TestStreamsFileKill kills (SIGKILL) a writer adding new streams with
// frequent flushes at random moments, several times over the same
// directory, and checks after each kill that a snapshot and a reopened
// writer hold every acknowledged stream, with its labels at its id, and
// that STREAMS ends where the manifest says once a writer opened it.
func TestStreamsFileKill(t *testing.T) {
	if dir := os.Getenv(killWriterEnv); dir != "" {
		killWriterChild(dir)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := testseed.Seed(t, "HAY_STORE_KILL_SEED")
	t.Logf("seed %d (HAY_STORE_KILL_SEED=%d repeats the kill times, not the scheduling)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	acked, tails := 0, 0
	defer func() {
		t.Logf("%d streams acknowledged; %d kills left bytes past the manifest in STREAMS", acked, tails)
	}()
	for round := range 12 {
		cmd := testexec.Command(exe, "-test.run=^TestStreamsFileKill$")
		cmd.Env = append(os.Environ(), killWriterEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of acknowledged batches, then a
		// random delay into the next ones.
		sc := bufio.NewScanner(stdout)
		want := 3 + r.IntN(30)
		for seen := 0; seen < want && sc.Scan(); seen++ {
			f := strings.Fields(sc.Text())
			if len(f) != 2 || f[0] != "ack" {
				t.Fatalf("round %d: child said %q", round, sc.Text())
			}
			n, _ := strconv.Atoi(f[1])
			acked = max(acked, n)
		}
		time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		for sc.Scan() { // acknowledged before it died
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "ack" {
				n, _ := strconv.Atoi(f[1])
				acked = max(acked, n)
			}
		}
		cmd.Wait()

		check := func(what string, n int, label func(uint32) string) {
			t.Helper()
			if n < acked {
				t.Fatalf("round %d %s: %d streams, %d acknowledged", round, what, n, acked)
			}
			for id := range n {
				if got := label(uint32(id)); got != killLabels(id) {
					t.Fatalf("round %d %s: stream %d is %s, want %s", round, what, id, got, killLabels(id))
				}
			}
		}
		if m, err := readManifestOnly(dir); err == nil && fileSizeOr0(dir+"/"+streamsName) > m.StreamsBytes {
			tails++ // killed between a STREAMS append and its manifest
		}
		snap, err := OpenSnapshot(dir)
		if err != nil {
			t.Fatalf("round %d: snapshot: %v", round, err)
		}
		check("snapshot", snap.NumStreams(), snap.Labels)
		snap.Close()
		st, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		check("reopened", len(st.streamDef), func(id uint32) string { return st.streamDef[id].Labels })
		if got := fileSizeOr0(dir + "/" + streamsName); got != st.man.StreamsBytes {
			t.Fatalf("round %d: STREAMS is %d bytes after Open, the manifest covers %d", round, got, st.man.StreamsBytes)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if ps, err := Verify(dir); err != nil || len(ps) > 0 {
			t.Fatalf("round %d: verify: %v %v", round, ps, err)
		}
	}
	if acked < 100 {
		t.Fatalf("only %d streams acknowledged over all rounds", acked)
	}
}
