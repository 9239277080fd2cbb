package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/snappy"

	"haystack/internal/logtest"
	"haystack/internal/server"
)

// benchServer is a `hay serve` child process the HTTP benchmarks measure,
// so its CPU time is the server's alone.
type benchServer struct {
	cmd *exec.Cmd
	url string
}

func startBenchServer(dir string, extra ...string) (*benchServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, extra...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	br := bufio.NewReader(stderr)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("hay serve did not start: %w", err)
		}
		if _, rest, ok := strings.Cut(line, "listening on "); ok {
			url, _, _ := strings.Cut(rest, " ")
			go io.Copy(os.Stderr, br)
			return &benchServer{cmd: cmd, url: url}, nil
		}
	}
}

// cpu is the server's user+system CPU time so far, from /proc.
func (b *benchServer) cpu() (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ is 100 on Linux
}

func (b *benchServer) stop() error {
	b.cmd.Process.Signal(os.Interrupt)
	return b.cmd.Wait()
}

// pushBodies pre-encodes n bodies of batch lines each from the generated
// corpus (8 streams), as protobuf+snappy or JSON, with times in the hour
// before now, returning them with their line and byte counts.
func pushBodies(n, batch int, format string, seed int64) (bodies [][]byte, lines, bytesN int64) {
	g := logtest.NewGenerator(logtest.Config{Seed: seed, Lines: int64(n * batch), Start: time.Now().Add(-time.Hour), Span: time.Hour})
	var buf []byte
	for range n {
		byStream := map[int]*server.PushStream{}
		var order []int
		for range batch {
			line, st, ts := g.Next(buf[:0])
			buf = line
			ps := byStream[st]
			if ps == nil {
				s := g.Stream(st)
				ps = &server.PushStream{Labels: fmt.Sprintf(`{app=%q, host=%q}`, s.App, s.Host)}
				byStream[st] = ps
				order = append(order, st)
			}
			ps.Entries = append(ps.Entries, server.PushEntry{Time: ts.UnixNano(), Line: string(line)})
			lines++
			bytesN += int64(len(line))
		}
		var streams []server.PushStream
		for _, st := range order {
			streams = append(streams, *byStream[st])
		}
		if format == "json" {
			var b bytes.Buffer
			b.WriteString(`{"streams":[`)
			for i, s := range streams {
				if i > 0 {
					b.WriteByte(',')
				}
				ls := strings.NewReplacer(`{`, `{"`, `=`, `":`, `, `, `,"`).Replace(s.Labels)
				fmt.Fprintf(&b, `{"stream":%s,"values":[`, ls)
				for j, e := range s.Entries {
					if j > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `["%d",%s]`, e.Time, strconv.Quote(e.Line))
				}
				b.WriteString("]}")
			}
			b.WriteString("]}")
			bodies = append(bodies, b.Bytes())
		} else {
			bodies = append(bodies, snappy.Encode(nil, server.EncodePushProto(streams)))
		}
	}
	return bodies, lines, bytesN
}

func pushBody(client *http.Client, url, format string, body []byte) error {
	ct := "application/x-protobuf"
	if format == "json" {
		ct = "application/json"
	}
	resp, err := client.Post(url+"/loki/api/v1/push", ct, bytes.NewReader(body))
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("push: %s", resp.Status)
	}
	return nil
}

func runBenchPush(args []string) error {
	fs := flag.NewFlagSet("bench push", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: hay bench push [--clients N] [--batch N] [--duration D] [--format protobuf|json] [--data DIR]")
		fmt.Fprintln(fs.Output(), "\nStarts hay serve as a child process on a free port and pushes generated lines")
		fmt.Fprintln(fs.Output(), "to /loki/api/v1/push from N clients for --duration; prints lines/s and MB/s,")
		fmt.Fprintln(fs.Output(), "overall and per server core.\n\nFlags:")
		fs.PrintDefaults()
	}
	clients := fs.Int("clients", 4, "concurrent pushing clients")
	batch := fs.Int("batch", 1000, "lines per push request")
	duration := fs.Duration("duration", 10*time.Second, "how long to push")
	format := fs.String("format", "protobuf", "body format: protobuf (snappy) or json")
	dir := fs.String("data", "", "data directory for the server (default: a temporary one, removed after)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "protobuf" && *format != "json" {
		return fmt.Errorf("%w: --format must be protobuf or json", errUsage)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "hay-bench-push-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = filepath.Join(d, "data")
	}
	const distinct = 64
	bodies, blines, bbytes := pushBodies(distinct, *batch, *format, 1)
	srv, err := startBenchServer(*dir)
	if err != nil {
		return err
	}
	defer srv.stop()
	cpu0, err := srv.cpu()
	if err != nil {
		return err
	}
	var reqs atomic.Int64
	var firstErr error
	var once sync.Once
	start := time.Now()
	deadline := start.Add(*duration)
	var wg sync.WaitGroup
	for c := range *clients {
		wg.Go(func() {
			client := &http.Client{}
			for i := c; time.Now().Before(deadline); i += *clients {
				if err := pushBody(client, srv.url, *format, bodies[i%distinct]); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				reqs.Add(1)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cpu1, _ := srv.cpu()
	if firstErr != nil {
		return firstErr
	}
	n := reqs.Load()
	lines := float64(n) * float64(blines) / distinct
	mb := float64(n) * float64(bbytes) / distinct / 1e6
	cores := (cpu1 - cpu0).Seconds() / wall.Seconds()
	fmt.Printf("push %s: %d clients x %d-line batches for %s: %d requests\n", *format, *clients, *batch, wall.Round(time.Millisecond), n)
	fmt.Printf("  %.0f lines/s, %.1f MB/s (line bytes); server CPU %.2f cores\n", lines/wall.Seconds(), mb/wall.Seconds(), cores)
	if cores > 0 {
		fmt.Printf("  per server core: %.0f lines/s, %.1f MB/s\n", lines/wall.Seconds()/cores, mb/wall.Seconds()/cores)
	}
	return nil
}
