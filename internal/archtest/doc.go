// Package archtest holds the test that keeps Haystack's package layering:
// imports go downward in the table of docs/ARCHITECTURE.md, so the
// kernel never depends on the store, the store never on the query
// language, and only cmd/hay sees everything. It has no code of its own.
package archtest
