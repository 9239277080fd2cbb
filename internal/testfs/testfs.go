// Package testfs mounts small filesystems for the tests that need a disk
// to run out of space or inodes (the disk-full contract of cmd/hay, the
// store's error messages).
package testfs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a tmpfs with opts ("size=65536", "nr_inodes=64") on a
// new directory and unmounts it at the end of the test. mount(2) needs
// root with CAP_SYS_ADMIN (CI runs as root); without them the test is
// skipped, since the platform lacks what it checks.
func MountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a small tmpfs with mount(2)")
	}
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("cannot mount a tmpfs (needs CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
