package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// dirRoot is the store's directory handle: every write, rename and remove
// goes through it, so that a data directory renamed and replaced while
// the store is open is never written (see Store.root). Its methods are
// os.Root's with one difference: os.Root names files relative to the
// directory in its errors, and someone reading "openat LOCK: read-only
// file system" needs to know which store, so these name them by their
// full path.
type dirRoot struct{ *os.Root }

// openDirRoot opens the handle on dir.
func openDirRoot(dir string) (*dirRoot, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &dirRoot{r}, nil
}

func (d *dirRoot) Open(name string) (*os.File, error) {
	f, err := d.Root.Open(name)
	return f, inDir(d.Name(), err)
}

func (d *dirRoot) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := d.Root.OpenFile(name, flag, perm)
	return f, inDir(d.Name(), err)
}

func (d *dirRoot) ReadFile(name string) ([]byte, error) {
	b, err := d.Root.ReadFile(name)
	return b, inDir(d.Name(), err)
}

func (d *dirRoot) Stat(name string) (fs.FileInfo, error) {
	fi, err := d.Root.Stat(name)
	return fi, inDir(d.Name(), err)
}

func (d *dirRoot) MkdirAll(name string, perm fs.FileMode) error {
	return inDir(d.Name(), d.Root.MkdirAll(name, perm))
}

func (d *dirRoot) Remove(name string) error {
	return inDir(d.Name(), d.Root.Remove(name))
}

func (d *dirRoot) Rename(oldname, newname string) error {
	return inDir(d.Name(), d.Root.Rename(oldname, newname))
}

// checkSubdirs refuses a store whose wal/ or segments/ is a symbolic
// link, with a message that says why: writes go through the directory
// handle, which does not follow links out of the directory (os.Root), so
// such a store would fail at its first write with "path escapes from
// parent". The data directory itself may be a link.
func checkSubdirs(d *dirRoot) error {
	for _, sub := range []string{walDir, segDir} {
		if fi, err := d.Lstat(sub); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link: a store writes %s/ only inside its data directory; move the whole data directory to the other disk (the data directory itself may be a link)", filepath.Join(d.Name(), sub), sub)
		}
	}
	return nil
}

// inDir names by their full path the files in err's path errors that are
// relative to dir. It changes the error in place (os.Root's errors are
// new each time) and must run before the error is wrapped in a message;
// absolute paths are left alone, so applying it twice is harmless.
func inDir(dir string, err error) error {
	if err == nil {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) && !filepath.IsAbs(pe.Path) {
		pe.Path = filepath.Join(dir, pe.Path)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		if !filepath.IsAbs(le.Old) {
			le.Old = filepath.Join(dir, le.Old)
		}
		if !filepath.IsAbs(le.New) {
			le.New = filepath.Join(dir, le.New)
		}
	}
	return err
}
