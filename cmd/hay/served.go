package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkNotServed refuses a command that writes to the store at dir when
// dir is a tenant of a running hay serve: serve holds an exclusive lock
// on its data directory (dir's parent) for its life, but it closes idle
// tenants (--max-open-tenants), releasing their stores' own locks, so the
// store's lock alone let hay ingest or hay compact take a served tenant;
// serve then answered that tenant with 500s until they ended. It holds a
// shared lock on the parent until release is called, so that a hay serve
// started meanwhile fails at once rather than meet the same conflict.
func checkNotServed(cmd, dir string) (release func(), err error) {
	release = func() {}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return release, nil // the store's own open reports it
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r // a symlink to a served tenant is that tenant
	}
	if d, served := lockShared(abs); served {
		// dir itself served: the data directory of tenant stores, not a
		// store; a store made in it would stop the server's next start.
		return release, fmt.Errorf("%s is the data directory of a running hay serve, which keeps each tenant's store in %s/<tenant>: push to the server, or give hay %s a tenant's directory once the server is stopped", dir, dir, cmd)
	} else if d != nil {
		d.Close()
	}
	parent := filepath.Dir(abs)
	f, served := lockShared(parent)
	if served {
		return release, fmt.Errorf("%s is a tenant of the hay serve running on %s (it locks that directory): push to the server instead (POST /loki/api/v1/push with X-Scope-OrgID: %s), or stop it before hay %s", dir, parent, filepath.Base(abs), cmd)
	}
	if f == nil {
		return release, nil
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// lockShared opens path and takes a shared lock on it, returning the file
// that holds it; served says an exclusive lock (hay serve's) is in the
// way. A path that cannot be opened or locked otherwise gives neither.
func lockShared(path string) (f *os.File, served bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, errors.Is(err, unix.EWOULDBLOCK)
	}
	return f, false
}
