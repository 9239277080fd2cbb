package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// streamStore appends, to an open store, one entry for each of n new
// streams named from prefix, and returns their entries.
func addStreams(t *testing.T, st *Store, prefix string, n int) []Entry {
	t.Helper()
	var es []Entry
	for i := range n {
		id := st.Stream(fmt.Sprintf(`{app="%s%d", long="%s"}`, prefix, i, strings.Repeat("v", i%50)))
		es = append(es, Entry{Time: int64(len(es)), Stream: id, Line: []byte(fmt.Sprintf("line %s %d", prefix, i))})
	}
	if err := st.Append(&Batch{Entries: es}); err != nil {
		t.Fatal(err)
	}
	return es
}

// storeStreams returns the stream table a snapshot of dir reads.
func storeStreams(t *testing.T, dir string) []string {
	t.Helper()
	snap, err := OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	out := make([]string, snap.NumStreams())
	for i := range out {
		out[i] = snap.Labels(uint32(i))
	}
	return out
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestStreamsFileAppendOnly checks that flushes append only the new
// streams to STREAMS and that the manifest no longer carries the table:
// its size does not grow with the streams, and a flush without new
// streams does not touch STREAMS. Reopening reads the same table.
func TestStreamsFileAppendOnly(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	var sizes []int64
	for round := range 4 {
		addStreams(t, st, fmt.Sprintf("r%d_", round), 500)
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := range 500 {
			want = append(want, fmt.Sprintf(`{app="r%d_%d", long="%s"}`, round, i, strings.Repeat("v", i%50)))
		}
		sizes = append(sizes, fileSize(t, filepath.Join(dir, streamsName)))
		man, err := os.ReadFile(filepath.Join(dir, manifestName))
		if err != nil {
			t.Fatal(err)
		}
		if len(man) > 1000 || bytes.Contains(man, []byte("long=")) || !bytes.HasPrefix(man, []byte(manifestMagic2+" ")) {
			t.Fatalf("round %d: the manifest carries the stream table (%d bytes): %.200s", round, len(man), man)
		}
	}
	for i := 1; i < len(sizes); i++ {
		if d, first := sizes[i]-sizes[i-1], sizes[0]-int64(len(streamsMagic)); d < first-100 || d > first+100 {
			t.Fatalf("STREAMS grew by %d bytes for 500 streams, the first 500 took %d: not append-only (sizes %v)", d, first, sizes)
		}
	}
	// A flush of old streams only leaves STREAMS as it is.
	es := []Entry{{Time: 1, Stream: 3, Line: []byte("again")}}
	if err := st.Append(&Batch{Entries: es}); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, filepath.Join(dir, streamsName)); got != sizes[len(sizes)-1] {
		t.Fatalf("a flush without new streams changed STREAMS from %d to %d bytes", sizes[len(sizes)-1], got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storeStreams(t, dir); !slices.Equal(got, want) {
		t.Fatalf("reopened: %d streams, want %d", len(got), len(want))
	}
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(st.streamDef, want, func(d StreamDef, l string) bool { return d.Labels == l }) {
		t.Fatalf("writer reopened with %d streams, want %d", len(st.streamDef), len(want))
	}
	st.Close()
}

// TestStreamsFileCrashStates replays what a crash or damage can leave in
// STREAMS: bytes appended by a flush that died before its manifest (a
// whole record, or a torn one) are ignored by readers and cut off by the
// next writer, the streams coming back from the WAL with the same ids;
// damage inside the part the manifest references fails Open, snapshots
// and Verify, naming STREAMS.
func TestStreamsFileCrashStates(t *testing.T) {
	setup := func(t *testing.T) (dir string, want []string, entries []Entry) {
		dir = t.TempDir()
		st, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		entries = addStreams(t, st, "a", 100)
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
		// The state before the second flush: its manifest and WAL.
		man, _ := os.ReadFile(filepath.Join(dir, manifestName))
		entries = append(entries, addStreams(t, st, "b", 100)...)
		wals, _ := filepath.Glob(filepath.Join(dir, walDir, "*"))
		walData := map[string][]byte{}
		for _, w := range wals {
			walData[w], _ = os.ReadFile(w)
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
		st.Close()
		want = storeStreams(t, dir)
		if len(want) != 200 {
			t.Fatalf("%d streams", len(want))
		}
		// Crash after the second flush appended to STREAMS, before its
		// manifest: the old manifest and WAL files, the new record.
		os.WriteFile(filepath.Join(dir, manifestName), man, 0o644)
		segs, _ := filepath.Glob(filepath.Join(dir, segDir, "*"))
		slices.Sort(segs)
		os.Remove(segs[len(segs)-1])
		cur, _ := filepath.Glob(filepath.Join(dir, walDir, "*"))
		for _, w := range cur {
			os.Remove(w)
		}
		for w, d := range walData {
			os.WriteFile(w, d, 0o644)
		}
		return dir, want, entries
	}
	check := func(t *testing.T, dir string, want []string, entries []Entry) {
		t.Helper()
		if got := storeStreams(t, dir); !slices.Equal(got, want) {
			t.Fatalf("snapshot: %d streams, want %d", len(got), len(want))
		}
		if got := allEntries(t, dir); !equalEntries(got, entries) {
			t.Fatalf("snapshot: %d entries, want %d", len(got), len(entries))
		}
		// Verify notes the uncovered bytes, as it notes a crash's orphan
		// segment: no damage.
		if ps, err := Verify(dir); err != nil || len(ps) != 1 || ps[0].Damage || ps[0].File != streamsName {
			t.Fatalf("verify: %v %v, want a note on %s", ps, err, streamsName)
		}
		st, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		man, _ := readManifestOnly(dir)
		if got := fileSize(t, filepath.Join(dir, streamsName)); got != man.StreamsBytes {
			t.Fatalf("Open left STREAMS at %d bytes, the manifest covers %d", got, man.StreamsBytes)
		}
		// The next flush appends the WAL's streams again, with the ids
		// the entries use.
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if got := storeStreams(t, dir); !slices.Equal(got, want) {
			t.Fatalf("after the next flush: %d streams, want %d", len(got), len(want))
		}
		if got := allEntries(t, dir); !equalEntries(got, entries) {
			t.Fatalf("after the next flush: %d entries, want %d", len(got), len(entries))
		}
	}
	t.Run("record past the manifest", func(t *testing.T) {
		dir, want, entries := setup(t)
		check(t, dir, want, entries)
	})
	t.Run("torn record past the manifest", func(t *testing.T) {
		dir, want, entries := setup(t)
		man, _ := readManifestOnly(dir)
		if err := os.Truncate(filepath.Join(dir, streamsName), man.StreamsBytes+11); err != nil {
			t.Fatal(err)
		}
		check(t, dir, want, entries)
	})
	t.Run("first flush died", func(t *testing.T) {
		// No manifest names STREAMS yet: a file holding garbage.
		// The state: the WAL as appended, no manifest (Close flushes,
		// so the files are put back as they were before it).
		dir := t.TempDir()
		st, _ := Open(dir, Options{})
		entries := addStreams(t, st, "a", 20)
		wals, _ := filepath.Glob(filepath.Join(dir, walDir, "*"))
		walData := map[string][]byte{}
		for _, w := range wals {
			walData[w], _ = os.ReadFile(w)
		}
		st.Close()
		os.Remove(filepath.Join(dir, manifestName))
		segs, _ := filepath.Glob(filepath.Join(dir, segDir, "*"))
		cur, _ := filepath.Glob(filepath.Join(dir, walDir, "*"))
		for _, f := range append(segs, cur...) {
			os.Remove(f)
		}
		for w, d := range walData {
			os.WriteFile(w, d, 0o644)
		}
		os.WriteFile(filepath.Join(dir, streamsName), []byte(streamsMagic+"garbage"), 0o644)
		if got := allEntries(t, dir); !equalEntries(got, entries) {
			t.Fatalf("before Open: %d entries, want %d", len(got), len(entries))
		}
		st, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, streamsName)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Open left an unreferenced STREAMS: %v", err)
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if got := allEntries(t, dir); !equalEntries(got, entries) {
			t.Fatalf("%d entries, want %d", len(got), len(entries))
		}
	})
	for _, c := range []struct {
		name   string
		damage func(data []byte, covered int64) []byte
	}{
		{"cut inside", func(d []byte, n int64) []byte { return d[:n-3] }},
		{"flipped byte", func(d []byte, n int64) []byte { d[n/2] ^= 0x10; return d }},
		{"bad magic", func(d []byte, n int64) []byte { d[3] = 'x'; return d }},
		{"gone", func(d []byte, n int64) []byte { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _, _ := setup(t)
			st, err := Open(dir, Options{}) // cuts the uncovered record
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			path := filepath.Join(dir, streamsName)
			data, _ := os.ReadFile(path)
			man, _ := readManifestOnly(dir)
			if d := c.damage(data, man.StreamsBytes); d == nil {
				os.Remove(path)
			} else {
				os.WriteFile(path, d, 0o644)
			}
			if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), streamsName) {
				t.Fatalf("Open: %v, want an error naming %s", err, streamsName)
			}
			if _, err := OpenSnapshot(dir); err == nil || !strings.Contains(err.Error(), streamsName) {
				t.Fatalf("OpenSnapshot: %v, want an error naming %s", err, streamsName)
			}
			ps, err := Verify(dir)
			if err != nil || len(ps) != 1 || ps[0].File != streamsName || !ps[0].Damage {
				t.Fatalf("Verify: %v %v, want damage in %s", ps, err, streamsName)
			}
		})
	}
}

