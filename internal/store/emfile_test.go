//go:build linux

package store

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// TestRotateWithoutDescriptors: a flush that finds no free file
// descriptor to start the next WAL file (EMFILE: idle connections, other
// tenants) leaves the store as it was; the append that filled the head
// is kept, the flush runs at a later append, and nothing is lost. It used
// to fail the store until it was reopened (and a serve tenant until a
// restart).
func TestRotateWithoutDescriptors(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	line := make([]byte, 1000)
	entries := func(n int) []LabeledEntry {
		var es []LabeledEntry
		for i := range n {
			es = append(es, LabeledEntry{Labels: `{app="a"}`, Time: int64(i), Line: line})
		}
		return es
	}
	if err := w.Append(ctx, entries(1)); err != nil {
		t.Fatal(err)
	}
	// Lower the soft limit to the lowest free descriptor number (the
	// limit bounds the numbers): the next open fails with EMFILE.
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	open := map[int]bool{}
	for _, f := range fds {
		if n, err := strconv.Atoi(f.Name()); err == nil {
			open[n] = true
		}
	}
	free := 0
	for open[free] {
		free++
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	// Take whatever is still free below it (ReadDir's own number).
	var fill []*os.File
	for range 16 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		fill = append(fill, f)
	}
	errFull := w.Append(ctx, entries(100)) // fills the head: the flush needs a new WAL file
	for _, f := range fill {
		f.Close()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	wals, _ := os.ReadDir(dir + "/wal")
	t.Logf("limit %d, append: %v, wal files %d", free, errFull, len(wals))
	if errFull != nil {
		t.Fatalf("append with no descriptor left: %v (the entries are in the WAL)", errFull)
	}
	if err := w.Append(ctx, entries(100)); err != nil {
		t.Fatalf("append once descriptors are free again: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	var n int64
	for _, p := range snap.Parts {
		for i := range p.NumBlocks() {
			n += int64(p.BlockMeta(i).Entries)
		}
	}
	if n != 201 {
		t.Errorf("%d entries stored, want 201", n)
	}
}
