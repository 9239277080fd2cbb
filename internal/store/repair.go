package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"haystack/internal/dirfs"
)

// lostFoundDir is where RepairWAL puts what it takes out of the WAL.
const lostFoundDir = "lost+found"

// RepairReport says what RepairWAL changed, one line per file.
type RepairReport struct {
	// LostFound is the directory the removed WAL bytes went to (whole
	// files, and a copy of each file before it was cut); "" when nothing
	// was removed.
	LostFound string
	Actions   []string
}

// RepairWAL makes a store whose WAL is damaged where no crash leaves it
// (see Open) openable again, keeping every entry that can still be read:
//
//   - a damaged record: its file is cut at the last whole record before
//     it (a copy of the whole file goes to lost+found), and the later
//     files are kept;
//   - a WAL file that is not the last and shorter than its header, or
//     whose header or first record is bad: moved to lost+found;
//   - a file whose header records a predecessor length that is no longer
//     true (the predecessor was cut or removed, by the damage or by this
//     repair): the header is rewritten to the length found;
//   - a record that uses a stream whose definition was lost: it and
//     everything after it move to lost+found (later records may use the
//     same streams).
//
// A torn record at the end of the last file is left to Open, which cuts
// it as a crash's. Nothing is deleted: what is taken out is in
// DIR/lost+found/<time>/wal. It takes the writer's lock, so no ingest or
// serve may run meanwhile.
func RepairWAL(dir string) (*RepairReport, error) {
	if err := checkStore(dir); err != nil {
		return nil, err
	}
	// Every change goes through root: into this directory, even if dir is
	// renamed and another put in its place meanwhile.
	root, err := dirfs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := checkSubdirs(root); err != nil {
		return nil, err
	}
	lock, err := lockDir(root)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	m, err := readManifestIn(root)
	if err != nil {
		var se *streamsError
		if errors.As(err, &se) { // it names STREAMS itself
			return nil, fmt.Errorf("%w (the repair mends the write-ahead log only, not %s)", err, streamsName)
		}
		return nil, fmt.Errorf("%s: %w (the repair mends the write-ahead log only, not the manifest)", manifestName, err)
	}
	seqs, err := walSeqsIn(root)
	if err != nil {
		return nil, err
	}
	rp := &walRepair{root: root, rep: &RepairReport{}, streams: map[string]uint32{}}
	for _, d := range m.Streams {
		rp.streams[d.Labels] = d.ID
		rp.defs = append(rp.defs, d)
	}
	prevSeq, prevLen := uint64(0), int64(-1) // the file before, as left (-1: none)
	cut := false                             // everything from here goes
	for i, seq := range seqs {
		if seq < m.WALStart {
			continue
		}
		name := walName(seq)
		if cut {
			if err := rp.move(name, "after a record of a lost stream"); err != nil {
				return nil, err
			}
			continue
		}
		data, err := root.ReadFile(name)
		if err != nil {
			return nil, err
		}
		r := NewWALReader(data)
		last := i == len(seqs)-1
		if checkWALLink(seq, r.Prev, prevSeq, prevLen, m.WALStart) != nil {
			fixed := max(lenBefore(seq, prevSeq, prevLen), 0) // 0: it is gone
			if err := rewriteWALHeader(root, name, r.Version, fixed); err != nil {
				return nil, err
			}
			rp.act("%s: its header said the WAL file before it held %d bytes, now %d: rewritten (those bytes are lost)", name, r.Prev, fixed)
		}
		if r.Short {
			if last {
				break // a crash right after making it: Open starts it again
			}
			if err := rp.move(name, "shorter than its header"); err != nil {
				return nil, err
			}
			prevSeq, prevLen = seq, -1
			continue
		}
		good, why := r.Valid, ""
		for {
			b, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if walDamaged(data, r, last) {
					why = err.Error()
				}
				break // else a crash's torn tail: Open cuts it
			}
			if err := applyStreamDefs(rp.streams, &rp.defs, b); err != nil {
				// A stream definition was lost with the damage.
				why, cut = err.Error(), true
				break
			}
			good = r.Valid
		}
		size := int64(len(data))
		switch {
		case why == "":
		case good < headerLen(r):
			// Not even the header is whole: the file goes.
			if err := rp.move(name, why); err != nil {
				return nil, err
			}
			prevSeq, prevLen = seq, -1
			continue
		default:
			if err := rp.keepCopy(data, name); err != nil {
				return nil, err
			}
			if err := truncateSync(root, name, good); err != nil {
				return nil, err
			}
			rp.act("%s: %s: cut from %d to %d bytes (the whole file is in %s)", name, why, size, good, filepath.Join(rp.rep.LostFound, name))
			size = good
		}
		prevSeq, prevLen = seq, size
	}
	if err := root.SyncDir(walDir); err != nil {
		return nil, err
	}
	return rp.rep, nil
}

// headerLen is the length of the header r read: version 2 or 3, or 1.
func headerLen(r *WALReader) int64 {
	if r.Prev >= 0 {
		return int64(walHeader)
	}
	return int64(len(walMagicV1))
}

// walRepair is RepairWAL's state: the streams defined so far (as recovery
// would define them) and where removed bytes go.
type walRepair struct {
	root    *dirfs.Dir // the store's directory
	rep     *RepairReport
	streams map[string]uint32
	defs    []StreamDef
}

func (rp *walRepair) act(format string, args ...any) {
	rp.rep.Actions = append(rp.rep.Actions, fmt.Sprintf(format, args...))
}

// lostFound makes (once) the directory this repair moves things to and
// returns its name inside rp.root.
func (rp *walRepair) lostFound() (string, error) {
	if rp.rep.LostFound == "" {
		rel := filepath.Join(lostFoundDir, time.Now().UTC().Format("20060102T150405.000000000Z"))
		if err := rp.root.MkdirAll(filepath.Join(rel, walDir), 0o755); err != nil {
			return "", err
		}
		rp.rep.LostFound = rel
	}
	return rp.rep.LostFound, nil
}

// move puts the WAL file name (inside the store) into lost+found.
func (rp *walRepair) move(name, why string) error {
	lf, err := rp.lostFound()
	if err != nil {
		return err
	}
	if err := rp.root.Rename(name, filepath.Join(lf, name)); err != nil {
		return err
	}
	rp.act("%s: %s: moved to %s", name, why, filepath.Join(rp.rep.LostFound, name))
	return nil
}

// keepCopy writes data, a WAL file before it is cut, into lost+found.
func (rp *walRepair) keepCopy(data []byte, name string) error {
	lf, err := rp.lostFound()
	if err != nil {
		return err
	}
	path := filepath.Join(lf, name)
	f, err := rp.root.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, walFileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// No half copy that looks like one: the file is not cut yet.
		rp.root.Remove(path)
		return fmt.Errorf("copy %s to lost+found before cutting it: %w (it needs %d bytes free; nothing was changed, run the repair again once there is room)", name, err, len(data))
	}
	return nil
}

// rewriteWALHeader sets the predecessor length in the header of the WAL
// file name inside root, of version 2 or 3 (kept: a version 2 file stays
// one).
func rewriteWALHeader(root *dirfs.Dir, name string, version int, prev int64) error {
	magic := walMagic
	if version == 2 {
		magic = walMagicV2
	}
	f, err := root.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(walHeaderV(magic, prev), 0); err != nil {
		return err
	}
	return f.Sync()
}
