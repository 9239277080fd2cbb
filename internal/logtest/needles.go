package logtest

// DefaultNeedles returns the 25 needles of the kernel benchmarks, ordered
// by how many lines of the default corpus, Generate(Config{Lines:
// 100_000}), contain them:
//
//	needle                              lines  share
//	"needle-absent-7c3e9a"                  0  0%       absent, rare bytes
//	"Qz"                                    0  0%       absent, short
//	"status=999"                            0  0%       absent, common bytes at both ends
//	"OutOfMemoryError"                      3  0.003%   incident
//	"panic:"                                8  0.008%   incident
//	"00487db3d21f42358aa1f28e00798ad1"     10  0.010%   one trace id (one request's lines)
//	"no space left on device"              44  0.044%   incident
//	"Caused by:"                           51  0.051%
//	"connection refused"                   91  0.091%   incident burst
//	" the error "                         150  0.150%   spaces at both ends
//	"Exception"                           202  0.202%
//	"status=50"                           362  0.362%   5xx in logfmt
//	"ERROR"                              1089  1.1%
//	" timeout"                           1403  1.4%
//	"timeout"                            1473  1.5%
//	"WARN"                               2626  2.6%
//	"DEBUG"                              9025  9.0%
//	"/healthz"                          11308  11.3%
//	"level=info"                        19274  19.3%
//	" the "                             20229  20.2%
//	"GET"                               25795  25.8%
//	"user_id="                          27761  27.8%    ends in the common "_id="
//	"INFO"                              37563  37.6%
//	"trace_id"                          39586  39.6%
//	"user"                              47809  47.8%
//
// The counts are those of bytes.Contains per line; TestDefaultNeedles
// recomputes them and fails if they drift, so a change to the generator
// that moves them must update this table.
func DefaultNeedles() []string {
	return []string{
		"needle-absent-7c3e9a",
		"Qz",
		"status=999",
		"OutOfMemoryError",
		"panic:",
		"00487db3d21f42358aa1f28e00798ad1",
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
