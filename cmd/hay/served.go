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
// serve then answered that tenant with 500s until they ended.
func checkNotServed(cmd, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil // the store's own open reports it
	}
	parent := filepath.Dir(abs)
	f, err := os.Open(parent)
	if err != nil {
		return nil
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("%s is a tenant of the hay serve running on %s (it locks that directory): push to the server instead (POST /loki/api/v1/push with X-Scope-OrgID: %s), or stop it before hay %s", dir, parent, filepath.Base(abs), cmd)
		}
		return nil
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return nil
}
