package logtest

import (
	"math/bits"
	"strconv"
)

// Request lifecycles and the populations identifiers come from.
//
// Real services do not log one line per request with fresh identifiers:
// a request is received, authenticated, queries a database, calls an
// upstream service and completes, and each of those lines carries the same
// request id and trace id, while a span covers one operation (a few
// lines). Many requests are in flight at once, so their lines interleave.
// The users behind requests come from a bounded population in which a few
// (integrations, bots, load tests) are far more active than the long tail,
// and so do client addresses (NAT gateways and crawlers are hot). Internal
// traffic comes from the handful of pods a service talks to. This file
// models exactly that, and nothing more: every identifier still comes from
// the PCG, only their reuse follows the structure of real traffic.

// Populations.
const (
	// numUsers is the user population: a mid-sized product's active users.
	numUsers = 50_000
	// numClientIPs is the public client address population a service
	// sees in a day behind its load balancer.
	numClientIPs = 4_000
	// zipfOffset flattens the very top of the Zipf law (Zipf–Mandelbrot
	// with exponent 1, weight 1/(rank+zipfOffset)): the hottest user or
	// address makes about 5% of the traffic, not the 9% of a pure Zipf law
	// over 50,000, and the next ones follow closely, as a few heavy API
	// clients do.
	zipfOffset = 2
	// numPeers is the number of internal (10.x) addresses a service talks
	// to or is called from: its callers' and dependencies' pods.
	numPeers = 16
	// numTenants is the number of customer organisations the users
	// belong to (a B2B product: about 100 users each).
	numTenants = 500
	// numTraceRing is how many recently started traces a new request can
	// join (a request crossing services carries its caller's trace id).
	numTraceRing = 16
)

// zipfCDF is the cumulative weight table of a Zipf–Mandelbrot law over
// ranks 0..len-1: cum[i] is the sum of the integer weights of ranks 0..i.
type zipfCDF []uint64

func newZipfCDF(n int) zipfCDF {
	z := make(zipfCDF, n)
	var c uint64
	for i := range z {
		c += (1 << 32) / uint64(i+zipfOffset)
		z[i] = c
	}
	return z
}

