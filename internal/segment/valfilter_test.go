package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"haystack/internal/attrs"
)

// TestValueHashPinned pins valueHash, which format 6's filters store the
// bits of: changing it would make every version-6 file answer wrongly.
func TestValueHashPinned(t *testing.T) {
	for _, c := range []struct {
		v    string
		want uint64
	}{
		{"", 0xe220a8397b1dcdaf},
		{"a", 0xfacb4163de1e3d3f},
		{"5f89b9dc03bdc1981f886353c7c0df13", 0x926d9d3839dc431f},
		{"12345678", 0xcdb61cd063a7d5c6},
	} {
		got := valueHash([]byte(c.v))
		if got != c.want {
			t.Errorf("valueHash(%q) = %#x, want %#x", c.v, got, c.want)
		}
	}
	// And the doc's definition (docValueHash) at every length to 40.
	rng := rand.New(rand.NewPCG(3, 4))
	for n := range 41 {
		v := make([]byte, n)
		for i := range v {
			v[i] = byte(rng.IntN(256))
		}
		if valueHash(v) != docValueHash(v) {
			t.Errorf("valueHash(%x) = %#x, the doc's %#x", v, valueHash(v), docValueHash(v))
		}
	}
}

// buildFilters returns a version-6 value filters section over blocks,
// each the list of its values, as the writer builds it (stored: each
// block's stored size).
func buildFilters(blocks [][]string, stored int64) []byte {
	var table, area []byte
	any := false
	for _, vs := range blocks {
		var hs []uint64
		for _, v := range vs {
			hs = append(hs, valueHash([]byte(v)))
		}
		start := len(area)
		area, _ = appendValueFilter(area, hs, stored)
		any = any || len(vs) > 0
		table = binary.LittleEndian.AppendUint32(table, uint32(len(area)))
		table = binary.LittleEndian.AppendUint32(table, crc32.Checksum(area[start:], castagnoli))
	}
	if !any {
		return nil
	}
	b := binary.AppendUvarint(nil, uint64(len(blocks)))
	return append(append(b, table...), area...)
}

// TestValueFilterExact: a block's filter never says "no" to a value it
// holds, says "no" to ~99% of the others at valueFilterBits a value, and
// shrinks (fewer bits a value) or goes ("maybe") when the block's stored
// size cannot pay for it; a block without values says "no" to all.
func TestValueFilterExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	id := func() string { return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()) }
	blocks := make([][]string, 5)
	for i := range blocks {
		for range 1000 * i {
			blocks[i] = append(blocks[i], id())
		}
		blocks[i] = append(blocks[i], "checkout", "checkout", "") // repeats count once
	}
	blocks = append(blocks, nil) // no value at all
	for _, stored := range []int64{1 << 30, 2000 * valueFilterShare, 600 * valueFilterShare} {
		sec := buildFilters(blocks, stored)
		f, _, err := parseValueFilters(sec, len(blocks))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.check(); err != nil {
			t.Fatal(err)
		}
		for i, vs := range blocks {
			for _, v := range vs {
				if !f.mayHave(i, valueHash([]byte(v))) {
					t.Fatalf("stored %d: block %d: %q ruled out, but the block holds it", stored, i, v)
				}
			}
			said := 0
			for range 2000 {
				if !f.mayHave(i, valueHash([]byte(id()))) {
					said++
				}
			}
			share := float64(said) / 2000
			rec := f.record(i)
			distinct := len(vs) - 1 // "checkout" twice: one repeat
			t.Logf("stored %d: block %d of %d distinct values: filter of %d bytes, %.1f%% of absent values ruled out", stored, i, max(distinct, 0), len(rec), 100*share)
			switch {
			case len(vs) == 0:
				if said != 2000 {
					t.Errorf("block without values: %d of 2000 ruled out", said)
				}
			case len(rec) == 0:
				// No filter only when it would get under
				// valueFilterMinBits a value.
				if room := max(valueFilterMinBytes, stored/valueFilterShare) * 8; room >= int64(distinct*valueFilterMinBits) {
					t.Errorf("stored %d: block %d of %d values has no filter with %d bits of room", stored, i, distinct, room)
				}
			default:
				bits := float64(len(rec)-1) * 8 / float64(distinct)
				if bits > valueFilterBits+8/float64(distinct) || int64(len(rec)-1) > max(valueFilterMinBytes, stored/valueFilterShare) {
					t.Errorf("stored %d: block %d: %.1f bits a value, %d bytes", stored, i, bits, len(rec)-1)
				}
				// A bloom filter of b bits a value and its best k
				// keeps ~0.6185^b of the absent values.
				want := 1 - 1.3*math.Pow(0.6185, bits) - 0.02
				if share < want {
					t.Errorf("stored %d: block %d: %.1f%% ruled out at %.1f bits a value, want %.1f%%", stored, i, 100*share, bits, 100*want)
				}
			}
		}
	}
	// Too little room (under valueFilterMinBits a value): no filter.
	f, _, err := parseValueFilters(buildFilters(blocks, 4000*valueFilterShare/8), len(blocks))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.record(4)) != 0 || !f.mayHave(4, valueHash([]byte("absent"))) {
		t.Errorf("block of 4000 values in 4000 bits: filter %d bytes, want none", len(f.record(4)))
	}
}

