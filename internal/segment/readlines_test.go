package segment

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// sameLines fails unless got holds want's lines, times and streams and no
// metadata: what ReadBlockLines promises.
func sameLines(t testing.TB, what string, got, want *Block) {
	t.Helper()
	if !bytes.Equal(got.Data, want.Data) || !slices.Equal(got.Offsets, want.Offsets) ||
		!slices.Equal(got.Times, want.Times) || !slices.Equal(got.Streams, want.Streams) {
		t.Fatalf("%s: lines, times or streams differ from ReadBlock's", what)
	}
	if len(got.AttrData) != 0 || len(got.AttrOffsets) != 0 {
		t.Fatalf("%s: ReadBlockLines left %d attr offsets, %d bytes of metadata", what, len(got.AttrOffsets), len(got.AttrData))
	}
	for k := range got.Len() {
		if a := got.Attrs(k); len(a) != 0 {
			t.Fatalf("%s: entry %d has metadata %q", what, k, a)
		}
	}
}

// TestReadBlockLines reads every block of the metadata corpora (and of a
// corpus without) with ReadBlockLines and compares it with ReadBlock: the
// same lines, times and streams, no metadata. One pooled and one heap
// block are reused across ReadBlock and ReadBlockLines calls, so that a
// skipped section never shows the previous block's metadata, and a
// ReadBlock after a skip still fills it.
func TestReadBlockLines(t *testing.T) {
	dir := t.TempDir()
	cs := attrCorpora(t)
	cs["no-attrs"] = otelEntries(t, 500, false)
	sets := []Options{{}, {Codec: CodecNone, BlockSize: 100}, {Codec: CodecLZ4, BlockSize: 4096}, {Codec: CodecZstd, BlockSize: 33}}
	for name, es := range cs {
		for oi, o := range sets {
			path, _ := writeSegment(t, dir, fmt.Sprintf("%s-%d", name, oi), es, o)
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			pooled := GetBlock()
			for _, reused := range []*Block{pooled, new(Block)} {
				for i := range r.NumBlocks() {
					what := fmt.Sprintf("%s opts %d block %d", name, oi, i)
					want := new(Block)
					if err := r.ReadBlock(i, want); err != nil {
						t.Fatal(err)
					}
					// ReadBlock (fills metadata), then ReadBlockLines into
					// the same block, then ReadBlock again.
					if err := r.ReadBlock(i, reused); err != nil {
						t.Fatal(err)
					}
					if err := r.ReadBlockLines(i, reused); err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					sameLines(t, what, reused, want)
					if err := r.ReadBlock(i, reused); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(reused.AttrData, want.AttrData) || !slices.Equal(reused.AttrOffsets, want.AttrOffsets) {
						t.Fatalf("%s: ReadBlock after ReadBlockLines: metadata differs", what)
					}
					// The next block read without metadata into a block
					// that holds this one's.
					if i+1 < r.NumBlocks() {
						next := new(Block)
						if err := r.ReadBlock(i+1, next); err != nil {
							t.Fatal(err)
						}
						if err := r.ReadBlockLines(i+1, reused); err != nil {
							t.Fatal(err)
						}
						sameLines(t, what+" then next", reused, next)
					}
				}
			}
			PutBlock(pooled)
			r.Close()
		}
	}
}

// TestReadBlockLinesSkipsAttrs shows that ReadBlockLines does not decode
// the attrs section: a block whose attrs section is damaged but CRC-valid
// (a forged section, see TestForgedAttrs for each kind) reads with it and
// fails with ReadBlock; a bit flipped in the section still fails both
// (the checksum covers the whole block).
func TestReadBlockLinesSkipsAttrs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "forged")
	bad := okAttrsBlock(t)
	bad.attrs = forgeAttrs([]uint64{5, 0, 0}, []byte{1, 1, '9', 1, 'x'}) // the name "9" is invalid
	bad.attrsRaw = uint64(len(bad.attrs))
	if err := os.WriteFile(path, forgeV(formatVersion, []forged{okAttrsBlock(t), bad}), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	good := new(Block)
	if err := r.ReadBlock(0, good); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadBlock(1, new(Block)); err == nil {
		t.Fatal("ReadBlock of a block with invalid metadata succeeded")
	} else {
		asCorrupt(t, err, "ReadBlock")
	}
	var b Block
	if err := r.ReadBlockLines(1, &b); err != nil {
		t.Fatalf("ReadBlockLines decoded the attrs section: %v", err)
	}
	sameLines(t, "forged", &b, good)

	// A flipped bit in the attrs section: the checksum catches it.
	f := forgeV(formatVersion, []forged{okAttrsBlock(t)})
	r0, err := Open(writeTemp(t, dir, "ok", f))
	if err != nil {
		t.Fatal(err)
	}
	m := r0.BlockMeta(0)
	r0.Close()
	// The attrs section is the block's last bytes before its CRC.
	flip := int(m.offset) + int(m.length) - 4 - 1
	f[flip] ^= 0x20
	r1, err := Open(writeTemp(t, dir, "flipped", f))
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	if err := r1.ReadBlockLines(0, new(Block)); err == nil {
		t.Fatal("ReadBlockLines missed a flipped bit in the attrs section")
	} else {
		asCorrupt(t, err, "ReadBlockLines")
	}
}

func writeTemp(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
