// Package dirfs is a directory handle through which files are opened,
// created, renamed, removed and fsynced, and whose errors name those files
// by their full path.
//
// A Dir is either open (Open: an os.Root taken once, so that every later
// operation stays in that directory, inode, even if it is renamed and
// another put in its place) or a path (At: each operation resolves the
// path again, for readers that take no lock). Both kinds name files the
// same way in their errors: os.Root names them relative to the directory
// ("openat segments/1.seg.tmp: no space left on device"), and someone
// reading that needs to know which data directory it is about. The store
// and the segment package share this type, so that neither keeps its own
// "handle or path" branching, nor its own error naming.
package dirfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Dir is a directory handle (see the package doc). Its methods take names
// relative to it ("wal/0001.wal"); an open Dir does not follow a symbolic
// link out of the directory (os.Root's rule). A Dir is safe for
// concurrent use.
type Dir struct {
	root *os.Root // nil for a Dir made by At
	name string   // the directory's path, as given
}

// Open opens the directory dir as a handle; Close releases it.
func Open(dir string) (*Dir, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &Dir{root: r, name: dir}, nil
}

// At is the directory at path dir, resolved again by each operation. Its
// Close does nothing. At("") takes names as paths, exactly as given
// (relative ones to the working directory).
func At(dir string) *Dir { return &Dir{name: dir} }

// Name is the directory's path, as given to Open or At.
func (d *Dir) Name() string { return d.name }

// Path is the full path of name, as errors name it.
func (d *Dir) Path(name string) string {
	if d.name == "" {
		return name // At(""): not cleaned, as the caller gave it
	}
	return filepath.Join(d.name, name)
}

// Close releases an open Dir; later operations fail with os.ErrClosed.
func (d *Dir) Close() error {
	if d.root == nil {
		return nil
	}
	return d.root.Close()
}

// Open opens name for reading.
func (d *Dir) Open(name string) (*os.File, error) {
	if d.root == nil {
		return os.Open(d.Path(name))
	}
	f, err := d.root.Open(name)
	return f, d.named(err)
}

// OpenFile is os.OpenFile of name.
func (d *Dir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if d.root == nil {
		return os.OpenFile(d.Path(name), flag, perm)
	}
	f, err := d.root.OpenFile(name, flag, perm)
	return f, d.named(err)
}

// ReadFile is os.ReadFile of name.
func (d *Dir) ReadFile(name string) ([]byte, error) {
	if d.root == nil {
		return os.ReadFile(d.Path(name))
	}
	b, err := d.root.ReadFile(name)
	return b, d.named(err)
}

// Stat is os.Stat of name.
func (d *Dir) Stat(name string) (fs.FileInfo, error) {
	if d.root == nil {
		return os.Stat(d.Path(name))
	}
	fi, err := d.root.Stat(name)
	return fi, d.named(err)
}

// Lstat is os.Lstat of name.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	if d.root == nil {
		return os.Lstat(d.Path(name))
	}
	fi, err := d.root.Lstat(name)
	return fi, d.named(err)
}

// MkdirAll is os.MkdirAll of name. Where a file that is not a directory
// is in the way, the error says so ("mkdir DIR/wal: not a directory"), as
// os.MkdirAll's does; os.Root's said "mkdirat wal: file exists", which
// does not say what is wrong.
func (d *Dir) MkdirAll(name string, perm fs.FileMode) error {
	if d.root == nil {
		return os.MkdirAll(d.Path(name), perm)
	}
	err := d.root.MkdirAll(name, perm)
	if errors.Is(err, fs.ErrExist) {
		// Which component is in the way: the first that is not a
		// directory (Lstat: a link is refused by the root anyway).
		p := ""
		for _, c := range splitPath(name) {
			p = filepath.Join(p, c)
			if fi, serr := d.root.Lstat(p); serr == nil && !fi.IsDir() {
				return &os.PathError{Op: "mkdir", Path: d.Path(p), Err: syscall.ENOTDIR}
			}
		}
	}
	return d.named(err)
}

// splitPath splits a relative name into its components.
func splitPath(name string) []string {
	var cs []string
	for name = filepath.Clean(name); name != "." && name != string(filepath.Separator); {
		dir, base := filepath.Split(name)
		cs = append(cs, base)
		name = filepath.Clean(dir)
	}
	for i, j := 0, len(cs)-1; i < j; i, j = i+1, j-1 {
		cs[i], cs[j] = cs[j], cs[i]
	}
	return cs
}

// Remove is os.Remove of name.
func (d *Dir) Remove(name string) error {
	if d.root == nil {
		return os.Remove(d.Path(name))
	}
	return d.named(d.root.Remove(name))
}

// Rename is os.Rename of oldname to newname, both in d.
func (d *Dir) Rename(oldname, newname string) error {
	if d.root == nil {
		return os.Rename(d.Path(oldname), d.Path(newname))
	}
	return d.named(d.root.Rename(oldname, newname))
}

// SyncDir fsyncs the directory name in d ("." for d itself), so that the
// creations, renames and removals in it survive a power loss. Through an
// open Dir it is the directory's own even after that was renamed.
func (d *Dir) SyncDir(name string) error {
	f, err := d.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // it names the file too, and "sync"
		}
		return &os.PathError{Op: "fsync", Path: d.Path(name), Err: err}
	}
	return nil
}

// named names by their full path the files in err's path errors that are
// relative to d. It changes the error in place: os.Root's errors are new
// each time, and are not wrapped yet.
func (d *Dir) named(err error) error {
	if err == nil {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) && !filepath.IsAbs(pe.Path) {
		pe.Path = d.Path(pe.Path)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		if !filepath.IsAbs(le.Old) {
			le.Old = d.Path(le.Old)
		}
		if !filepath.IsAbs(le.New) {
			le.New = d.Path(le.New)
		}
	}
	return err
}