// TestValueFiltersSegment: a written segment's filters answer for every
// value of every entry (under any name), across v4, v5 and v6.
func TestValueFiltersSegment(t *testing.T) {
	es := otelEntries(t, 3000, true)
	for i := range es {
		if i%5 == 0 {
			es[i].Attrs = attrs.MustPairs("x_extracted", fmt.Sprintf("v%d", i), "k", "")
		}
	}
	for _, v := range []uint32{formatV4, formatV5, formatVersion} {
		path, _ := writeSegmentVersion(t, t.TempDir(), "s", es, Options{BlockSize: 16 << 10}, v)
		_, r := readAll(t, filepath.Clean(path))
		checkValueFilters(t, r, es, v >= formatVersion)
		r.Close()
	}
}

// FuzzValueFilters feeds the value filters' parser and lookups arbitrary
// sections: no panic, and a section that parses answers every lookup
// and check; seeds are sections the writer builds.
func FuzzValueFilters(f *testing.F) {
	f.Add(buildFilters([][]string{{"a", "bb"}, nil, {"5f89b9dc03bdc1981f886353c7c0df13"}}, 1<<20), uint8(3), []byte("a"))
	f.Add(buildFilters([][]string{{"x"}}, 10), uint8(1), []byte("x"))
	f.Add([]byte{}, uint8(2), []byte("x"))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(1), []byte(""))
	f.Fuzz(func(t *testing.T, sec []byte, nb uint8, v []byte) {
		fs, head, err := parseValueFilters(sec, int(nb))
		if err != nil {
			return
		}
		if head > len(sec) {
			t.Fatalf("head %d of a %d-byte section", head, len(sec))
		}
		bad := fs.check()
		for i := range int(nb) {
			fs.mayHave(i, valueHash(v))
		}
		if (bad == nil) != (fs.damage.Load() == nil) {
			t.Fatalf("check %v, damage %v", bad, fs.damage.Load())
		}
	})
}

// docValueHash is valueHash as doc.go spells it, written apart from it.
func docValueHash(v []byte) uint64 {
	const c1, c2, c3 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
	h := uint64(len(v)+1) * c1
	for i := 0; i < len(v); i += 8 {
		var w uint64
		for j := i; j < len(v) && j < i+8; j++ {
			w |= uint64(v[j]) << (8 * (j - i))
		}
		h = (h ^ w) * c2
		h ^= h >> 29
	}
	h ^= h >> 30
	h *= c2
	h ^= h >> 27
	h *= c3
	h ^= h >> 31
	return h
}

