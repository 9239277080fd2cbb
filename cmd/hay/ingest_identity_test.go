package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/store"
)

// The tests in this file check that hay ingest resumes a file by its
// identity (device and inode, checked against the file's checksum), not
// by the path it was given (finding F8): a file ingested again through a
// symlink, a hard link or after logrotate renamed it was stored again,
// and every count doubled. The oracle is the list of lines written to the
// files: after any sequence of ingests each must be stored exactly once.

// lineGen makes unique, timestamped log lines and remembers them all.
type lineGen struct {
	n   int
	all []string
}

// next returns k new lines, each ending in "\n".
func (g *lineGen) next(k int) string {
	var b strings.Builder
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for range k {
		l := fmt.Sprintf("%s line %d", t0.Add(time.Duration(g.n)*time.Second).Format(time.RFC3339), g.n)
		g.n++
		g.all = append(g.all, l)
		b.WriteString(l + "\n")
	}
	return b.String()
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// ingestFiles runs hay ingest on files and returns its stderr.
func ingestFiles(t *testing.T, data string, files ...string) string {
	t.Helper()
	_, code, stderr := hayInProcessStderr(t, append([]string{"ingest", "--data", data}, files...)...)
	if code != 0 {
		t.Fatalf("hay ingest %v: exit %d: %s", files, code, stderr)
	}
	return stderr
}

// checkStoredOnce fails unless the store holds exactly the lines want, as
// many times as want has them: each written line once (hay search -c
// agrees, and the lines themselves match).
func checkStoredOnce(t *testing.T, data string, want []string) {
	t.Helper()
	out, code := hayInProcess(t, "search", "--data", data, "-c", "line")
	if code != 0 && len(want) > 0 {
		t.Fatalf("hay search -c: exit %d", code)
	}
	if got, w := strings.TrimSpace(string(out)), fmt.Sprint(len(want)); got != w {
		t.Errorf("hay search -c line: %s, want %s (the lines written, each once)", got, w)
	}
	out, _ = hayInProcess(t, "search", "--data", data, "line")
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(out) == 0 {
		got = nil
	}
	w := slices.Clone(want)
	slices.Sort(got)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		t.Errorf("stored lines:\n%s\nwant each written line once:\n%s", strings.Join(got, "\n"), strings.Join(w, "\n"))
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestIngestIdentitySymlink: a file ingested through a symlink after its
// own path (and the other way round) is the same file: nothing is stored
// twice. F8's repro stored every line twice.
func TestIngestIdentitySymlink(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	app := filepath.Join(dir, "app.log")
	cur := filepath.Join(dir, "current.log")
	var g lineGen
	writeFile(t, app, g.next(3))
	if err := os.Symlink("app.log", cur); err != nil {
		t.Fatal(err)
	}
	ingestFiles(t, data, app)
	stderr := ingestFiles(t, data, cur)
	if !strings.Contains(stderr, "resuming after the") {
		t.Errorf("ingest through the symlink did not say it resumed: %q", stderr)
	}
	checkStoredOnce(t, data, g.all)

	// Growth picked up through the symlink, then through the path: each
	// new line once.
	appendFile(t, app, g.next(2))
	ingestFiles(t, data, cur)
	appendFile(t, app, g.next(1))
	ingestFiles(t, data, app, cur)
	checkStoredOnce(t, data, g.all)

	// A symlinked directory too.
	ldir := filepath.Join(t.TempDir(), "logs")
	if err := os.Symlink(dir, ldir); err != nil {
		t.Fatal(err)
	}
	appendFile(t, app, g.next(1))
	ingestFiles(t, data, filepath.Join(ldir, "current.log"), filepath.Join(ldir, "app.log"))
	checkStoredOnce(t, data, g.all)
}

// TestIngestIdentityRename: logrotate's default ("create"): app.log is
// renamed app.log.1 (same inode) and a new app.log started. Ingesting
// app.log and app.log.1 stores what app.log.1 got after the last ingest
// and the new app.log whole; a second rotation (app.log.1 to app.log.2)
// and a glob of all three store nothing twice either.
func TestIngestIdentityRename(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	p := func(s string) string { return filepath.Join(dir, s) }
	var g lineGen
	writeFile(t, p("app.log"), g.next(3))
	ingestFiles(t, data, p("app.log"))
	appendFile(t, p("app.log"), g.next(2)) // written after the ingest, before the rotation
	if err := os.Rename(p("app.log"), p("app.log.1")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p("app.log"), g.next(1))
	stderr := ingestFiles(t, data, p("app.log"), p("app.log.1"))
	if !strings.Contains(stderr, "app.log.1: resuming after the") || !strings.Contains(stderr, "same device and inode") {
		t.Errorf("the rotated file did not resume, or did not say it is the file stored under another name: %q", stderr)
	}
	checkStoredOnce(t, data, g.all)

	// Rotate again; ingest in the other order, all three.
	appendFile(t, p("app.log"), g.next(2))
	if err := os.Rename(p("app.log.1"), p("app.log.2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("app.log"), p("app.log.1")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p("app.log"), g.next(4))
	ingestFiles(t, data, p("app.log.2"), p("app.log.1"), p("app.log"))
	ingestFiles(t, data, p("app.log"), p("app.log.1"), p("app.log.2"))
	checkStoredOnce(t, data, g.all)
}

// TestIngestIdentityCopytruncate: logrotate's copytruncate keeps the
// inode and truncates it. Whether the file is now shorter than what was
// stored or has grown past it with new lines, the new content is stored
// from its start, once.
func TestIngestIdentityCopytruncate(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	app := filepath.Join(dir, "app.log")
	var g lineGen
	writeFile(t, app, g.next(5))
	ino := inode(t, app)
	ingestFiles(t, data, app)

	// Shorter than the stored offset.
	if err := os.Truncate(app, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, app, g.next(2))
	if inode(t, app) != ino {
		t.Fatal("truncate changed the inode; the test needs the same one")
	}
	ingestFiles(t, data, app)
	checkStoredOnce(t, data, g.all)

	// Truncated again, and longer than the stored offset by the re-ingest.
	if err := os.Truncate(app, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, app, g.next(9))
	ingestFiles(t, data, app)
	checkStoredOnce(t, data, g.all)
	// Then it grows: only the growth.
	appendFile(t, app, g.next(1))
	ingestFiles(t, data, app)
	checkStoredOnce(t, data, g.all)
}

// TestIngestIdentityInodeReuse: an inode recorded for one file may later
// belong to another (deleted, then a new file made), under the same or
// another name. The checksum tells them apart: the new file is stored
// from its start. The reuse is made certain by recording the new file's
// identity with another file's offset and checksum, as the store would
// hold after the old file was ingested; the kernel's own reuse (delete,
// create) and an in-place rewrite are tried too.
func TestIngestIdentityInodeReuse(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var g lineGen

	// The old file, ingested, then deleted; its progress is recorded
	// under the identity the new file has.
	old := filepath.Join(dir, "old.log")
	writeFile(t, old, g.next(4))
	ingestFiles(t, data, old)
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, ok := st.Source(identityKey(t, old))
	if !ok {
		st.Close()
		t.Fatalf("no progress recorded under the identity %q", identityKey(t, old))
	}
	os.Remove(old)
	newer := filepath.Join(dir, "new.log")
	writeFile(t, newer, g.next(6)) // longer than the old one
	src.Key = identityKey(t, newer)
	if err := st.Append(&store.Batch{Sources: []store.Source{src}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ingestFiles(t, data, newer)
	checkStoredOnce(t, data, g.all)

	// The kernel's reuse, when it happens: a file deleted and a new one
	// made in its place, under another name.
	ino := inode(t, newer)
	os.Remove(newer)
	again := filepath.Join(dir, "again.log")
	writeFile(t, again, g.next(8))
	t.Logf("inode reused by the kernel: %v", inode(t, again) == ino)
	ingestFiles(t, data, again)
	checkStoredOnce(t, data, g.all)

	// Rewritten in place (same inode, same name), longer than before. The
	// 8 lines it had stay stored: the oracle is every line written.
	writeFile(t, again, g.next(12))
	ingestFiles(t, data, again)
	checkStoredOnce(t, data, g.all)
}

// TestIngestIdentityHardLinks: two hard links to one file are one file.
func TestIngestIdentityHardLinks(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	a := filepath.Join(dir, "a.log")
	b := filepath.Join(dir, "b.log")
	var g lineGen
	writeFile(t, a, g.next(3))
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	ingestFiles(t, data, a)
	ingestFiles(t, data, b)
	checkStoredOnce(t, data, g.all)
	appendFile(t, b, g.next(2))
	ingestFiles(t, data, b, a)
	appendFile(t, a, g.next(1))
	ingestFiles(t, data, a, b)
	checkStoredOnce(t, data, g.all)
}

// TestIngestIdentityOldState: a store written before the identity key
// records only the absolute path (as given, symlinks not resolved). A
// file whose old key matches its path and whose checksum still matches
// resumes as before; through the same symlink too; one rewritten since
// is stored whole.
func TestIngestIdentityOldState(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	app := filepath.Join(dir, "app.log")
	lnk := filepath.Join(dir, "link.log")
	other := filepath.Join(dir, "other.log")
	var g lineGen
	writeFile(t, app, g.next(3))
	if err := os.Symlink("app.log", lnk); err != nil {
		t.Fatal(err)
	}
	var o lineGen
	o.n = 1000
	writeFile(t, other, o.next(2))
	writeOldState(t, data, app, app, 0)
	writeOldState(t, data, other, other, 0)

	appendFile(t, app, g.next(2))
	stderr := ingestFiles(t, data, app)
	if !strings.Contains(stderr, "resuming after the") {
		t.Errorf("old path-keyed state did not resume: %q", stderr)
	}
	checkStoredOnce(t, data, append(slices.Clone(g.all), o.all...))

	// Rewritten: stored whole (the old lines stay stored).
	writeFile(t, other, o.next(3))
	ingestFiles(t, data, other)
	checkStoredOnce(t, data, append(slices.Clone(g.all), o.all...))

	// An old store that recorded the symlink's path resumes through it.
	data2 := filepath.Join(dir, "data2")
	var h lineGen
	h.n = 2000
	writeFile(t, app, h.next(2))
	writeOldState(t, data2, lnk, app, 0)
	appendFile(t, app, h.next(1))
	ingestFiles(t, data2, lnk)
	checkStoredOnce(t, data2, h.all)
}

// writeOldState stores file's lines after its first from bytes and its
// progress as a hay ingest from before the identity key did: one source
// keyed by filepath.Abs(path) (path may be a symlink to file).
func writeOldState(t *testing.T, data, path, file string, from int) {
	t.Helper()
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stream := st.Stream(ingest.Labels{}.With("source", filepath.Base(path)).String())
	var b store.Batch
	for i, l := range strings.SplitAfter(string(content[from:]), "\n") {
		if l != "" {
			b.Entries = append(b.Entries, store.Entry{Time: int64(i), Stream: stream, Line: []byte(strings.TrimSuffix(l, "\n"))})
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chk, err := sourceCheck(f, content[:min(len(content), store.CheckLen)], int64(len(content)))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := filepath.Abs(path)
	b.Sources = []store.Source{{Key: key, Offset: int64(len(content)), Check: chk}}
	if err := st.Append(&b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestIngestIdentityStaleKey: the keys of one file can disagree: its
// identity key is behind when a later run recorded the file under another
// identity (the device number changed, then changed back) and the path.
// Both match the file's checksum; resuming from the identity's offset
// stored the bytes in between again. The furthest match wins.
func TestIngestIdentityStaleKey(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	app := filepath.Join(dir, "app.log")
	var g lineGen
	writeFile(t, app, g.next(3))
	ingestFiles(t, data, app) // identity and path at 3 lines
	st0, err := os.Stat(app)
	if err != nil {
		t.Fatal(err)
	}
	appendFile(t, app, g.next(2))
	// The 2 lines stored by a run that recorded the path only.
	writeOldState(t, data, app, app, int(st0.Size()))
	appendFile(t, app, g.next(1))
	ingestFiles(t, data, app)
	checkStoredOnce(t, data, g.all)
}

// identityKey is the Source key hay ingest records a file's progress
// under, by its identity: "inode:DEV:INO" (decimal) of the file path
// names, symlinks followed. It is part of the store's format (see
// store.Source), written out here rather than taken from ingest.go.
func identityKey(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("inode:%d:%d", uint64(sys.Dev), uint64(sys.Ino))
}

// TestIngestIdentityFIFO: a named pipe has no identity to resume by; each
// ingest stores what it reads, as before.
func TestIngestIdentityFIFO(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	var g lineGen
	text := g.next(3)
	want := slices.Clone(g.all)
	for range 2 {
		done := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString(text)
				f.Close()
			}
			done <- err
		}()
		ingestFiles(t, data, fifo)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	checkStoredOnce(t, data, append(want, want...))
}

// TestIngestIdentityHelp: --help says how a file is recognised.
func TestIngestIdentityHelp(t *testing.T) {
	out, _, stderr := hayInProcessStderr(t, "ingest", "--help")
	if help := string(out) + stderr; !strings.Contains(help, "device and inode") || !strings.Contains(help, "symlink") {
		t.Errorf("hay ingest --help does not say how resuming knows a file:\n%s", help)
	}
}
