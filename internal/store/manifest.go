package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strconv"

	"haystack/internal/dirfs"
)

// Manifest is the store's root of truth: the live segments in ingestion
// order, the stream table, the sources' progress and where the WAL that is
// not yet in segments starts.
//
// On disk it is one header line and a JSON body:
//
//	HAYSTACK-MANIFEST 2 <crc32c of body, 8 hex digits> <body length>\n
//	{"segments":[...],"streams":null,"sources":[...],"streams_bytes":N,"streams_count":C,...}
//
// Version 2 keeps the stream table in the append-only file STREAMS (see
// streamfile.go), of which the manifest names the prefix it covers;
// version 1, which older stores have and which has no STREAMS, carries
// the table in "streams". Readers take both; writers move a version 1
// table into STREAMS at their first manifest write.
//
// It is replaced only whole (write MANIFEST.tmp, fsync, rename, fsync the
// directory), so a reader sees the old or the new one, never a mix.
type Manifest struct {
	// NextSeq numbers the next segment file.
	NextSeq uint64 `json:"next_seq"`
	// WALStart: WAL files numbered below it are covered by segments and
	// may be deleted; files from it on are replayed on open.
	WALStart uint64        `json:"wal_start"`
	Segments []SegmentMeta `json:"segments"`
	// Streams is the whole stream table once read (readManifest loads it
	// from STREAMS); on disk it is in the manifest only in version 1.
	Streams []StreamDef `json:"streams"`
	Sources []Source    `json:"sources"`
	// StreamsBytes and StreamsCount are the length of STREAMS that this
	// manifest covers and the streams in it; zero in version 1.
	StreamsBytes int64 `json:"streams_bytes,omitempty"`
	StreamsCount int   `json:"streams_count,omitempty"`
}

// SegmentMeta describes one live segment file.
type SegmentMeta struct {
	Name     string `json:"name"` // file name inside segments/
	Entries  int64  `json:"entries"`
	RawBytes int64  `json:"raw_bytes"` // sum of entry lengths
	Size     int64  `json:"size"`      // file size
	MinTime  int64  `json:"min_time"`
	MaxTime  int64  `json:"max_time"`
	// Compacted marks a segment Compact wrote (smaller blocks, stronger
	// compression); Compact leaves it alone.
	Compacted bool `json:"compacted,omitempty"`
}

// The header's magic: version 1 carries the stream table in its body,
// version 2 in STREAMS.
const (
	manifestMagic  = "HAYSTACK-MANIFEST 1"
	manifestMagic2 = "HAYSTACK-MANIFEST 2"
)

func encodeManifest(m *Manifest) ([]byte, error) {
	magic := manifestMagic
	if m.StreamsBytes > 0 {
		// The table is in STREAMS: version 2, which older binaries
		// refuse rather than read as a store without streams.
		c := *m
		c.Streams = nil
		m, magic = &c, manifestMagic2
	}
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	body = append(body, '\n')
	head := fmt.Sprintf("%s %08x %d\n", magic, crc32.Checksum(body, castagnoli), len(body))
	return append([]byte(head), body...), nil
}

func decodeManifest(data []byte) (*Manifest, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return nil, errors.New("manifest: no header line")
	}
	f := bytes.Fields(data[:nl])
	magic := ""
	if len(f) == 4 {
		magic = string(f[0]) + " " + string(f[1])
	}
	if magic != manifestMagic && magic != manifestMagic2 {
		return nil, errors.New("manifest: bad header")
	}
	crc, err1 := strconv.ParseUint(string(f[2]), 16, 32)
	n, err2 := strconv.Atoi(string(f[3]))
	body := data[nl+1:]
	if err1 != nil || err2 != nil || n != len(body) {
		return nil, errors.New("manifest: bad header or truncated body")
	}
	if crc32.Checksum(body, castagnoli) != uint32(crc) {
		return nil, errors.New("manifest: checksum mismatch")
	}
	// The header is outside the checksum: hold it to the one form
	// encodeManifest writes, so that no byte of the file goes unchecked.
	if string(data[:nl+1]) != fmt.Sprintf("%s %08x %d\n", magic, crc, n) {
		return nil, errors.New("manifest: bad header")
	}
	m, ok := parseManifestJSON(body)
	if !ok {
		m = new(Manifest)
		if err := json.Unmarshal(body, m); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
	}
	// The version and where the table is must agree: version 2 names
	// a STREAMS prefix of at least one stream, version 1 none. (A count
	// that STREAMS does not hold is readStreams' to report; it never
	// sizes an allocation past the file.)
	v2ok := m.StreamsBytes >= int64(len(streamsMagic)) && m.StreamsCount > 0 && len(m.Streams) == 0
	v1ok := m.StreamsBytes == 0 && m.StreamsCount == 0
	if magic == manifestMagic2 && !v2ok || magic == manifestMagic && !v1ok {
		return nil, fmt.Errorf("manifest: stream table fields (%d bytes, %d streams) do not fit version %s", m.StreamsBytes, m.StreamsCount, magic[len(magic)-1:])
	}
	return m, nil
}

