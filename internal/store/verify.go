package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"haystack/internal/segment"
)

// Problem is one finding of Verify.
type Problem struct {
	File string // path inside the data directory
	// Block is the damaged block's index, or -1 when the damage is not
	// inside one block.
	Block int
	Err   error
	// Damage is false for findings that recovery handles by design: a
	// torn record at the end of the last WAL file (a crash mid-write) or
	// a segment file the manifest does not list (a crash before the
	// manifest swap).
	Damage bool
}

func (p Problem) String() string {
	s := p.File
	if p.Block >= 0 {
		s += fmt.Sprintf(" block %d", p.Block)
	}
	kind := "damaged"
	if !p.Damage {
		kind = "note"
	}
	return fmt.Sprintf("%s: %s: %v", kind, s, p.Err)
}

// Verify checks every checksum and structure in data directory dir: the
// manifest, every WAL record, every segment's footer, index and blocks. It
// takes no lock and changes nothing. The error is for failures to run the
// check at all (dir missing); damage is reported as problems.
func Verify(dir string) ([]Problem, error) {
	if err := checkStore(dir); err != nil {
		return nil, err
	}
	var ps []Problem
	m, err := readManifest(dir)
	if err != nil {
		ps = append(ps, manifestProblem(err))
		return ps, nil
	}
	// A writer may change the store while we check. Compaction (hay
	// compact, or hay serve's own) replaces segments: a listed segment
	// that is gone sends us back to the manifest for its replacement, a
	// few times before it counts as damage. A flush moves WALStart and
	// deletes the WAL files below it: when the manifest read again after
	// the WAL check shows that, the new segment and the WAL are checked
	// again against it.
	done := map[string]bool{}
	for round := 0; ; round++ {
		for attempt := 0; ; attempt++ {
			gone := false
			for _, sm := range m.Segments {
				if done[sm.Name] {
					continue
				}
				name := filepath.Join(segDir, sm.Name)
				sps, missing := verifySegment(dir, name, sm)
				if missing && attempt < 5 {
					gone = true
					continue
				}
				done[sm.Name] = true
				ps = append(ps, sps...)
			}
			if !gone {
				break
			}
			if m, err = readManifest(dir); err != nil {
				ps = append(ps, manifestProblem(err))
				return ps, nil
			}
		}
		wps, err := verifyWAL(dir, m)
		if err != nil {
			return nil, err
		}
		// A writer with a small head flushes many times a second, and a
		// slow machine (the big-endian run under qemu) checks the WAL
		// slower than that: five rounds were not always enough. A round
		// after the first checks only new segments and the WAL files.
		if m2, err := readManifestOnly(dir); err == nil && m2.WALStart != m.WALStart && round < 100 {
			if m2, err = readManifest(dir); err != nil {
				ps = append(ps, manifestProblem(err))
				return ps, nil
			}
			m = m2
			continue
		}
		ps = append(ps, wps...)
		break
	}
	if fi, err := os.Stat(filepath.Join(dir, streamsName)); err == nil && fi.Size() > m.StreamsBytes {
		ps = append(ps, Problem{File: streamsName, Block: -1,
			Err: fmt.Errorf("%d bytes past the %d the manifest covers (left by a crash; removed on next ingest)", fi.Size()-m.StreamsBytes, m.StreamsBytes)})
	}
	live := map[string]bool{}
	for _, sm := range m.Segments {
		live[sm.Name] = true
	}
	names, err := readDirNames(filepath.Join(dir, segDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, n := range names {
		if !live[n] {
			ps = append(ps, Problem{File: filepath.Join(segDir, n), Block: -1,
				Err: errors.New("not in the manifest (left by a crash; removed on next ingest)")})
		}
	}
	return ps, nil
}

// verifyWAL checks the WAL files from m.WALStart on.
func verifyWAL(dir string, m *Manifest) ([]Problem, error) {
	var ps []Problem
	seqs, err := walSeqs(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	prevSeq, prevLen := uint64(0), int64(-1) // the WAL file read last
	unreadable := false                      // it could not be read
	for i, seq := range seqs {
		if seq < m.WALStart {
			continue
		}
		name := filepath.Join(walDir, filepath.Base(walPath(dir, seq)))
		data, err := os.ReadFile(walPath(dir, seq))
		if err != nil {
			ps = append(ps, Problem{File: name, Block: -1, Err: err, Damage: true})
			prevSeq, unreadable = seq, true
			continue
		}
		r := NewWALReader(data)
		last := i == len(seqs)-1
		// Each header records its predecessor's length: a predecessor
		// cut at a record boundary, or deleted, shows only here.
		if !(prevSeq+1 == seq && unreadable) {
			if err := checkWALLink(seq, r.Prev, prevSeq, prevLen, m.WALStart); err != nil {
				ps = append(ps, Problem{File: filepath.Join(walDir, filepath.Base(walPath(dir, seq-1))), Block: -1, Err: err, Damage: true})
			}
		}
		prevSeq, prevLen, unreadable = seq, int64(len(data)), false
		if last && r.Short {
			// What a crash right after making the file leaves (or a cut
			// that took its records: a note either way).
			ps = append(ps, Problem{File: name, Block: -1, Err: fmt.Errorf("%d bytes, inside the wal header (the end of a crashed write; started again on next ingest)", len(data))})
			continue
		}
		if !last && r.Short {
			// Only the last file can be cut short by a crash.
			ps = append(ps, Problem{File: name, Block: -1, Err: errors.New("short wal file"), Damage: true})
			continue
		}
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				dmg := walDamaged(data, r, last)
				if !dmg {
					err = fmt.Errorf("%w (the end of a crashed write; cut off on next ingest)", err)
				}
				ps = append(ps, Problem{File: name, Block: -1, Err: err, Damage: dmg})
				break
			}
		}
	}
	return ps, nil
}

// verifySegment checks one listed segment; missing reports that its file
// does not exist.
func verifySegment(dir, name string, sm SegmentMeta) (ps []Problem, missing bool) {
	r, err := segment.Open(filepath.Join(dir, name))
	if err != nil {
		return []Problem{corruptProblem(name, err)}, errors.Is(err, os.ErrNotExist)
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		// Verify joins one error per damaged block.
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				ps = append(ps, corruptProblem(name, e))
			}
		} else {
			ps = append(ps, corruptProblem(name, err))
		}
	}
	var entries int64
	for i := range r.NumBlocks() {
		entries += int64(r.BlockMeta(i).Entries)
	}
	if entries != sm.Entries {
		ps = append(ps, Problem{File: name, Block: -1, Damage: true,
			Err: fmt.Errorf("holds %d entries, the manifest says %d", entries, sm.Entries)})
	}
	return ps, false
}

func corruptProblem(name string, err error) Problem {
	p := Problem{File: name, Block: -1, Err: err, Damage: true}
	var ce *segment.CorruptError
	if errors.As(err, &ce) {
		// The problem already names the file.
		p.Block, p.Err = ce.Block, errors.New(ce.Reason)
	}
	return p
}

// manifestProblem reports a manifest that cannot be read, naming STREAMS
// when the damage is in the stream table.
func manifestProblem(err error) Problem {
	file := manifestName
	var se *streamsError
	if errors.As(err, &se) {
		file = streamsName
	}
	return Problem{File: file, Block: -1, Err: err, Damage: true}
}