// rank maps a uniform random word to a rank (inverse CDF by binary
// search; integers only, so every platform draws the same ranks).
func (z zipfCDF) rank(u uint64) int {
	x, _ := bits.Mul64(u, z[len(z)-1])
	lo, hi := 0, len(z)-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if z[m] <= x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// mix is the splitmix64 finalizer: it turns a population rank and a
// per-Generator salt into the identifier's bits, so a population costs no
// memory and the same rank always renders the same id.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// request is one in-flight request: the identifiers all its lines share.
type request struct {
	id       [36]byte // request_id, a UUID
	objA     uint64   // what the request is about: an order or payment
	objB     uint64   // (both words make its UUID)
	trace    [32]byte // trace_id
	span     [16]byte // span_id of the current operation
	user     uint32   // user rank in the population
	client   uint32   // client address: peer index if internal, else public rank
	internal bool     // the client is another service (a 10.x peer)
	thread   uint64   // java: the worker thread that serves the request
	method   uint8    // index in methods
	path     uint8    // index in paths and routes
	ua       uint8    // the client's user agent, index in userAgents
	left     int      // lines still to log; the last one is the access line
	spanLeft int      // lines left in the current span
}

// Request lines: a line either belongs to one of its stream's in-flight
// requests, whose last line is the access line ("GET /x 200 12ms"), or is
// a request that logs only its access line (probes, metrics scrapes,
// static files, simple reads). singleChance (per 1024) is set so that
// access lines keep their share of about 41% of ordinary lines:
// 0.292 + 0.708/6 (the mean lifecycle being 6 lines).
const singleChance = 299

// burstChance (per 1024) is the chance that a stream's next request line
// is the same request's again: a handler runs, logging, until it blocks on
// I/O (a query, an upstream call), and only then do other requests' lines
// come in between. Half the lines end in such a wait, so a lifecycle of 6
// lines comes in about 3 bursts.
const burstChance = 512

// newRequest starts a request in stream s.
func (g *Generator) newRequest(r *request, s *stream) {
	// Lifecycles of 2 to 10 lines: received, auth, a query or two, an
	// upstream call, completed.
	r.left = 2 + g.intn(9)
	g.startRequest(r, s)
}

// startRequest draws a request's identifiers.
func (g *Generator) startRequest(r *request, s *stream) {
	appendUUID(r.id[:0], g.src.Uint64(), g.src.Uint64())
	// One request handles one resource: its path, its query and its
	// messages name the same order or payment.
	r.objA, r.objB = g.src.Uint64(), g.src.Uint64()
	u := g.src.Uint64()
	r.thread = g.src.Uint64()
	r.method = uint8(g.tb.methodTable.pick(g.src.Uint64()))
	r.path = uint8(g.tb.pathTable.pick(g.src.Uint64()))
	r.ua = uint8(g.tb.uaTable.pick(g.src.Uint64()))
	if u>>54 < 400 {
		// Called by another service: the caller's trace and user, from
		// one of the pods of this service's neighbourhood.
		t := &g.traceRing[u&(numTraceRing-1)]
		r.trace = t.trace
		r.user = t.user
		r.internal = true
		r.client = uint32((u >> 8) % numPeers)
	} else {
		appendHex(r.trace[:0], g.src.Uint64(), 16)
		appendHex(r.trace[16:16], g.src.Uint64(), 16)
		r.user = uint32(g.tb.userCDF.rank(g.src.Uint64()))
		// Half the external requests show the ingress or load balancer
		// pod's address, half the client's (X-Forwarded-For).
		if (u>>53)&1 == 0 {
			r.internal = true
			r.client = uint32((u >> 8) % numPeers)
		} else {
			r.internal = false
			r.client = uint32(g.tb.clientCDF.rank(g.src.Uint64()))
		}
		t := &g.traceRing[g.traceNext&(numTraceRing-1)]
		g.traceNext++
		t.trace = r.trace
		t.user = r.user
	}
	r.spanLeft = 0
}

// nextRequestLine advances r to its next line: a new span when the
// current one has covered its 1 to 4 lines.
func (g *Generator) nextRequestLine(r *request) {
	if r.spanLeft == 0 {
		appendHex(r.span[:0], g.src.Uint64(), 16)
		r.spanLeft = 1 + g.intn(4)
	}
	r.spanLeft--
	r.left--
}

// poolSize is the number of requests stream i has in flight. By Little's
// law concurrency is request rate times latency, so it follows the
// stream's weight 4/(i+4): 64 for the busiest stream, 23 for the eighth,
// and a floor of 4 for the quiet tail of a config with many streams.
func poolSize(i int) int { return max(4, 256/(i+4)) }

// stream returns stream i, setting up its peers and in-flight requests on
// first use (a config may have 65,536 streams, most of them quiet).
func (g *Generator) stream(i int) *stream {
	s := &g.streams[i]
	if s.reqs != nil {
		return s
	}
	for j := range s.peers {
		s.peers[j] = g.peerIP()
	}
	appendHex(s.build[:0], g.src.Uint64(), 8)
	s.version = append(s.version, "v1."...)
	s.version = strconv.AppendUint(s.version, g.uintn(40), 10)
	s.version = append(s.version, '.')
	s.version = strconv.AppendUint(s.version, g.uintn(10), 10)
	s.region = g.intn(len(regions))
	s.zone = byte('a' + g.intn(3))
	s.rot = uint32(g.uintn(1 << 16))
	// The logger's field order: the more common keys tend to come first
	// (request-scoped fields are set up early), shuffled a little.
	for j := range s.keys {
		s.keys[j] = uint8(j)
	}
	for j := len(s.keys) - 1; j > 0; j-- {
		k := max(0, j-1-g.intn(4))
		s.keys[j], s.keys[k] = s.keys[k], s.keys[j]
	}
	s.reqs = make([]request, poolSize(i))
	s.last = -1
	for j := range s.reqs {
		r := &s.reqs[j]
		g.newRequest(r, s)
		// Already in flight: part-way through their lifecycle.
		r.left = 1 + g.intn(r.left)
	}
	return s
}

// appendUser renders the current request's user id.
func (g *Generator) appendUser(dst []byte) []byte {
	return strconv.AppendUint(dst, g.userID(g.rq.user), 10)
}

// userID maps a user rank to its id: 6 or 7 digits, scattered by the
// Generator's salt so ranks and ids do not correlate.
func (g *Generator) userID(rank uint32) uint64 {
	return 100_000 + mix(g.userSalt+uint64(rank))%9_900_000
}

// appendClientIP renders the current request's client address.
func (g *Generator) appendClientIP(dst []byte) []byte {
	if g.rq.internal {
		return appendIPv4(dst, g.cur.peers[g.rq.client])
	}
	return appendIPv4(dst, g.publicIP(g.rq.client))
}

// appendPeerIP renders one of the current stream's internal peers.
func (g *Generator) appendPeerIP(dst []byte) []byte {
	return appendIPv4(dst, g.cur.peers[g.uintn(numPeers)])
}

// publicIP maps a client rank to a public IPv4 address (first octet 11 to
// 222, last 1 to 254).
func (g *Generator) publicIP(rank uint32) uint32 {
	v := mix(g.ipSalt + uint64(rank))
	return uint32(11+(v&0xff)%212)<<24 | uint32((v>>8)&0xff)<<16 | uint32((v>>24)&0xff)<<8 | uint32(1+((v>>16)&0xff)%254)
}

// peerIP draws an internal pod address, 10.0.0-63.1-254.
func (g *Generator) peerIP() uint32 {
	u := g.src.Uint64()
	return 10<<24 | uint32(u&63)<<8 | uint32(1+((u>>16)&0xff)%254)
}

func appendIPv4(dst []byte, ip uint32) []byte {
	dst = strconv.AppendUint(dst, uint64(ip>>24), 10)
	dst = append(dst, '.')
	dst = strconv.AppendUint(dst, uint64(ip>>16&0xff), 10)
	dst = append(dst, '.')
	dst = strconv.AppendUint(dst, uint64(ip>>8&0xff), 10)
	dst = append(dst, '.')
	return strconv.AppendUint(dst, uint64(ip&0xff), 10)
}

// appendTenant renders the tenant of the current request's user: users
// belong to one organisation, so hot users make hot tenants.
func (g *Generator) appendTenant(dst []byte) []byte {
	t := mix(g.userSalt^0x74656e616e74+uint64(g.rq.user)) % numTenants
	dst = append(dst, "t-"...)
	return appendHex(dst, mix(g.userSalt+t), 6)
}

// appendSession renders the current request's session id: each user has
// a session on each of up to four devices, and the request comes from one.
func (g *Generator) appendSession(dst []byte) []byte {
	return appendHex(dst, mix(g.userSalt^0x73657373+(uint64(g.rq.user)<<2|g.rq.thread>>62)), 8)
}