// TestStreamsFileFromVersion1 opens a store whose manifest carries the
// stream table (version 1, as every store before STREAMS): it reads as
// before, and the first flush moves the table into STREAMS.
func TestStreamsFileFromVersion1(t *testing.T) {
	dir := t.TempDir()
	st, _ := Open(dir, Options{})
	entries := addStreams(t, st, "old", 50)
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	want := storeStreams(t, dir)
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.StreamsBytes, m.StreamsCount = 0, 0
	data, err := encodeManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte(manifestMagic+" ")) {
		t.Fatalf("not version 1: %.40s", data)
	}
	os.WriteFile(filepath.Join(dir, manifestName), data, 0o644)
	os.Remove(filepath.Join(dir, streamsName))
	if got := storeStreams(t, dir); !slices.Equal(got, want) {
		t.Fatalf("version 1: %d streams, want %d", len(got), len(want))
	}
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	entries = append(entries, addStreams(t, st, "new", 10)...)
	if err := st.Flush(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	m2, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m2.StreamsCount != 60 || len(m2.Streams) != 60 {
		t.Fatalf("after the flush: %d streams in STREAMS, %d read", m2.StreamsCount, len(m2.Streams))
	}
	if got := allEntries(t, dir); !equalEntries(got, entries) {
		t.Fatalf("%d entries, want %d", len(got), len(entries))
	}
}

