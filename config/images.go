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
	// WaitForServicesTimeout (key wait_for_services_timeout, GitLab
	// Runner's name and unit) is how many seconds a job waits for its
	// services' exposed ports before it warns and goes on: 0 is 30, -1
	// does not wait.
	WaitForServicesTimeout int
	// CacheDir (key cache_dir) is the cache directory on the instances;
	// empty is ~/.cache/berth of the SSH user.
	CacheDir string
	// MaxLayerSize (key max_layer_size) bounds a layer's compressed size,
	// as declared and as downloaded. 0 is no bound.
	MaxLayerSize int64
	// MaxImageSize (key max_image_size) bounds the unpacked bytes of one
	// image. 0 is no bound.
	MaxImageSize int64
	// MaxImageEntries (key max_image_entries) bounds the files,
	// directories and links of one image. 0 is no bound.
	MaxImageEntries int64
	// DiskReserve (key disk_reserve) is the free space of the cache's
	// file system that no pull eats into. 0 is none.
	DiskReserve int64
	// PrivateRegistries (key private_registries) lists registries
	// (host or host:port) berth may pull from on its own host although
	// they resolve to loopback, link-local or private addresses; the
	// insecure_registries count as listed too.
	PrivateRegistries []string
}

// DefaultPullPolicy is GitLab's default.
const DefaultPullPolicy = "if-not-present"

// DefaultCacheSize bounds each instance's image cache when cache_size is
// not set: 20 GiB (docs/config.md says "20GiB"; a test keeps them equal).
const DefaultCacheSize = 20 << 30

// The defaults of the pull limits: generous for real images (the largest
// common CI images unpack to a few GB in under 100,000 files), small
// enough that a hostile image is stopped long before a disk fills.
const (
	DefaultMaxLayerSize    = 10 << 30
	DefaultMaxImageSize    = 20 << 30
	DefaultMaxImageEntries = 1_000_000
	DefaultDiskReserve     = 1 << 30
)

// DefaultImages is the [images] table when the config gives none of it.
func DefaultImages() Images {
	return Images{PullPolicy: DefaultPullPolicy, CacheSize: DefaultCacheSize,
		MaxLayerSize: DefaultMaxLayerSize, MaxImageSize: DefaultMaxImageSize,
		MaxImageEntries: DefaultMaxImageEntries, DiskReserve: DefaultDiskReserve}
}

func (d *decoder) images(t *table, im *Images) {
	t.strings("insecure_registries", &im.InsecureRegistries)
	for i, r := range im.InsecureRegistries {
		if !validRegistry(r) {
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
	for _, k := range []struct {
		key string
		dst *int64
	}{{"cache_size", &im.CacheSize}, {"max_layer_size", &im.MaxLayerSize}, {"max_image_size", &im.MaxImageSize}, {"disk_reserve", &im.DiskReserve}} {
		var size string
		if t.str(k.key, &size) {
			n, err := parseSize(size)
			if err != nil {
				d.issue(t.key(k.key), size, "%v", err)
			}
			*k.dst = n
		}
	}
	entries := -1
	if t.int("max_image_entries", &entries); entries >= 0 {
		im.MaxImageEntries = int64(entries)
	}
	t.strings("private_registries", &im.PrivateRegistries)
	for i, r := range im.PrivateRegistries {
		if !validRegistry(r) {
			d.issue(fmt.Sprintf("%s[%d]", t.key("private_registries"), i), r, "must be a registry host or host:port, as in the image name (e.g. \"registry.local:5000\")")
		}
	}
	if t.int("wait_for_services_timeout", &im.WaitForServicesTimeout); im.WaitForServicesTimeout < -1 {
		d.issue(t.key("wait_for_services_timeout"), fmt.Sprint(im.WaitForServicesTimeout), "must be seconds (30 by default), or -1 not to wait for services")
	}
	t.str("cache_dir", &im.CacheDir)
	t.finish()
}

// validRegistry says whether r is a registry as an image name holds it:
// host or host:port, no scheme, no path.
func validRegistry(r string) bool {
	if r == "" || strings.Contains(r, "/") {
		return false
	}
	_, _, err := net.SplitHostPort(r)
	return err == nil || !strings.Contains(r, ":")
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
