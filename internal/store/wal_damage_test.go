package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"haystack/internal/segment"
)

// twoWALFiles makes the store a writer killed twice leaves: two WAL files
// and no segment, the first with records a0..a4 (one entry each), the
// second with b0..b4. It returns the directory and the files' paths.
func twoWALFiles(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	for round, prefix := range []string{"a", "b"} {
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		id := s.Stream(`{app="x"}`)
		for i := range 5 {
			e := Entry{Time: int64(round*10 + i), Stream: id, Line: []byte(fmt.Sprintf("%s%d", prefix, i))}
			if err := s.Append(&Batch{Entries: []Entry{e}}); err != nil {
				t.Fatal(err)
			}
		}
		s.wal.f.Close()
		s.lock.Close() // the process dies: no Close, no flush
	}
	seqs, err := walSeqs(dir)
	if err != nil || len(seqs) != 2 {
		t.Fatalf("wal files %v, %v; want 2", seqs, err)
	}
	return dir, []string{walPath(dir, seqs[0]), walPath(dir, seqs[1])}
}

// recordStart is the offset of record i of a WAL file.
func recordStart(t *testing.T, data []byte, i int) int {
	t.Helper()
	r := NewWALReader(data)
	for range i {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	return int(r.Valid)
}

// snapshotLines reads a snapshot's lines and damage.
func snapshotLines(t *testing.T, dir string) ([]string, []error) {
	t.Helper()
	s, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []string
	var b segment.Block
	for _, p := range s.Parts {
		for i := range p.NumBlocks() {
			if err := p.ReadBlock(i, &b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Len() {
				out = append(out, string(b.Line(k)))
			}
		}
	}
	return out, s.Damaged
}

// TestWALDamage: damage no crash can leave (in a WAL file that is not the
// last, or followed by whole records) is reported by a snapshot and by
// Verify, naming the file, and stops Open without touching any file;
// before, a reader dropped the entries from there on in silence and
// recovery deleted them for good. That includes a file cut exactly at a
// record boundary or deleted, which only the next file's header (its
// record of its predecessor's length) shows. A torn tail of the last
// file stays a crash's, recovered to its prefix.
func TestWALDamage(t *testing.T) {
	all := []string{"a0", "a1", "a2", "a3", "a4", "b0", "b1", "b2", "b3", "b4"}
	cases := []struct {
		name    string
		file    int
		damage  func(t *testing.T, data []byte) []byte
		damaged bool     // else a crash's torn tail
		prefix  []string // what a snapshot reads
	}{
		{"a byte of a record of the first file", 0, func(t *testing.T, d []byte) []byte {
			d[recordStart(t, d, 2)+recHeader+1] ^= 0x40
			return d
		}, true, all[:2]},
		{"the first file cut at its magic", 0, func(t *testing.T, d []byte) []byte {
			return d[:5]
		}, true, nil},
		{"the first file cut inside its last record", 0, func(t *testing.T, d []byte) []byte {
			return d[:len(d)-2]
		}, true, all[:4]},
		{"the first file cut exactly after its third record", 0, func(t *testing.T, d []byte) []byte {
			return d[:recordStart(t, d, 3)]
		}, true, all[:3]},
		{"the first file deleted", 0, nil, true, nil},
		{"a byte of the last file's second record, three whole after it", 1, func(t *testing.T, d []byte) []byte {
			d[recordStart(t, d, 1)+recHeader] ^= 0x01
			return d
		}, true, all[:6]},
		{"the last file's magic", 1, func(t *testing.T, d []byte) []byte {
			d[0] ^= 0x20
			return d
		}, true, all[:5]},
		{"the last file cut inside its last record", 1, func(t *testing.T, d []byte) []byte {
			return d[:len(d)-2]
		}, false, all[:9]},
		{"junk after the last file's last record", 1, func(t *testing.T, d []byte) []byte {
			return append(d, 0xff, 0x00, 0x13)
		}, false, all},
	}
	for _, c := range cases {
		dir, files := twoWALFiles(t)
		if got, dmg := snapshotLines(t, dir); !slices.Equal(got, all) || len(dmg) > 0 {
			t.Fatalf("%s: before the damage: %q %v", c.name, got, dmg)
		}
		if c.damage == nil {
			if err := os.Remove(files[c.file]); err != nil {
				t.Fatal(err)
			}
		} else {
			data, err := os.ReadFile(files[c.file])
			if err != nil {
				t.Fatal(err)
			}
			data = c.damage(t, data)
			if err := os.WriteFile(files[c.file], data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		base := filepath.Base(files[c.file])

		got, dmg := snapshotLines(t, dir)
		if !slices.Equal(got, c.prefix) {
			t.Errorf("%s: snapshot reads %q, want %q", c.name, got, c.prefix)
		}
		if named := len(dmg) == 1 && strings.Contains(dmg[0].Error(), base); named != c.damaged {
			t.Errorf("%s: snapshot damage %v; want it named (%s): %v", c.name, dmg, base, c.damaged)
		}

		ps, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		var damage []Problem
		for _, p := range ps {
			if p.Damage {
				damage = append(damage, p)
			}
		}
		named := len(damage) > 0
		for _, p := range damage {
			named = named && strings.Contains(p.File, base)
		}
		if named != c.damaged {
			t.Errorf("%s: verify %v; want damage in %s: %v", c.name, ps, base, c.damaged)
		}

		before := map[string][]byte{}
		for _, f := range files {
			before[f], _ = os.ReadFile(f)
		}
		s, err := Open(dir, Options{})
		if c.damaged {
			if err == nil || !strings.Contains(err.Error(), base) {
				t.Errorf("%s: Open: %v; want an error naming %s", c.name, err, base)
			}
			if err == nil {
				s.Close()
			}
			for _, f := range files {
				if after, _ := os.ReadFile(f); !bytes.Equal(after, before[f]) {
					t.Errorf("%s: the refused Open changed %s", c.name, filepath.Base(f))
				}
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: Open: %v", c.name, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got, dmg := snapshotLines(t, dir); !slices.Equal(got, c.prefix) || len(dmg) > 0 {
			t.Errorf("%s: after recovery: %q %v; want %q", c.name, got, dmg, c.prefix)
		}
	}
}

// TestManifestHeaderStrict: the header line, outside the checksum, is
// accepted only as encodeManifest writes it, so that no byte of MANIFEST
// can change unnoticed.
func TestManifestHeaderStrict(t *testing.T) {
	data, err := encodeManifest(&Manifest{NextSeq: 2, WALStart: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeManifest(data); err != nil {
		t.Fatal(err)
	}
	nl := bytes.IndexByte(data, '\n')
	head := string(data[:nl])
	for _, bad := range []string{
		strings.Replace(head, " ", "\t", 1),
		strings.ToUpper(head[:len(head)-4]) + head[len(head)-4:],
		head + " ",
		head + "\r",
		" " + head,
		strings.Replace(head, " ", "  ", 1),
	} {
		if bad == head {
			continue
		}
		if _, err := decodeManifest(append([]byte(bad), data[nl:]...)); err == nil {
			t.Errorf("header %q accepted", bad)
		}
	}
}

// TestRepairWAL: after damage that makes Open refuse the store, RepairWAL
// keeps every entry that can still be read (later WAL files too, when the
// streams they use are still defined), moves the rest to lost+found
// (nothing deleted), and leaves a store that Open accepts and Verify
// finds clean; a second repair changes nothing.
func TestRepairWAL(t *testing.T) {
	a := []string{"a0", "a1", "a2", "a3", "a4"}
	b := []string{"b0", "b1", "b2", "b3", "b4"}
	cases := []struct {
		name   string
		file   int
		damage func(t *testing.T, data []byte) []byte // nil: remove the file
		want   []string
		moved  int // files in lost+found
	}{
		{"a byte of the first file's third record", 0, func(t *testing.T, d []byte) []byte {
			d[recordStart(t, d, 2)+recHeader+1] ^= 0x40
			return d
		}, append(slices.Clone(a[:2]), b...), 1},
		{"the first file cut after its third record", 0, func(t *testing.T, d []byte) []byte {
			return d[:recordStart(t, d, 3)]
		}, append(slices.Clone(a[:3]), b...), 0},
		// The first record defines the stream: without it the second
		// file's entries belong to no stream and go too.
		{"the first file deleted", 0, nil, nil, 1},
		{"the first file cut at its magic", 0, func(t *testing.T, d []byte) []byte {
			return d[:5]
		}, nil, 2},
		{"the last file's magic, its records whole", 1, func(t *testing.T, d []byte) []byte {
			d[0] ^= 0x20
			return d
		}, a, 1},
		{"a byte of the last file's second record", 1, func(t *testing.T, d []byte) []byte {
			d[recordStart(t, d, 1)+recHeader] ^= 0x01
			return d
		}, append(slices.Clone(a), b[0]), 1},
	}
	for _, c := range cases {
		dir, files := twoWALFiles(t)
		if c.damage == nil {
			if err := os.Remove(files[c.file]); err != nil {
				t.Fatal(err)
			}
		} else {
			data, err := os.ReadFile(files[c.file])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(files[c.file], c.damage(t, data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if s, err := Open(dir, Options{}); err == nil {
			s.Close()
			t.Fatalf("%s: Open accepted the damaged store", c.name)
		}
		rep, err := RepairWAL(dir)
		if err != nil {
			t.Fatalf("%s: RepairWAL: %v", c.name, err)
		}
		if len(rep.Actions) == 0 {
			t.Errorf("%s: RepairWAL reported nothing", c.name)
		}
		var moved []string
		if rep.LostFound != "" {
			moved, _ = filepath.Glob(filepath.Join(dir, rep.LostFound, walDir, "*"))
		}
		if len(moved) != c.moved {
			t.Errorf("%s: %d files in lost+found (%q), want %d; actions %q", c.name, len(moved), rep.LostFound, c.moved, rep.Actions)
		}
		ps, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Damage {
				t.Errorf("%s: after the repair, verify: %v (actions %q)", c.name, p, rep.Actions)
			}
		}
		if got, dmg := snapshotLines(t, dir); !slices.Equal(got, c.want) || len(dmg) > 0 {
			t.Errorf("%s: after the repair the store reads %q %v, want %q (actions %q)", c.name, got, dmg, c.want, rep.Actions)
		}
		if rep2, err := RepairWAL(dir); err != nil || len(rep2.Actions) > 0 {
			t.Errorf("%s: a second repair: %v %q", c.name, err, rep2.Actions)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("%s: Open after the repair: %v", c.name, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got, _ := snapshotLines(t, dir); !slices.Equal(got, c.want) {
			t.Errorf("%s: after Open and Close the store reads %q, want %q", c.name, got, c.want)
		}
	}
}
