package runnerimport

import (
	"sort"
	"strings"
)

// tbl is one table of gitlab-runner's config.toml. Keys are taken as they
// are mapped; what is left over is written as a comment, so no setting of
// the old file disappears without a word. Keys match case-insensitively,
// as gitlab-runner's own decoding does ("BucketName", "bucketname").
type tbl struct {
	path string // dotted GitLab path, array indices left out: "runners.cache.s3"
	m    map[string]any
	used map[string]bool
}

func newTbl(path string, m map[string]any) *tbl {
	return &tbl{path: path, m: m, used: map[string]bool{}}
}

func (t *tbl) lookup(k string) (string, bool) {
	if _, ok := t.m[k]; ok {
		return k, true
	}
	for key := range t.m {
		if strings.EqualFold(key, k) {
			return key, true
		}
	}
	return "", false
}

// take returns the value of k and marks it as mapped.
func (t *tbl) take(k string) (any, bool) {
	key, ok := t.lookup(k)
	if !ok {
		return nil, false
	}
	t.used[key] = true
	return t.m[key], true
}

func (t *tbl) str(k string) string {
	v, _ := t.take(k)
	s, _ := v.(string)
	return s
}

func (t *tbl) has(k string) bool {
	_, ok := t.lookup(k)
	return ok
}

// sub returns the sub-table k, nil when absent.
func (t *tbl) sub(k string) *tbl {
	v, ok := t.take(k)
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	return newTbl(join(t.path, k), m)
}

// subs returns k as an array of tables (or one table).
func (t *tbl) subs(k string) []*tbl {
	v, ok := t.take(k)
	if !ok {
		return nil
	}
	var out []*tbl
	switch x := v.(type) {
	case map[string]any:
		out = append(out, newTbl(join(t.path, k), x))
	case []map[string]any:
		for _, m := range x {
			out = append(out, newTbl(join(t.path, k), m))
		}
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				out = append(out, newTbl(join(t.path, k), m))
			}
		}
	}
	return out
}

// rest writes every key not taken as a comment into b, with the reason
// reasons gives for it (or the general one), sorted by name.
func (t *tbl) rest(b *block) {
	var keys []string
	for k := range t.m {
		if !t.used[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.used[k] = true
		b.dropped(join(t.path, k), t.m[k], reason(t.path, k))
	}
}

// reason says why the GitLab key path.k has no equivalent and what to do.
func reason(path, k string) string {
	if r, ok := reasons[strings.ToLower(join(path, k))]; ok {
		return r
	}
	if r, ok := reasons[strings.ToLower(path)+".*"]; ok {
		return r
	}
	return "berth has no equivalent; remove it (docs/config.md lists what berth takes)"
}

// join appends key k to the dotted path of its table ("" at the top).
func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