// readManifest reads dir/MANIFEST and the stream table it names; a
// missing file is an empty store. Damage in STREAMS is a *streamsError.
func readManifest(dir string) (*Manifest, error) {
	return readManifestIn(dirfs.At(dir))
}

// readManifestIn is readManifest in d: the writer's directory handle (see
// Store.root), or a path (dirfs.At) for readers.
func readManifestIn(d *dirfs.Dir) (*Manifest, error) {
	m, err := readManifestOnlyIn(d)
	if err != nil || m.StreamsBytes == 0 {
		return m, err
	}
	if m.Streams, err = readStreamsIn(d, m); err != nil {
		return nil, err
	}
	return m, nil
}

// readManifestOnly reads dir/MANIFEST without the stream table of a
// version 2 manifest (Streams stays empty): for a check of its other
// fields.
func readManifestOnly(dir string) (*Manifest, error) {
	return readManifestOnlyIn(dirfs.At(dir))
}

// readManifestOnlyIn is readManifestOnly in d, as readManifestIn.
func readManifestOnlyIn(d *dirfs.Dir) (*Manifest, error) {
	data, err := d.ReadFile(manifestName) // its error names the whole path
	if errors.Is(err, os.ErrNotExist) {
		return &Manifest{NextSeq: 1, WALStart: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := decodeManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Path(manifestName), err)
	}
	return m, nil
}

// manifestKeptError is a failure of writeManifest before MANIFEST was
// replaced: the old manifest stands, unchanged, and the temp file is gone.
type manifestKeptError struct{ err error }

func (e *manifestKeptError) Error() string { return e.err.Error() }
func (e *manifestKeptError) Unwrap() error { return e.err }

// writeManifest atomically replaces MANIFEST in the directory root is open
// on with m. A failure before
// the rename (a full disk) is a *manifestKeptError; after it (the
// directory fsync) whether the new manifest stands is unknown.
//
// The streams of m.Streams that STREAMS does not hold yet are appended to
// it first, and m's StreamsBytes and StreamsCount updated: m is the
// manifest as written.
//
// Every file operation goes through root, not a path: a directory that
// replaced the store's (renamed over it while a flush ran) is never
// written to; the writes land in the store's own, renamed, directory.
func writeManifest(root *dirfs.Dir, m *Manifest) error {
	tmp := manifestName + ".tmp"
	kept := func(err error) error {
		root.Remove(tmp)
		return &manifestKeptError{err}
	}
	// A failure here leaves bytes past what the old manifest references:
	// the next append cuts them off. So the old manifest stands.
	prevBytes, prevCount := m.StreamsBytes, m.StreamsCount
	if err := appendStreamsIn(root, m); err != nil {
		m.StreamsBytes, m.StreamsCount = prevBytes, prevCount
		return &manifestKeptError{err}
	}
	data, err := encodeManifest(m)
	if err != nil {
		return err
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return kept(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return kept(fmt.Errorf("write manifest: %w", err))
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return kept(fmt.Errorf("fsync manifest: %w", err))
	}
	if err := f.Close(); err != nil {
		return kept(err)
	}
	if err := root.Rename(tmp, manifestName); err != nil {
		return kept(err) // rename(2) is atomic: the old one stands
	}
	return root.SyncDir(".")
}
