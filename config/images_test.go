package config

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestImagesTable(t *testing.T) {
	c, err := Parse([]byte("[images]\ninsecure_registries = [\"reg.local:5000\"]\nallowed_images = [\"golang:*\"]\npull_policy = \"always\"\ncache_size = \"512MiB\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	im := c.Images
	if im.InsecureRegistries[0] != "reg.local:5000" || im.AllowedImages[0] != "golang:*" || im.PullPolicy != "always" || im.CacheSize != 512<<20 {
		t.Fatalf("%+v", im)
	}
	c, err = Parse([]byte("[images]\nmax_layer_size = \"1GB\"\nmax_image_size = \"2GiB\"\nmax_image_entries = 5000\ndisk_reserve = \"0\"\nprivate_registries = [\"10.0.0.5:5000\"]\nwait_for_services_timeout = 90\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if im := c.Images; im.MaxLayerSize != 1e9 || im.MaxImageSize != 2<<30 || im.MaxImageEntries != 5000 || im.DiskReserve != 0 || im.PrivateRegistries[0] != "10.0.0.5:5000" || im.WaitForServicesTimeout != 90 {
		t.Fatalf("limits %+v", im)
	}
	d := Default().Images
	if d.PullPolicy != "if-not-present" || d.CacheSize != DefaultCacheSize || d.MaxImageSize != DefaultMaxImageSize || d.DiskReserve != DefaultDiskReserve {
		t.Fatalf("defaults %+v", d)
	}
	for _, tc := range []struct{ toml, key, msg string }{
		{"[images]\npull_policy = \"sometimes\"\n", "images.pull_policy", "if-not-present"},
		{"[images]\ncache_size = \"lots\"\n", "images.cache_size", `"20GiB" (GiB, MiB: powers of 1024)`},
		{"[images]\nmax_image_size = \"huge\"\n", "images.max_image_size", "20GiB"},
		{"[images]\nprivate_registries = [\"http://10.0.0.5\"]\n", "images.private_registries[0]", "host:port"},
		{"[images]\nwait_for_services_timeout = -5\n", "images.wait_for_services_timeout", "-1 not to wait"},
		{"[images]\ninsecure_registries = [\"http://reg:5000/x\"]\n", "images.insecure_registries[0]", "host:port"},
		{"[images]\npull_polcy = \"never\"\n", "images.pull_polcy", "pull_policy"},
	} {
		_, err := Parse([]byte(tc.toml), "berth.toml")
		var le *Error
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v, want an issue at %s saying %q", tc.toml, err, tc.key, tc.msg)
		}
	}
}

// cache_size's units mean what they say, and the default docs/config.md
// states is the default berth uses (the docs once said "20GB" for 20 GiB).
func TestCacheSizeUnitsAndDocumentedDefault(t *testing.T) {
	for s, want := range map[string]int64{"20GiB": 20 << 30, "20GB": 20e9, "512MiB": 512 << 20, "512MB": 512e6, "1.5GiB": 3 << 29, "0": 0, "4096": 4096} {
		if got, err := parseSize(s); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	docs, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\| `cache_size` \\| `([^`]+)` \\|").FindSubmatch(docs)
	if m == nil {
		t.Fatal("docs/config.md has no row for cache_size with its default")
	}
	documented, err := parseSize(string(m[1]))
	if err != nil || documented != DefaultCacheSize {
		t.Errorf("docs/config.md gives cache_size's default as %q = %d bytes (%v); berth's is %d", m[1], documented, err, int64(DefaultCacheSize))
	}
}
