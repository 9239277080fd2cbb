package store

import (
	"fmt"
	"os"
	"path/filepath"

	"haystack/internal/dirfs"
)

// The store's directory handle (Store.root) is a *dirfs.Dir opened once,
// at Open: every write, rename, remove and fsync goes through it, so that
// a data directory renamed and replaced while the store is open is never
// written, and its errors name files by their full path ("openat
// DIR/LOCK: read-only file system"), segment files included, since the
// segment package writes through the same handle.

// checkSubdirs refuses a store whose wal/ or segments/ is a symbolic
// link, with a message that says why: writes go through the directory
// handle, which does not follow links out of the directory (os.Root), so
// such a store would fail at its first write with "path escapes from
// parent". The data directory itself may be a link.
func checkSubdirs(d *dirfs.Dir) error {
	for _, sub := range []string{walDir, segDir} {
		if fi, err := d.Lstat(sub); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link: a store writes %s/ only inside its data directory; move the whole data directory to the other disk (the data directory itself may be a link)", filepath.Join(d.Name(), sub), sub)
		}
	}
	return nil
}
