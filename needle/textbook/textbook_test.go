package textbook

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// methods lists every search in the package, the prepared forms built
// fresh for each call, so the one-shot and prepared paths are both tested.
var methods = []struct {
	name  string
	index func(h, n []byte) int
}{
	{"naive", Naive},
	{"horspool", IndexHorspool},
	{"kmp", IndexKMP},
	{"swar", SWAR},
	{"swar2", SWAR2},
}

// alphabet holds the bytes that break SWAR tricks (0x00 and 0x01 next to
// each other, the sign bit, 0xFF) plus a letter in both cases.
var alphabet = []byte{0x00, 0x01, 0x7F, 0x80, 0xFF, 'a', 'A'}

func randBytes(r *rand.Rand, n int, alpha []byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = alpha[r.IntN(len(alpha))]
	}
	return b
}

// check compares every method (and the prepared forms, reused) with
// bytes.Index on one case.
func check(t *testing.T, h, n []byte) {
	t.Helper()
	want := bytes.Index(h, n)
	for _, m := range methods {
		if got := m.index(h, n); got != want {
			t.Fatalf("%s(%q, %q) = %d, want %d", m.name, h, n, got, want)
		}
	}
}

func TestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := 0
	for m := 0; m <= 64; m++ {
		// Every needle length, many haystacks each: together well over
		// 20,000 cases.
		for k := 0; k < 400; k++ {
			alpha := alphabet
			if k%2 == 1 {
				alpha = alphabet[:2+k%5] // smaller alphabets match more often
			}
			n := randBytes(r, m, alpha)
			h := randBytes(r, r.IntN(2*m+40), alpha)
			if k%3 == 0 && len(h) >= m {
				// Plant the needle so long needles match too.
				copy(h[r.IntN(len(h)-m+1):], n)
			}
			check(t, h, n)
			cases++
		}
	}
	if cases < 20000 {
		t.Fatalf("only %d cases", cases)
	}
}

// TestPreparedReuse uses one prepared Horspool and KMP on many haystacks:
// the tables must not depend on the previous search.
func TestPreparedReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for m := 0; m <= 64; m++ {
		n := randBytes(r, m, alphabet[:3])
		hp, kp := NewHorspool(n), NewKMP(n)
		for k := 0; k < 50; k++ {
			h := randBytes(r, r.IntN(3*m+30), alphabet[:3])
			want := bytes.Index(h, n)
			if got := hp.Index(h); got != want {
				t.Fatalf("Horspool(%q).Index(%q) = %d, want %d", n, h, got, want)
			}
			if got := kp.Index(h); got != want {
				t.Fatalf("KMP(%q).Index(%q) = %d, want %d", n, h, got, want)
			}
		}
	}
}

// TestEveryPosition plants the needle at every position of haystacks of
// every length up to 80 (so in every lane of every word, in the byte-at-a-
// time tail and ending at the last byte), in a background that matches
// the needle's first and last bytes everywhere (near misses).
func TestEveryPosition(t *testing.T) {
	for _, n := range [][]byte{
		[]byte("x"), []byte("ab"), []byte("a\x00b"), []byte("\x01\x00"),
		[]byte("aQa"), []byte("status=50"), []byte(" timeout"),
		[]byte("0123456789abcdefX"), bytes.Repeat([]byte("ab"), 20),
	} {
		m := len(n)
		for size := m; size <= 80; size++ {
			for p := 0; p+m <= size; p++ {
				for _, bg := range []byte{n[0], n[m-1], 0x00, 0x01} {
					h := bytes.Repeat([]byte{bg}, size)
					copy(h[p:], n)
					check(t, h, n)
				}
			}
		}
	}
}

// TestNearMiss: first and last bytes match at every position but an inner
// byte never does, so every candidate must be rejected.
func TestNearMiss(t *testing.T) {
	for m := 3; m <= 20; m++ {
		n := bytes.Repeat([]byte{'a'}, m)
		n[m/2] = 'Q'
		for size := 0; size <= 70; size++ {
			check(t, bytes.Repeat([]byte{'a'}, size), n)
		}
	}
}

// TestZeroOneBorrow: the classic zero-byte test flags a 0x01 lane above a
// zero lane; such false candidates must be rejected, and the true match
// after them found.
func TestZeroOneBorrow(t *testing.T) {
	for _, tc := range []struct{ h, n string }{
		{"\x41\x40zzzzzz\x41\x41", "\x41\x41"}, // XOR with 'A' gives 00 01
		{"zA@zzzzzzzzzzzzA", "AB"},
		{"\x00\x01\x00\x01\x00\x01\x00\x01\x01\x01", "\x01\x01"},
	} {
		check(t, []byte(tc.h), []byte(tc.n))
	}
}

// TestCapacityTrap: bytes past len that would complete a match must not
// count.
func TestCapacityTrap(t *testing.T) {
	full := []byte("xxxxxxxxxxxxxxxxneedle")
	for cut := 0; cut < len(full); cut++ {
		h := full[:cut] // capacity still holds the rest
		check(t, h, []byte("needle"))
	}
}

func TestEdges(t *testing.T) {
	for _, tc := range []struct{ h, n string }{
		{"", ""}, {"a", ""}, {"", "a"}, {"a", "a"}, {"a", "b"}, {"ab", "abc"},
		{"abc", "abc"}, {"xabc", "abc"}, {"abcabd", "abd"},
		{"aaaaaaaaaaaaaaaaaab", "aab"}, {"ababababababac", "ababac"},
	} {
		check(t, []byte(tc.h), []byte(tc.n))
	}
}

func FuzzIndex(f *testing.F) {
	f.Add([]byte("hello world"), []byte("world"))
	f.Add([]byte("aaaaaaaaaaaaaaaa"), []byte("aQa"))
	f.Fuzz(func(t *testing.T, h, n []byte) {
		check(t, h, n)
	})
}

func BenchmarkMethods(b *testing.B) {
	line := []byte("2026-11-30T01:02:03.456Z INFO  service=api request_id=7f3a9c status=200 latency_ms=12 path=/v1/items/42 user=alice msg=\"request served\"")
	n := []byte("status=500")
	for _, m := range methods {
		b.Run(m.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if m.index(line, n) >= 0 {
					b.Fatal("unexpected hit")
				}
			}
		})
	}
}
