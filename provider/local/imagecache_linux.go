package local

import (
	"fmt"
	"path/filepath"

	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/jobroot"
	"github.com/berth-ci/berth/provider"
)

// ImageCache says where instance id keeps its image cache on this host
// (provider.ImageCacher): the instance's images directory, which the
// sandbox's launcher mounts as the job runner's cache. berth pulls jobs'
// images into it on the host, so that sandboxes with network = "isolated"
// run jobs in images too. As root, the files go to the sandbox's root (the
// base of its subordinate range), which the runner and overlayfs in the
// sandbox's user namespace need; unprivileged, berth's own user is the
// sandbox's root already.
func (p *Provider) ImageCache(id string) (provider.ImageCache, error) {
	if _, err := p.existing(id); err != nil {
		return provider.ImageCache{}, err
	}
	dir := p.instDir(id)
	if err := p.ensureImagesDir(dir); err != nil {
		return provider.ImageCache{}, fmt.Errorf("local provider: %s: %w", id, err)
	}
	c := provider.ImageCache{Dir: jobroot.ImagesDir(filepath.Join(dir, imagesDir))}
	if p.asRoot {
		c.Chown, c.UID, c.GID = true, p.uids.Base, p.gids.Base
	}
	return c, nil
}

var _ provider.ImageCacher = (*Provider)(nil)

// sweepImageCache removes what a pull killed with berth (half-unpacked
// layers, temporary files) left in instance id's image cache; a pull still
// running in the sandbox keeps its lock and is left alone.
func (p *Provider) sweepImageCache(id string) {
	dir := jobroot.ImagesDir(filepath.Join(p.instDir(id), imagesDir))
	n, err := images.Sweep(dir)
	if err != nil {
		p.log.Warn("sweeping an instance's image cache failed", "instance", id, "dir", dir, "err", err)
	} else if n > 0 {
		p.log.Info("removed what interrupted pulls left in an instance's image cache", "instance", id, "entries", n)
	}
}
