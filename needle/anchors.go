package needle

//go:generate go run ./internal/mkrank -o rank_table.go ../testdata/loghub/Apache_2k.log ../testdata/loghub/HDFS_2k.log ../testdata/loghub/Hadoop_2k.log ../testdata/loghub/Linux_2k.log ../testdata/loghub/OpenSSH_2k.log ../testdata/loghub/Spark_2k.log ../testdata/loghub/Windows_2k.log ../testdata/loghub/Zookeeper_2k.log

// chooseAnchors picks the needle offsets whose bytes the prefilter
// compares: a pair compared everywhere, in increasing order, then two more
// compared only where the pair matches (see scanArgs). needle is already
// lower-cased when fold is set.
//
// First and last bytes are a poor default in logs: " timeout" starts with a
// space and "status=50" ends in a digit. Instead the rarest byte (by
// byteFreq, measured on real logs) is the first anchor and the rarest byte
// of a different value the second, so the pair's expected candidate rate is
// as low as the needle allows. Two guards:
//
//   - Structural punctuation ("=", "_", ":", quotes, brackets...) recurs in
//     fixed patterns in key=value and JSON logs: "_id=" appears in both
//     trace_id= and span_id=, so an anchor pair taken from it matches on every
//     such key. A pair of two structural bytes is penalised, so a letter or
//     digit beside them is preferred.
//   - A pair at distance 1 or 2 is often one common bigram (the rare 'b'
//     and 'y' of "reset by peer" meet in every "rx_bytes="), so such pairs
//     cost 4x and 2x: a wider pair of slightly commoner bytes wins.
//
// The Loghub sample is mostly plain text, where '"' or '{' are rare; in
// JSON logs they are a few percent of all bytes. So structural punctuation
// never costs less than structuralFloor.
//
// For a fold search a letter costs the frequency of both its cases.
//
// The second pair is simply the two rarest of the remaining bytes: by then
// the haystack is known to hold the first pair, so only what the other
// bytes add matters.
func chooseAnchors(needle []byte, fold bool) [4]int {
	m := len(needle)
	switch m {
	case 1:
		return [4]int{0, 0, 0, 0}
	case 2:
		return [4]int{0, 1, 0, 1}
	}
	cost := func(i int) uint64 {
		c := needle[i]
		f := uint64(byteFreq[c])
		if fold && isLowerLetter(c) {
			f += uint64(byteFreq[c-0x20])
		}
		if isStructural(c) {
			f = max(f, structuralFloor)
		}
		return f
	}
	// The first anchor: the rarest byte, the last occurrence on ties (the
	// end of a needle tends to be more specific than its start).
	i1 := 0
	for i := 1; i < m; i++ {
		if cost(i) <= cost(i1) {
			i1 = i
		}
	}
	// The second: minimise the pair's cost with the guards above.
	i2, best2 := -1, uint64(0)
	for i := 0; i < m; i++ {
		if i == i1 {
			continue
		}
		c := cost(i)
		if needle[i] == needle[i1] {
			c *= 64 // the same byte twice tells the prefilter little more
		}
		if isStructural(needle[i]) && isStructural(needle[i1]) {
			c *= 16
		}
		switch d := i - i1; {
		case d == 1 || d == -1:
			c *= 4 // "by" in "reset by peer" is also in every "rx_bytes="
		case d == 2 || d == -2:
			c *= 2
		}
		if i2 < 0 || c < best2 {
			i2, best2 = i, c
		}
	}
	if i1 > i2 {
		i1, i2 = i2, i1
	}
	// The second pair: the rarest remaining bytes, the last on ties.
	i3, i4 := -1, -1
	for i := 0; i < m; i++ {
		if i == i1 || i == i2 {
			continue
		}
		switch {
		case i3 < 0 || cost(i) <= cost(i3):
			i3, i4 = i, i3
		case i4 < 0 || cost(i) <= cost(i4):
			i4 = i
		}
	}
	if i4 < 0 { // m == 3: one byte left
		i4 = i3
	}
	return [4]int{i1, i2, i3, i4}
}

// structuralFloor is the least frequency (parts per million) assumed for
// structural punctuation: about what '"' reaches in JSON logs.
const structuralFloor = 30000

// isStructural reports whether c is punctuation that structured log formats
// (key=value, JSON, logfmt, paths) repeat in fixed patterns.
func isStructural(c byte) bool {
	switch c {
	case '=', '_', ':', '"', '\'', '{', '}', '[', ']', ',', '.', '/', '-', ' ', '\t':
		return true
	}
	return false
}
