package segment

import "testing"

// BenchmarkOpen measures Open and Close of a segment of the Loghub
// samples by path: what a search pays per segment of a snapshot
// (store.OpenSnapshot opens each one by path).
func BenchmarkOpen(b *testing.B) {
	entries, _ := loghubEntries(b)
	path, info := writeSegment(b, b.TempDir(), "seg", entries, Options{})
	b.SetBytes(info.FileBytes)
	for b.Loop() {
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}
