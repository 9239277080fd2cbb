package ingest_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"haystack/internal/ingest"
)

// The parsing half of `hay ingest`: frame lines, find each entry's time.
func Example() {
	input := "2015-07-29 17:41:44,747 - INFO  start\r\n" +
		`{"ts":1438191705.5,"msg":"json"}` + "\r\n" +
		"no timestamp here\n" +
		"Jun 14 15:16:01 combo sshd[1]: last line without newline"
	clock := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
	lr := ingest.NewLineReader(strings.NewReader(input), 0)
	p := ingest.NewParser(ingest.FormatAuto, clock)
	for {
		line, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, ingest.ErrLineTooLong) {
			panic(err)
		}
		e := p.Parse(line)
		fmt.Printf("%d %v %s %q\n", lr.LineNumber(), e.HasTime,
			time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano), e.Line)
	}
	fmt.Println("bytes:", lr.Offset())
	// Output:
	// 1 true 2015-07-29T17:41:44.747Z "2015-07-29 17:41:44,747 - INFO  start"
	// 2 true 2015-07-29T17:41:45.5Z "{\"ts\":1438191705.5,\"msg\":\"json\"}"
	// 3 false 2026-11-30T12:00:00Z "no timestamp here"
	// 4 true 2026-06-14T15:16:01Z "Jun 14 15:16:01 combo sshd[1]: last line without newline"
	// bytes: 147
}

func ExampleParseLabels() {
	ls, err := ingest.ParseLabels("source=a.log, app=api")
	if err != nil {
		panic(err)
	}
	fmt.Println(ls, ls.Get("app"))
	fmt.Println(ls.With("env", "prod"))
	_, err = ingest.ParseLabels(`{app="api", app="web"}`)
	fmt.Println(err)
	// Output:
	// {app="api", source="a.log"} api
	// {app="api", env="prod", source="a.log"}
	// labels "{app=\"api\", app=\"web\"}": duplicate label "app"
}
