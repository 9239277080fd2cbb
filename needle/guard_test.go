//go:build unix

package needle

import (
	"testing"

	"golang.org/x/sys/unix"
)

// guarded returns memory with a PROT_NONE page on each side of a usable
// region of two pages: reading one byte before or after the region faults.
// This is the technique of Go's bytes/boundary_test.go.
func guarded(t *testing.T) []byte {
	t.Helper()
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	if err := unix.Mprotect(mem[:page], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(mem[3*page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return mem[page : 3*page : 3*page]
}

// TestGuardPages runs every kernel on haystacks that end exactly at a
// PROT_NONE page and that start right after one, for every length 0..300,
// with the needle at the start, at the end, and absent. A load outside the
// slice crashes the test binary.
func TestGuardPages(t *testing.T) {
	region := guarded(t)
	needles := []string{"Z", "Zy", "Zyx", "aQa", "Z0123456", "Z01234567", "Z" + string(make([]byte, 40)) + "y",
		"Zabcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}
	for _, ns := range needles {
		n := []byte(ns)
		for _, fold := range []bool{false, true} {
			ss := searchers(t, n, fold)
			for size := 0; size <= 300; size++ {
				for _, atEnd := range []bool{true, false} {
					var h []byte
					if atEnd {
						h = region[len(region)-size:]
					} else {
						h = region[:size:size]
					}
					for _, place := range []string{"absent", "start", "end"} {
						for i := range h {
							h[i] = '.'
						}
						want := -1
						if len(n) <= size {
							switch place {
							case "start":
								copy(h, n)
								want = 0
							case "end":
								copy(h[size-len(n):], n)
								want = size - len(n)
							}
						}
						for _, s := range ss {
							if got := s.Index(h); got != want {
								t.Fatalf("%s fold=%v %q size %d atEnd=%v %s: got %d, want %d",
									s.kern, fold, n, size, atEnd, place, got, want)
							}
							if got, want := s.Count(h), max(0, min(1, want+1)); got != want {
								t.Fatalf("%s Count: got %d, want %d", s.kern, got, want)
							}
						}
					}
				}
			}
		}
	}
}
