package config

import (
	"errors"
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
	c, err = Parse([]byte("[images]\nmax_layer_size = \"1GB\"\nmax_image_size = \"2GiB\"\nmax_image_entries = 5000\ndisk_reserve = \"0\"\nprivate_registries = [\"10.0.0.5:5000\"]\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if im := c.Images; im.MaxLayerSize != 1e9 || im.MaxImageSize != 2<<30 || im.MaxImageEntries != 5000 || im.DiskReserve != 0 || im.PrivateRegistries[0] != "10.0.0.5:5000" {
		t.Fatalf("limits %+v", im)
	}
	d := Default().Images
	if d.PullPolicy != "if-not-present" || d.CacheSize != DefaultCacheSize || d.MaxImageSize != DefaultMaxImageSize || d.DiskReserve != DefaultDiskReserve {
		t.Fatalf("defaults %+v", d)
	}
	for _, tc := range []struct{ toml, key, msg string }{
		{"[images]\npull_policy = \"sometimes\"\n", "images.pull_policy", "if-not-present"},
		{"[images]\ncache_size = \"lots\"\n", "images.cache_size", "20GB"},
		{"[images]\nmax_image_size = \"huge\"\n", "images.max_image_size", "20GB"},
		{"[images]\nprivate_registries = [\"http://10.0.0.5\"]\n", "images.private_registries[0]", "host:port"},
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
