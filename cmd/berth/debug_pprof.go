//go:build berth_pprof

package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
	"runtime"
	"strconv"
)

// A build with -tags berth_pprof serves net/http/pprof on BERTH_PPROF
// (host:port) so that the heap and goroutines of a live daemon can be
// profiled, e.g. during the scale test:
//
//	GOFLAGS=-tags=berth_pprof BERTH_PPROF=127.0.0.1:6061 BERTH_SCALE=1000/10 BERTH_SCALE_PAUSE=5m go test ...
//
// Released binaries never include it: the profiles show job scripts and
// environment values, and the endpoint has no authentication.
func init() {
	addr := os.Getenv("BERTH_PPROF")
	if addr == "" || len(os.Args) < 2 || os.Args[1] != "run" {
		return // only the daemon: not a sandbox, a CLI call or a test binary
	}
	// Finer heap samples than the default one per 512 KiB, so that a few
	// hundred bytes per job show up.
	if r, err := strconv.Atoi(os.Getenv("BERTH_MEMPROFILERATE")); err == nil && r > 0 {
		runtime.MemProfileRate = r
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth: BERTH_PPROF:", err)
		return
	}
	go http.Serve(ln, nil)
}
