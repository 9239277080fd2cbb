package dirfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// both runs f on an open Dir and on one made by At, over the same
// directory.
func both(t *testing.T, f func(t *testing.T, dir string, d *Dir)) {
	for _, open := range []bool{true, false} {
		name := "At"
		if open {
			name = "Open"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			d := At(dir)
			if open {
				var err error
				if d, err = Open(dir); err != nil {
					t.Fatal(err)
				}
				defer d.Close()
			}
			f(t, dir, d)
		})
	}
}

// wantPathErr checks that err is target and names path in full, once.
func wantPathErr(t *testing.T, what string, err error, target error, path string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want %v", what, err, target)
		return
	}
	if n := strings.Count(err.Error(), path); n != 1 {
		t.Errorf("%s: %q names %s %d times, want once", what, err, path, n)
	}
}

// TestErrorsNameFullPath: every operation's error names the file by its
// full path (os.Root alone names it relative to the directory: "openat
// segments/x: no such file or directory").
func TestErrorsNameFullPath(t *testing.T) {
	both(t, func(t *testing.T, dir string, d *Dir) {
		missing := filepath.Join("sub", "missing")
		full := filepath.Join(dir, missing)
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := d.Open(missing)
		wantPathErr(t, "Open", err, fs.ErrNotExist, full)
		_, err = d.OpenFile(missing, os.O_RDWR, 0)
		wantPathErr(t, "OpenFile", err, fs.ErrNotExist, full)
		_, err = d.ReadFile(missing)
		wantPathErr(t, "ReadFile", err, fs.ErrNotExist, full)
		_, err = d.Stat(missing)
		wantPathErr(t, "Stat", err, fs.ErrNotExist, full)
		_, err = d.Lstat(missing)
		wantPathErr(t, "Lstat", err, fs.ErrNotExist, full)
		wantPathErr(t, "Remove", d.Remove(missing), fs.ErrNotExist, full)
		wantPathErr(t, "Rename", d.Rename(missing, "x"), fs.ErrNotExist, full)
		wantPathErr(t, "SyncDir", d.SyncDir(missing), fs.ErrNotExist, full)
		// The file is there, but a name inside it is not.
		if err := os.WriteFile(filepath.Join(dir, "sub", "f"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = d.OpenFile(filepath.Join("sub", "f", "g"), os.O_RDWR|os.O_CREATE, 0o644)
		wantPathErr(t, "OpenFile under a file", err, syscall.ENOTDIR, filepath.Join(dir, "sub", "f"))
	})
}

// TestMkdirAllNotDir: a file where a directory should be is reported as
// "not a directory" naming it, by both kinds of Dir, for the last
// component and for one on the way.
func TestMkdirAllNotDir(t *testing.T) {
	both(t, func(t *testing.T, dir string, d *Dir) {
		if err := os.WriteFile(filepath.Join(dir, "wal"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"wal", filepath.Join("wal", "x", "y")} {
			err := d.MkdirAll(name, 0o755)
			// "mkdir" or "openat" (a component on the way): what matters
			// is what is wrong, and where.
			want := " " + filepath.Join(dir, "wal") + ": not a directory"
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("MkdirAll(%s): %v, want %q", name, err, want)
			}
			if !errors.Is(err, syscall.ENOTDIR) {
				t.Errorf("MkdirAll(%s): %v is not ENOTDIR", name, err)
			}
		}
		// A directory that exists is no error; a new one is made.
		if err := os.Mkdir(filepath.Join(dir, "segments"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"segments", filepath.Join("a", "b")} {
			if err := d.MkdirAll(name, 0o755); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.IsDir() {
				t.Fatalf("%s: %v %v", name, fi, err)
			}
		}
	})
}

// TestOpenStaysInDir: an open Dir creates, renames, syncs and removes in
// the directory it was opened on after that is renamed and another put in
// its place; one made by At follows the path.
func TestOpenStaysInDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	at := At(dir)
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Dir{d, at} {
		f, err := x.OpenFile("a.tmp", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := x.Rename("a.tmp", "a"); err != nil {
			t.Fatal(err)
		}
		if err := x.SyncDir("."); err != nil {
			t.Fatal(err)
		}
		if x == d {
			if err := x.Rename("a", "b"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct{ path, want string }{{dir + ".old", "b"}, {dir, "a"}} {
		ents, err := os.ReadDir(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 || ents[0].Name() != c.want {
			t.Errorf("%s holds %v, want only %s", c.path, ents, c.want)
		}
	}
	if err := at.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("b"); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := d.Stat("."); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("stat after close: %v, want ErrClosed", err)
	}
	if err := at.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNamedLeavesAbsolute: an error that names a file in full already
// is left as it is.
func TestNamedLeavesAbsolute(t *testing.T) {
	d := At("/data")
	abs := &os.PathError{Op: "open", Path: "/elsewhere/x", Err: fs.ErrNotExist}
	if err := d.named(abs); err.Error() != "open /elsewhere/x: file does not exist" {
		t.Errorf("absolute path changed: %v", err)
	}
	rel := &os.LinkError{Op: "renameat", Old: "a", New: "/b", Err: fs.ErrNotExist}
	if err := d.named(rel); err.Error() != "renameat /data/a /b: file does not exist" {
		t.Errorf("link error: %v", err)
	}
	if d.named(nil) != nil {
		t.Error("nil error became non-nil")
	}
}

// TestAtEmpty: At("") takes names as paths, exactly as given.
func TestAtEmpty(t *testing.T) {
	dir := t.TempDir()
	d := At("")
	path := dir + "/sub/../f"
	if got := d.Path(path); got != path {
		t.Errorf("Path(%q) = %q", path, got)
	}
	_, err := d.Open(path)
	wantPathErr(t, "Open", err, fs.ErrNotExist, path)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := d.ReadFile(path); err != nil || string(b) != "x" {
		t.Fatalf("ReadFile(%s) = %q, %v", path, b, err)
	}
	if err := d.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

// TestSplitPath checks the components MkdirAll walks.
func TestSplitPath(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
	}{
		{"", ""}, {".", ""}, {"a", "a"}, {"a/b/c", "a|b|c"}, {"a//b/", "a|b"}, {"./a/./b", "a|b"},
	} {
		if got := strings.Join(splitPath(c.in), "|"); got != c.want {
			t.Errorf("splitPath(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
