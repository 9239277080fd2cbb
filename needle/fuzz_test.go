package needle

import "testing"

// FuzzIndex checks every kernel, plain and Fold, against the oracle. The
// haystack is copied into an exact-capacity slice so a read past len has
// nothing to find; guard_test.go covers reads that would fault.
func FuzzIndex(f *testing.F) {
	f.Add([]byte("GET /api/v1/users 200"), []byte("users"))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), []byte("aQa"))
	f.Add([]byte("\x00\x01\x00\x01\x7f\x80\xff"), []byte("\x00\x01"))
	f.Add([]byte("Connection TIMEOUT after 30s"), []byte(" timeout"))
	f.Fuzz(func(t *testing.T, h, n []byte) {
		h = append([]byte(nil), h...)[:len(h):len(h)]
		for _, fold := range []bool{false, true} {
			want := oracle(h, n, fold)
			for _, s := range searchers(t, n, fold) {
				if got := s.Index(h); got != want {
					t.Fatalf("%s fold=%v: Index(%q, %q) = %d, want %d", s.kern, fold, h, n, got, want)
				}
			}
		}
	})
}
