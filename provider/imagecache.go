package provider

// ImageCacher is the optional capability of providers whose instances keep
// their image cache in a directory on berth's own host (the local
// provider's sandboxes). berth then pulls a job's images there itself, on
// the host, which has network, and the job runner on the instance only
// reads the cache: a sandbox without a route to any registry can still run
// jobs in images. Providers without it (remote instances) pull on the
// instance.
type ImageCacher interface {
	// ImageCache says where instance id's image cache is on this host.
	ImageCache(id string) (ImageCache, error)
}

// ImageCache is where an instance's image cache is on berth's host.
type ImageCache struct {
	// Dir is the cache directory (what images.Config.Dir takes).
	Dir string
	// Chown says to give the files berth creates in Dir to UID and GID:
	// the IDs the instance's root has on the host when they differ from
	// berth's own.
	Chown    bool
	UID, GID int
}
