package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
)

func init() {
	if a := os.Getenv("BERTH_PPROF_TMP"); a != "" && len(os.Args) > 1 && os.Args[1] == "run" {
		runtime.SetBlockProfileRate(100000)
		runtime.SetMutexProfileFraction(10)
		go http.ListenAndServe(a, nil)
	}
}
