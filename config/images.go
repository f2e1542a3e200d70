package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Images is the [images] table: how jobs that name an image get it on
// their instance (see docs/config.md).
type Images struct {
	// InsecureRegistries (key insecure_registries) lists registries, as
	// host:port, that may be reached over plain HTTP.
	InsecureRegistries []string
	// AllowedImages (key allowed_images) holds globs an image must match;
	// empty allows every image.
	AllowedImages []string
	// PullPolicy (key pull_policy) is "always", "if-not-present" or "never".
	PullPolicy string
	// AllowedPullPolicies (key allowed_pull_policies, GitLab Runner's
	// name) lists the policies a job's image:pull_policy may ask for;
	// empty allows PullPolicy only.
	AllowedPullPolicies []string
	// CacheSize (key cache_size, e.g. "20GiB") bounds the unpacked image
	// cache of each instance; least recently used images are evicted past
	// it. 0 is no bound.
	CacheSize int64
	// CacheDir (key cache_dir) is the cache directory on the instances;
	// empty is ~/.cache/berth of the SSH user.
	CacheDir string
}

// DefaultPullPolicy is GitLab's default.
const DefaultPullPolicy = "if-not-present"

// DefaultCacheSize bounds each instance's image cache when cache_size is
// not set: 20 GiB (docs/config.md says "20GiB"; a test keeps them equal).
const DefaultCacheSize = 20 << 30

func (d *decoder) images(t *table, im *Images) {
	t.strings("insecure_registries", &im.InsecureRegistries)
	for i, r := range im.InsecureRegistries {
		if _, _, err := net.SplitHostPort(r); err != nil && strings.ContainsAny(r, "/:") {
			d.issue(fmt.Sprintf("%s[%d]", t.key("insecure_registries"), i), r, "must be a registry host or host:port, as in the image name (e.g. \"registry.local:5000\")")
		}
	}
	t.strings("allowed_images", &im.AllowedImages)
	if t.str("pull_policy", &im.PullPolicy) {
		switch im.PullPolicy {
		case "always", "if-not-present", "never":
		default:
			d.issue(t.key("pull_policy"), im.PullPolicy, `must be "always", "if-not-present" or "never"`)
		}
	}
	t.strings("allowed_pull_policies", &im.AllowedPullPolicies)
	for i, p := range im.AllowedPullPolicies {
		switch p {
		case "always", "if-not-present", "never":
		default:
			d.issue(fmt.Sprintf("%s[%d]", t.key("allowed_pull_policies"), i), p, `must be "always", "if-not-present" or "never"`)
		}
	}
	var size string
	if t.str("cache_size", &size) {
		n, err := parseSize(size)
		if err != nil {
			d.issue(t.key("cache_size"), size, "%v", err)
		}
		im.CacheSize = n
	}
	t.str("cache_dir", &im.CacheDir)
	t.finish()
}

// parseSize reads "512MB", "20GB", "1GiB" or a plain byte count: KB, MB,
// GB and TB are powers of 1000 (as disks are sold), KiB, MiB, GiB and TiB
// powers of 1024 (as df -h shows them).
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf(`must be a size such as "20GiB" (GiB, MiB: powers of 1024), "20GB" (GB, MB: powers of 1000) or "0" for no limit`)
	}
	return int64(n * float64(mult)), nil
}
