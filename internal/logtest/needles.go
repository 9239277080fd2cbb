package logtest

// DefaultNeedles returns the 25 needles of the kernel benchmarks, ordered
// by how many lines of the default corpus, Generate(Config{Lines:
// 100_000}), contain them:
//
//	needle                               lines  share
//	"needle-absent-7c3e9a"                   0  0%         absent, rare bytes
//	"Qz"                                     0  0%         absent, short
//	"status=999"                             0  0%         absent, common bytes at both ends
//	"OutOfMemoryError"                       8  0.008%     incident
//	"panic:"                                 9  0.009%     incident
//	"b56d31df5793f1e824d30c2802eee244"      10  0.010%     one trace id (one request's lines)
//	"no space left on device"               32  0.032%     incident
//	"Caused by:"                            45  0.045%
//	"connection refused"                    59  0.059%     incident burst
//	" the error "                           77  0.077%     spaces at both ends
//	"Exception"                            168  0.168%
//	"status=50"                            275  0.275%     5xx in logfmt
//	" timeout"                             734  0.734%
//	"timeout"                              747  0.747%
//	"ERROR"                               1055  1.1%
//	"WARN"                                2668  2.7%
//	" the "                               8562  8.6%
//	"DEBUG"                               8970  9.0%
//	"/healthz"                           16376  16.4%
//	"level=info"                         19256  19.3%
//	"user_id="                           33362  33.4%      ends in the common "_id="
//	"GET"                                35411  35.4%
//	"INFO"                               38010  38.0%
//	"trace_id"                           38693  38.7%
//	"user"                               49770  49.8%
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
		"b56d31df5793f1e824d30c2802eee244",
		"no space left on device",
		"Caused by:",
		"connection refused",
		" the error ",
		"Exception",
		"status=50",
		" timeout",
		"timeout",
		"ERROR",
		"WARN",
		" the ",
		"DEBUG",
		"/healthz",
		"level=info",
		"user_id=",
		"GET",
		"INFO",
		"trace_id",
		"user",
	}
}
