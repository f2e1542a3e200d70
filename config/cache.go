package config

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
	// Bucket, Prefix, AccessKey, SecretKey (keys access_key, secret_key),
	// Region and Insecure (plain HTTP).
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
	t.str("secret_key", &c.SecretKey)
	t.str("region", &c.Region)
	t.bool("insecure", &c.Insecure)
	if (c.S3Endpoint == "") != (c.Bucket == "") {
		d.issue(t.key("s3_endpoint"), c.S3Endpoint, "an S3 cache needs both s3_endpoint and bucket (leave both out to keep caches in dir)")
	}
	t.finish()
}
