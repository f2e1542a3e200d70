package config

// Cache is the [cache] table: where berth keeps GitLab jobs' cache:
// archives so that they outlive instances.
type Cache struct {
	// Dir holds the archives (key dir); default <state_dir>/cache.
	Dir string
	// MaxSizeMB bounds the archives together (key max_size_mb, default
	// 5120); the least recently used are evicted beyond it.
	MaxSizeMB int
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
	t.finish()
}
