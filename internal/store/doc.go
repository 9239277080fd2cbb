// Package store is Haystack's data directory: a write-ahead log, an
// in-memory head, immutable segment files and the manifest that ties them
// together.
//
// # Layout
//
//	DIR/
//	  LOCK              flock'ed by the one writer (hay ingest); readers take no lock
//	  MANIFEST          live segments, source progress, WAL start, the STREAMS length it covers
//	  STREAMS           the stream table, append-only (streamfile.go)
//	  MANIFEST.tmp      only while the manifest is being replaced
//	  wal/<seq>.wal     write-ahead log files, seq = 16 hex digits
//	  segments/<seq>.seg immutable segment files (package segment)
//
// # Write path
//
// Ingest hands the store batches (about 1 MiB of entries plus the input
// position they reach). Append writes a batch as one WAL record (length,
// CRC-32C, payload; see wal.go), adds its entries to the head, and fsyncs
// the WAL when FsyncInterval has passed or FsyncBytes are unsynced. When
// the head reaches HeadBytes it is flushed on a background goroutine while
// a new head fills (one flush at a time; Flush and Close flush in the
// foreground). An entry's structured metadata (Entry.Attrs, package
// attrs' encoding) goes with it through the WAL (record kind 2, WAL
// version 3), the head, the segment (its block's attrs section) and
// compaction; it is not part of the stream. The steps of a flush:
//
//  1. close the current WAL file and start the next one, so the head is
//     exactly the WAL files below the new one;
//  2. write the head as a segment (temp file, fsync, rename, directory
//     fsync, all inside segment.Writer.Commit);
//  3. append the streams defined since the last manifest to STREAMS
//     (fsync), then replace MANIFEST (MANIFEST.tmp, fsync, rename,
//     directory fsync) with one that lists the segment, the length of
//     STREAMS, every source's progress as of step 1, and WALStart = the
//     new WAL file's number;
//  4. delete the WAL files below WALStart.
//
// If a flush fails the store refuses further work (a later flush would
// cover WAL files whose entries are in no segment); the next Open recovers.
//
// Every file the writer (Store, Writer, Compact, RepairWAL) creates,
// writes, renames, removes or fsyncs goes through a handle on DIR
// (dirfs.Dir, an os.Root whose errors name files in full) opened once, at
// Open, never a path; segment files too, through segment.CreateIn/OpenIn: if DIR is renamed and another store put in
// its place while a flush or compaction runs, the writes go on in the
// store's own directory, under its new name, and the other store is not
// touched. CheckDir still fails such a store's appends (they would be
// lost to a restart that reads DIR), and a flush that sees it fails.
//
// A crash between any two steps leaves a directory that Open repairs: an
// unlisted segment is deleted (its entries are still in the WAL), WAL files
// below WALStart are deleted (their entries are in a listed segment), the
// rest of the WAL is replayed, and a torn record at the end of the last WAL
// file (what a crash mid-write leaves) is cut off. So after kill -9 at any
// moment the store holds an exact prefix of what was appended. Damage no
// crash leaves (a bad record elsewhere, a short, cut or missing WAL file
// that is not the last: each WAL header records its predecessor's length)
// makes Open fail naming the file, instead of dropping acknowledged entries.
//
// # Compaction
//
// Compact (hay compact) rewrites segments into CompactSegment's layout:
// smaller blocks at a stronger zstd level, which ingest cannot afford,
// merging runs of consecutive segments into one of up to MergeBytes (fewer
// segments to open and probe per search); later calls merge the small
// segments earlier calls left, once they add up to half of MergeBytes
// (planMerges). A group of runs is written as
// new files, one manifest replacement swaps them in (SegmentMeta.Compacted
// marks them), then the old files are deleted. A crash leaves either the old or the new files listed, and Open
// deletes the unlisted ones, as after a crashed flush. Readers take no
// lock, so one may have read the manifest before the swap and find a
// segment deleted: OpenSnapshotRange then starts over with the new
// manifest.
//
// # Streams
//
// A stream is a set of labels in canonical form ({a="x", b="y"}) with a
// uint32 id, allocated in order of first use. A new stream's definition
// rides in the WAL record of its first entries; flushes append the
// definitions to STREAMS, of which each manifest names the prefix it
// covers (manifests before STREAMS, version 1, carried the whole table
// and were rewritten with it at every flush: 16 MB at 200,000 streams).
// A crash between the append and the manifest leaves bytes past that
// prefix, which readers ignore and Open cuts off.
//
// # Re-running ingest
//
// Each batch of a file input carries Sources: the number of bytes of the
// file consumed by this and earlier batches and the CRC-32C of its first
// min(offset, 1 KiB) bytes followed by the 1 KiB before the offset, keyed
// by the file's identity ("inode:DEV:INO", symlinks followed) and again
// by its absolute path with symlinks resolved (stores written before the
// identity key have the path as given only). Because the progress is in
// the same record as the entries, it is durable exactly when they are. A
// re-run of `hay ingest FILE` looks up the identity and the paths: the
// furthest offset within the file whose checksum still matches gives the
// prefix to skip; none (a truncated, rewritten or new file, an inode
// reused) and the whole file is ingested as new content. So an
// interrupted ingest is finished by running the same command again, a
// growing log file can be ingested repeatedly to pick up what was
// appended, and a file reached through a symlink or hard link, or renamed
// by logrotate, is not stored twice. Standard input and pipes have no
// identity and are never resumed. One limit: a last line without "\n"
// counts as ingested; if the file later grows that line, the continuation
// becomes an entry of its own.
//
// # Concurrent appends (Writer)
//
// `hay serve` shares a Store between HTTP pushes through a Writer: Append
// hands a batch of labelled entries to one committer goroutine, which
// takes every batch waiting at that moment, writes each as WAL records
// (one write call per record, at most 32 MiB each), fsyncs once, and only
// then acknowledges them all (group commit). A failed write or fsync fails
// every batch of the group and the Writer for good: after a failed fsync
// the kernel may have dropped the dirty pages, so a retry could report
// success for data that is gone. Writer.View gives searches the committed
// segments, the head being flushed and the live head (block headers
// copied, so a view sees a fixed prefix while appends go on), with no
// reopen and no WAL re-read.
//
// # Memory
//
// A writer holds at most two heads of HeadBytes (raw bytes plus 16 bytes
// per entry, 32 MiB by default): the one filling and the one being flushed.
// Add one batch and its WAL record buffer (about 1 MiB each) and what
// segment.Writer needs for one block while flushing. Recovery
// replays one WAL file at a time into the head; the WAL below WALStart is
// never more than about HeadBytes plus one batch.
package store
