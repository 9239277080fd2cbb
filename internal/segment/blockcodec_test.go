package segment

import "testing"

// TestBlockCodec checks that BlockCodec reports the codec each block was
// written with: every block for a forced codec, and for the default one
// the per-block choice ReadBlock then decodes.
func TestBlockCodec(t *testing.T) {
	entries := corpora()["logs"]
	for _, codec := range []Codec{CodecNone, CodecLZ4, CodecZstd, CodecDefault} {
		path, _ := writeSegment(t, t.TempDir(), "s", entries, Options{Codec: codec, BlockSize: 16 << 10})
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if r.NumBlocks() < 2 {
			t.Fatalf("%v: %d blocks, want several", codec, r.NumBlocks())
		}
		for i := range r.NumBlocks() {
			got := r.BlockCodec(i)
			switch {
			case codec != CodecDefault && got != codec:
				t.Errorf("%v: block %d reports %v", codec, i, got)
			case codec == CodecDefault && got != CodecLZ4 && got != CodecZstd:
				t.Errorf("default: block %d reports %v, want lz4 or zstd", i, got)
			}
			var b Block
			if err := r.ReadBlock(i, &b); err != nil {
				t.Fatalf("%v: block %d: %v", codec, i, err)
			}
		}
		r.Close()
	}
}
