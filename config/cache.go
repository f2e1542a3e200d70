package config

import (
	"os"
	"strings"

	"github.com/berth-ci/berth/internal/secretfile"
)

// Cache is the [cache] table: where berth keeps GitLab jobs' cache:
// archives so that they outlive instances: a directory (the default) or an
// S3-compatible bucket.
type Cache struct {
	// Dir holds the archives (key dir); default <state_dir>/cache.
	Dir string
	// MaxSizeMB bounds the archives together (key max_size_mb, default
	// 5120); the least recently used are evicted beyond it.
	MaxSizeMB int
	// S3Endpoint (key s3_endpoint, host[:port]) turns on the S3 store, with
	// Bucket, Prefix, AccessKey, SecretKey (keys access_key, secret_key,
	// or secret_key_file: a file holding it, kept out of berth.toml as a
	// GitLab source's token_file is), Region and Insecure (plain HTTP).
	S3Endpoint string
	Bucket     string
	Prefix     string
	AccessKey  string
	SecretKey  string
	Region     string
	Insecure   bool
}

// cache decodes [cache].
func (d *decoder) cache(t *table, c *Cache) {
	if t.str("dir", &c.Dir) {
		c.Dir = d.resolvePath("cache.dir", c.Dir)
	}
	t.int("max_size_mb", &c.MaxSizeMB)
	if c.MaxSizeMB < 0 {
		d.issue(t.key("max_size_mb"), c.MaxSizeMB, "must be 0 or more (0: the default of 5120 MB)")
	}
	t.str("s3_endpoint", &c.S3Endpoint)
	t.str("bucket", &c.Bucket)
	t.str("prefix", &c.Prefix)
	t.str("access_key", &c.AccessKey)
	hasKey := t.str("secret_key", &c.SecretKey) && c.SecretKey != "" // the sample's secret_key = "" is none
	var keyFile string
	if t.str("secret_key_file", &keyFile) && keyFile != "" {
		if hasKey {
			d.issue(t.key("secret_key_file"), keyFile, "secret_key is set too; give either secret_key or secret_key_file, not both")
		} else {
			d.readSecretKey(t.key("secret_key_file"), d.resolvePath(t.key("secret_key_file"), keyFile), c)
		}
	}
	t.str("region", &c.Region)
	t.bool("insecure", &c.Insecure)
	if (c.S3Endpoint == "") != (c.Bucket == "") {
		d.issue(t.key("s3_endpoint"), c.S3Endpoint, "an S3 cache needs both s3_endpoint and bucket (leave both out to keep caches in dir)")
	}
	t.finish()
}

// readSecretKey reads [cache] secret_key_file into c.SecretKey, refusing a
// file other users may read (they could use the bucket), as berth's API
// token file is refused.
func (d *decoder) readSecretKey(key, path string, c *Cache) {
	if err := secretfile.Check(path, "the file", "read and write the cache bucket"); err != nil {
		d.issue(key, path, "%v", err)
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		d.issue(key, path, "cannot read the S3 secret key file: %v; check the path and that berth's user may read it", unwrapPathError(err))
		return
	}
	c.SecretKey = strings.TrimSpace(string(data))
	if c.SecretKey == "" {
		d.issue(key, path, "the file is empty; put the S3 secret access key in it")
	}
}
