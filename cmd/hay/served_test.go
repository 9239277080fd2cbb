package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckNotServedSymlink: a store reached through a symlink to a
// served tenant's directory is that tenant, and refused (the parent of
// the path as given was checked; review E1).
func TestCheckNotServedSymlink(t *testing.T) {
	data := t.TempDir()
	tenant := filepath.Join(data, "fake")
	if err := os.Mkdir(tenant, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(data) // as hay serve's lockDataDir
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := checkNotServed("ingest", tenant); err == nil {
		t.Fatal("the direct path is not refused: the test setup is wrong")
	}
	// The served directory itself is no store to write either.
	if _, err := checkNotServed("ingest", data); err == nil || !strings.Contains(err.Error(), "is the data directory of a running hay serve") {
		t.Errorf("hay ingest --data <the served directory>: %v", err)
	}
	link := filepath.Join(t.TempDir(), "logs")
	if err := os.Symlink(tenant, link); err != nil {
		t.Fatal(err)
	}
	if _, err := checkNotServed("ingest", link); err == nil {
		t.Errorf("hay ingest --data %s (a symlink to %s) is not refused while serve locks %s", link, tenant, data)
	}
}

// TestCheckNotServedHoldsLock: the check holds a shared lock on the data
// directory until the command ends, so a hay serve started meanwhile
// fails at once instead of answering that tenant 500 while ingest holds
// its store (the check was a probe that let go; review E2).
func TestCheckNotServedHoldsLock(t *testing.T) {
	data := t.TempDir()
	tenant := filepath.Join(data, "fake")
	if err := os.Mkdir(tenant, 0o755); err != nil {
		t.Fatal(err)
	}
	release, err := checkNotServed("ingest", tenant)
	if err != nil {
		t.Fatal(err)
	}
	// ingest now runs (for minutes, reading stdin); serve starts:
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		t.Errorf("hay serve took %s while a checked hay ingest was writing its tenant", data)
	}
	release()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Errorf("hay serve cannot take %s after ingest ended: %v", data, err)
	}
}