// FuzzStreamRecord decodes arbitrary record payloads: no panic, and what
// decodes encodes to a record that decodes the same.
func FuzzStreamRecord(f *testing.F) {
	f.Add(encodeStreamRecord(0, []StreamDef{{0, `{a="b"}`}, {1, `{a="\xff"}`}})[8:])
	f.Add(encodeStreamRecord(0, nil)[8:])
	f.Add([]byte{0, 1, 0})
	f.Add([]byte{0, 2, 1, 'x'})
	f.Fuzz(func(t *testing.T, p []byte) {
		defs, err := decodeStreamRecord(p, nil)
		if err != nil {
			return
		}
		rec := encodeStreamRecord(0, defs)
		again, err := decodeStreamRecord(rec[8:], nil)
		if err != nil || !slices.Equal(again, defs) {
			t.Fatalf("%q: decoded %v, re-encoded to %v (%v)", p, defs, again, err)
		}
	})
}

// TestStreamRecordRandom round-trips random tables through appendStreams
// and readStreams in random record sizes.
func TestStreamRecordRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	dir := t.TempDir()
	m := &Manifest{}
	for range 30 {
		for range 1 + r.IntN(40) {
			b := make([]byte, r.IntN(30))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			m.Streams = append(m.Streams, StreamDef{ID: uint32(len(m.Streams)), Labels: string(b)})
		}
		if r.IntN(3) == 0 && m.StreamsBytes > 0 {
			// What a flush whose manifest failed left: cut off by
			// the next append.
			f, _ := os.OpenFile(filepath.Join(dir, streamsName), os.O_WRONLY|os.O_APPEND, 0)
			f.Write(bytes.Repeat([]byte("left by a failed flush "), 200))
			f.Close()
		}
		if err := appendStreams(dir, m); err != nil {
			t.Fatal(err)
		}
		if got := fileSize(t, filepath.Join(dir, streamsName)); m.StreamsBytes > 0 && got != m.StreamsBytes {
			t.Fatalf("STREAMS is %d bytes, the manifest would cover %d", got, m.StreamsBytes)
		}
		if m.StreamsCount > 0 {
			m.StreamsCount++
			if _, err := readStreams(dir, m); err == nil {
				t.Fatal("a count past the streams read")
			}
			m.StreamsCount--
		}
		got, err := readStreams(dir, m)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, m.Streams) && len(m.Streams) > 0 {
			t.Fatalf("%d streams read back differently", len(m.Streams))
		}
	}
}

