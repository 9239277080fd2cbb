package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
)

// Manifest is the store's root of truth: the live segments in ingestion
// order, the stream table, the sources' progress and where the WAL that is
// not yet in segments starts.
//
// On disk it is one header line and a JSON body:
//
//	HAYSTACK-MANIFEST 1 <crc32c of body, 8 hex digits> <body length>\n
//	{"segments":[...],"streams":[...],...}
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
	Streams  []StreamDef   `json:"streams"`
	Sources  []Source      `json:"sources"`
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

const manifestMagic = "HAYSTACK-MANIFEST 1"

func encodeManifest(m *Manifest) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	body = append(body, '\n')
	head := fmt.Sprintf("%s %08x %d\n", manifestMagic, crc32.Checksum(body, castagnoli), len(body))
	return append([]byte(head), body...), nil
}

func decodeManifest(data []byte) (*Manifest, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return nil, errors.New("manifest: no header line")
	}
	f := bytes.Fields(data[:nl])
	if len(f) != 4 || string(f[0])+" "+string(f[1]) != manifestMagic {
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
	if string(data[:nl+1]) != fmt.Sprintf("%s %08x %d\n", manifestMagic, crc, n) {
		return nil, errors.New("manifest: bad header")
	}
	if m, ok := parseManifestJSON(body); ok {
		return m, nil
	}
	m := new(Manifest)
	if err := json.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return m, nil
}

// readManifest reads dir/MANIFEST; a missing file is an empty store.
func readManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if errors.Is(err, os.ErrNotExist) {
		return &Manifest{NextSeq: 1, WALStart: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := decodeManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, manifestName), err)
	}
	return m, nil
}

// manifestKeptError is a failure of writeManifest before MANIFEST was
// replaced: the old manifest stands, unchanged, and the temp file is gone.
type manifestKeptError struct{ err error }

func (e *manifestKeptError) Error() string { return e.err.Error() }
func (e *manifestKeptError) Unwrap() error { return e.err }

// writeManifest atomically replaces dir/MANIFEST with m. A failure before
// the rename (a full disk) is a *manifestKeptError; after it (the
// directory fsync) whether the new manifest stands is unknown.
func writeManifest(dir string, m *Manifest) error {
	data, err := encodeManifest(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, manifestName+".tmp")
	kept := func(err error) error {
		os.Remove(tmp)
		return &manifestKeptError{err}
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
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
	if err := os.Rename(tmp, filepath.Join(dir, manifestName)); err != nil {
		return kept(err) // rename(2) is atomic: the old one stands
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that renames and creations in it survive a
// power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
