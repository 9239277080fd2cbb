package logtest

import "strconv"

// Stack traces: the continuation lines that follow an error line, queued in
// g.cont and handed out one per Next call.

var javaMethods = []string{
	"process", "handle", "execute", "apply", "call", "run", "invoke", "save",
	"findById", "lambda$submit$0", "doCharge", "reserve", "load", "send",
}

var goMethods = []string{"ServeHTTP", "handleCharge", "processBatch", "reserve", "load", "Do", "flush"}

func (g *Generator) startCont() {
	g.cont = g.cont[:0]
	g.contEnds = g.contEnds[:0]
	g.contNext = 0
}

func (g *Generator) endCont() { g.contEnds = append(g.contEnds, len(g.cont)) }

// javaTrace queues a Java stack trace: the exception, frames of the
// application then of the framework, and sometimes a cause.
func (g *Generator) javaTrace(si int, oom bool) {
	g.startCont()
	app := apps[si%len(apps)]
	if oom {
		g.cont = append(g.cont, "java.lang.OutOfMemoryError: Java heap space"...)
		g.endCont()
		g.cont = append(g.cont, "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)"...)
		g.endCont()
		g.cont = append(g.cont, "\tat java.base/java.util.HashMap.resize(HashMap.java:702)"...)
		g.endCont()
	} else {
		g.cont = g.appendTemplate(g.cont, g.tb.exceptionT[g.intn(len(g.tb.exceptionT))])
		g.endCont()
	}
	for range 1 + g.intn(3) {
		g.cont = g.appendAppFrame(g.cont, app)
		g.endCont()
	}
	n := 2 + g.intn(7)
	first := g.intn(len(javaFrames))
	for i := range n {
		g.cont = append(g.cont, "\tat "...)
		g.cont = append(g.cont, javaFrames[(first+i)%len(javaFrames)]...)
		g.endCont()
	}
	if !oom && g.chance(360) {
		g.cont = g.appendTemplate(g.cont, g.tb.causeT[g.intn(len(g.tb.causeT))])
		g.endCont()
		for range 1 + g.intn(3) {
			g.cont = append(g.cont, "\tat "...)
			g.cont = append(g.cont, javaFrames[g.intn(len(javaFrames))]...)
			g.endCont()
		}
		g.cont = append(g.cont, "\t... "...)
		g.cont = strconv.AppendUint(g.cont, 3+g.uintn(40), 10)
		g.cont = append(g.cont, " more"...)
		g.endCont()
	}
}

func (g *Generator) appendAppFrame(dst []byte, app string) []byte {
	class := javaClasses[g.intn(len(javaClasses))]
	dst = append(dst, "\tat com.example."...)
	dst = append(dst, app...)
	dst = append(dst, '.')
	dst = append(dst, class...)
	dst = append(dst, '.')
	dst = append(dst, javaMethods[g.intn(len(javaMethods))]...)
	dst = append(dst, '(')
	dst = append(dst, class...)
	dst = append(dst, ".java:"...)
	dst = strconv.AppendUint(dst, 20+g.uintn(600), 10)
	return append(dst, ')')
}

// goTrace queues the goroutine dump a Go panic prints.
func (g *Generator) goTrace(si int) {
	g.startCont()
	app := apps[si%len(apps)]
	g.cont = append(g.cont, "goroutine "...)
	g.cont = strconv.AppendUint(g.cont, 1+g.uintn(50000), 10)
	g.cont = append(g.cont, " [running]:"...)
	g.endCont()

	g.cont = append(g.cont, "github.com/example/"...)
	g.cont = append(g.cont, app...)
	g.cont = append(g.cont, "/internal/handler.(*Server)."...)
	g.cont = append(g.cont, goMethods[g.intn(len(goMethods))]...)
	g.cont = append(g.cont, '(')
	g.cont = g.appendPtrArgs(g.cont)
	g.cont = append(g.cont, ')')
	g.endCont()
	g.cont = append(g.cont, "\t/src/internal/handler/server.go:"...)
	g.cont = strconv.AppendUint(g.cont, 20+g.uintn(900), 10)
	g.cont = append(g.cont, " +0x"...)
	g.cont = appendHex(g.cont, g.src.Uint64(), 3)
	g.endCont()

	frames := [...][2]string{
		{"net/http.HandlerFunc.ServeHTTP", "\t/usr/local/go/src/net/http/server.go:2220 +0x29"},
		{"net/http.serverHandler.ServeHTTP", "\t/usr/local/go/src/net/http/server.go:3210 +0x8e"},
		{"net/http.(*conn).serve", "\t/usr/local/go/src/net/http/server.go:2092 +0x5d0"},
	}
	for _, f := range frames[g.intn(len(frames)):] {
		g.cont = append(g.cont, f[0]...)
		g.cont = append(g.cont, '(')
		g.cont = g.appendPtrArgs(g.cont)
		g.cont = append(g.cont, ')')
		g.endCont()
		g.cont = append(g.cont, f[1]...)
		g.endCont()
	}
	g.cont = append(g.cont, "created by net/http.(*Server).Serve in goroutine 1"...)
	g.endCont()
	g.cont = append(g.cont, "\t/usr/local/go/src/net/http/server.go:3360 +0x485"...)
	g.endCont()
}

func (g *Generator) appendPtrArgs(dst []byte) []byte {
	u := g.src.Uint64()
	dst = append(dst, "0xc000"...)
	dst = appendHex(dst, u, 6)
	dst = append(dst, ", {0x"...)
	dst = appendHex(dst, u>>24, 6)
	dst = append(dst, ", 0xc000"...)
	dst = appendHex(dst, u>>40, 6)
	return append(dst, '}')
}
