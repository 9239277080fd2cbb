package store

// KnownStreams sets known[i] to whether the stream table holds a stream
// with canonical labels[i], and returns the table's size: every stream
// the store ever defined, including those of segments retention removed
// and of the head. It only reads. The server's per-tenant stream limit
// uses it to tell a push's new streams from existing ones.
func (w *Writer) KnownStreams(labels []string, known []bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, l := range labels {
		_, known[i] = w.s.streams[l]
	}
	return len(w.s.streamDef)
}
