package logtest

// DefaultNeedles returns the 25 needles of the kernel benchmarks, ordered
// by how many lines of the default corpus, Generate(Config{Lines:
// 100_000}), contain them:
//
//	needle                              lines  share
//	"needle-absent-7c3e9a"                  0  0%       absent, rare bytes
//	"Qz"                                    0  0%       absent, short
//	"status=999"                            0  0%       absent, common bytes at both ends
//	"panic:"                                3  0.003%   incident
//	"0008af6b7c3108a65d4abc38b75170bf"      4  0.004%   one trace id
//	"OutOfMemoryError"                      6  0.006%   incident
//	"no space left on device"              34  0.034%   incident
//	"Caused by:"                           65  0.065%
//	"connection refused"                  131  0.131%   incident burst
//	" the error "                         147  0.147%   spaces at both ends
//	"Exception"                           226  0.226%
//	"status=50"                           343  0.343%   5xx in logfmt
//	"ERROR"                              1179  1.2%
//	" timeout"                           1449  1.4%
//	"timeout"                            1495  1.5%
//	"WARN"                               2744  2.7%
//	"DEBUG"                              9020  9.0%
//	"/healthz"                          10931  10.9%
//	"level=info"                        19067  19.1%
//	" the "                             20328  20.3%
//	"GET"                               24916  24.9%
//	"user_id="                          28180  28.2%    ends in the common "_id="
//	"INFO"                              37580  37.6%
//	"trace_id"                          40333  40.3%
//	"user"                              48296  48.3%
//
// The counts are those of bytes.Contains per line; TestDefaultNeedles
// recomputes them and fails if they drift, so a change to the generator
// that moves them must update this table.
func DefaultNeedles() []string {
	return []string{
		"needle-absent-7c3e9a",
		"Qz",
		"status=999",
		"panic:",
		"0008af6b7c3108a65d4abc38b75170bf",
		"OutOfMemoryError",
		"no space left on device",
		"Caused by:",
		"connection refused",
		" the error ",
		"Exception",
		"status=50",
		"ERROR",
		" timeout",
		"timeout",
		"WARN",
		"DEBUG",
		"/healthz",
		"level=info",
		" the ",
		"GET",
		"user_id=",
		"INFO",
		"trace_id",
		"user",
	}
}