// TestStreamsManifestNumbers gives checksummed manifests whose stream
// table numbers are wrong (found by review): an error, never a panic or
// an allocation the numbers size; a version 1 manifest with a count, or
// a version 2 one without streams, is refused at once.
func TestStreamsManifestNumbers(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(m *Manifest)
		file string // the file the error names
	}{
		{"bytes past the file", func(m *Manifest) { m.StreamsBytes += 1 }, streamsName},
		{"bytes 1<<62", func(m *Manifest) { m.StreamsBytes = 1 << 62 }, streamsName},
		{"count 1<<40", func(m *Manifest) { m.StreamsCount = 1 << 40 }, streamsName},
		{"count one more", func(m *Manifest) { m.StreamsCount++ }, streamsName},
		{"version 1 with a count", func(m *Manifest) { m.StreamsBytes, m.StreamsCount = 0, 5 }, manifestName},
		{"version 2 without streams", func(m *Manifest) { m.StreamsCount = 0 }, manifestName},
		{"negative bytes", func(m *Manifest) { m.StreamsBytes = -5 }, manifestName},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			addStreams(t, st, "a", 10)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			m, err := readManifestOnly(dir)
			if err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			// Encoded by hand: encodeManifest picks the version from
			// the fields.
			body, _ := json.Marshal(m)
			body = append(body, '\n')
			magic := manifestMagic2
			if m.StreamsBytes == 0 {
				magic = manifestMagic
			}
			data := fmt.Appendf(nil, "%s %08x %d\n%s", magic, crc32.Checksum(body, castagnoli), len(body), body)
			os.WriteFile(filepath.Join(dir, manifestName), data, 0o644)
			_, err = OpenSnapshot(dir)
			if err == nil || !strings.Contains(err.Error(), c.file) {
				t.Fatalf("OpenSnapshot: %v, want an error naming %s", err, c.file)
			}
			if _, err := Open(dir, Options{}); err == nil {
				t.Fatal("Open accepted it")
			}
		})
	}
}

// FuzzReadStreams reads arbitrary STREAMS files under a manifest naming
// their whole length and a count: no panic, and what reads back encodes
// (as one record) to a file that reads the same.
func FuzzReadStreams(f *testing.F) {
	rec := encodeStreamRecord(0, []StreamDef{{0, `{a="b"}`}, {1, `{c="d"}`}})
	f.Add(append([]byte(streamsMagic), rec...), uint16(2))
	f.Add(append(append([]byte(streamsMagic), rec...), encodeStreamRecord(2, []StreamDef{{2, "x"}})...), uint16(3))
	f.Add([]byte(streamsMagic), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, count uint16) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, streamsName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		m := &Manifest{StreamsBytes: int64(len(data)), StreamsCount: int(count)}
		defs, err := readStreams(dir, m)
		if err != nil {
			return
		}
		m2 := &Manifest{Streams: defs}
		dir2 := t.TempDir()
		if len(defs) == 0 {
			return
		}
		if err := appendStreams(dir2, m2); err != nil {
			t.Fatal(err)
		}
		again, err := readStreams(dir2, m2)
		if err != nil || !slices.Equal(again, defs) {
			t.Fatalf("read %d streams, written again and read: %d (%v)", len(defs), len(again), err)
		}
	})
}