// TestGoldenLayoutV6 decodes golden-v6.seg's skip index by hand,
// following the package doc: version 5's two indexes (the same bytes),
// each framed by its length, then the value filters, whose bits hold
// every value of each block's entries by the documented hash and probes;
// and skipCRC covers what the doc says.
func TestGoldenLayoutV6(t *testing.T) {
	v5 := readFile(t, filepath.Join("testdata", "golden-v5.seg"))
	v6 := readFile(t, filepath.Join("testdata", "golden-v6.seg"))
	le32, le64 := binary.LittleEndian.Uint32, binary.LittleEndian.Uint64
	f5, f6 := v5[len(v5)-footerSize:], v6[len(v6)-footerSize:]
	if le32(v6[8:]) != 6 || le32(f6[44:]) != 6 {
		t.Fatalf("version %d / %d", le32(v6[8:]), le32(f6[44:]))
	}
	skip5, skip6 := le64(f5[24:]), le64(f6[24:])
	if skip5 != skip6 || !bytes.Equal(v5[12:skip5], v6[12:skip6]) || !bytes.Equal(f5[:24], f6[:24]) {
		t.Fatal("blocks or block index differ from version 5's")
	}
	s5 := v5[skip5 : len(v5)-footerSize]
	s6 := v6[skip6 : len(v6)-footerSize]
	l, n := binary.Uvarint(s5)
	lines5, vals5 := s5[:n+int(l)], s5[n+int(l):]
	if !bytes.HasPrefix(s6, lines5) {
		t.Fatal("the lines' index is not version 5's")
	}
	rest := s6[len(lines5):]
	vl, vn := binary.Uvarint(rest)
	if vn <= 0 || vl != uint64(len(vals5)) || !bytes.Equal(rest[vn:vn+int(vl)], vals5) {
		t.Fatalf("the values' index (length %d) is not version 5's (%d bytes)", vl, len(vals5))
	}
	filters := rest[vn+int(vl):]
	nb, bn := binary.Uvarint(filters)
	blocks := le32(f6[20:])
	if bn <= 0 || nb != uint64(blocks) || len(filters) < bn+8*int(nb) {
		t.Fatalf("value filters: %d blocks, want %d", nb, blocks)
	}
	table, area := filters[bn:bn+8*int(nb)], filters[bn+8*int(nb):]
	r, err := Open(filepath.Join("testdata", "golden-v6.seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	es := goldenAttrEntries()
	start, k := uint32(0), 0
	for i := range int(nb) {
		end := le32(table[8*i:])
		rec := area[start:end]
		if crc32.Checksum(rec, castagnoli) != le32(table[8*i+4:]) {
			t.Fatalf("block %d: record CRC", i)
		}
		start = end
		var vals [][]byte
		for range r.BlockMeta(i).Entries {
			attrs.Each(es[k].Attrs, func(_, v []byte) bool {
				vals = append(vals, v)
				return true
			})
			k++
		}
		if len(rec) == 0 || rec[0] < 1 || rec[0] > 16 || (len(vals) > 0) != (len(rec) > 1) {
			t.Fatalf("block %d: record of %d bytes, k %v, for %d values", i, len(rec), rec[:min(1, len(rec))], len(vals))
		}
		m := uint64(len(rec)-1) * 8
		for _, v := range vals {
			h := docValueHash(v)
			for j := range uint64(rec[0]) {
				x := (h&0xFFFFFFFF + j*(h>>32)) & 0xFFFFFFFF
				p := x * m >> 32
				if rec[1+p/8]&(1<<(p%8)) == 0 {
					t.Fatalf("block %d: value %q: bit %d clear", i, v, p)
				}
			}
		}
	}
	if int(start) != len(area) || k != len(es) {
		t.Fatalf("records end at %d of %d; %d of %d entries", start, len(area), k, len(es))
	}
	// skipCRC: version 5's (L, lines' head, values' head) with V's bytes
	// after the lines' head and B and the table at the end.
	r5, err := Open(filepath.Join("testdata", "golden-v5.seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer r5.Close()
	linesHead := int(l) - len(r5.grams.area)
	valsHead := len(vals5) - len(r5.vgrams.area)
	crc := crc32.Checksum(s5[:n], castagnoli)
	crc = crc32.Update(crc, castagnoli, s5[n:n+linesHead])
	crc = crc32.Update(crc, castagnoli, rest[:vn])
	crc = crc32.Update(crc, castagnoli, vals5[:valsHead])
	crc = crc32.Update(crc, castagnoli, filters[:bn+8*int(nb)])
	if crc != le32(f6[40:]) {
		t.Fatal("skipCRC does not cover the lengths, both heads and the filters' table")
	}
}
