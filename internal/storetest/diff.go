package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-ci/berth/scaler"
)

// Diff describes how got differs from want, or returns "". Records are
// compared as sets: a backend need not keep their order.
func Diff(got, want scaler.State) string {
	var out []string
	cmp := func(what string, g, w any) {
		gj, wj := canon(g), canon(w)
		if gj != wj {
			out = append(out, fmt.Sprintf("%s: got %s, want %s", what, gj, wj))
		}
	}
	cmp("instances", sorted(got.Instances), sorted(want.Instances))
	cmp("reservations", sorted(got.Reservations), sorted(want.Reservations))
	cmp("environments", sorted(got.Envs), sorted(want.Envs))
	cmp("pending", times(got.Pending), times(want.Pending))
	cmp("arrivals", got.Arrivals, want.Arrivals)
	cmp("learned", got.Learned, want.Learned)
	return strings.Join(out, "; ")
}

// canon renders v as JSON; empty and nil lists are the same.
func canon(v any) string {
	data, _ := json.Marshal(v)
	if s := string(data); s != "[]" {
		return s
	}
	return "null"
}

func sorted[T any](rs []T) []string {
	var out []string
	for _, r := range rs {
		out = append(out, canon(r))
	}
	slices.Sort(out)
	return out
}

func times(ts []time.Time) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.UTC().Format(time.RFC3339Nano))
	}
	return out
}
