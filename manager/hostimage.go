package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/jobroot"
)

// pullOnHost makes a job's images (its own and its services') ready in the
// instance's image cache on this host, for providers whose caches live
// here (provider.ImageCacher: the local provider, whose sandboxes have no
// route to a registry with network = "isolated"). The [images] settings
// apply here as they would on the instance. The images stay locked against
// eviction until release is called, after the job; the runner on the
// instance then only reads the cache (pull policy never for this job).
// Errors are *executor.ImageError, as the runner's own would be.
func (m *Manager) pullOnHost(ctx context.Context, id string, names []string, creds []images.Credential, policy string, log io.Writer) (release func(), err error) {
	var held []*images.Image
	release = func() {
		for _, im := range held {
			im.Release()
		}
	}
	where, err := m.hostImages.ImageCache(id)
	if err != nil {
		return release, &executor.ImageError{Instance: id, Image: names[0], Reason: "runner_system_failure",
			Message: fmt.Sprintf("image %q: find the instance's image cache: %v", names[0], err)}
	}
	set := m.cfg.Images
	cfg := images.Config{
		Dir: where.Dir, MaxBytes: set.CacheSize, Insecure: set.InsecureRegistries, Allowed: set.AllowedImages,
		Policy: images.PullPolicy(policy), Logger: m.log.With("instance", id),
		Limits: imageLimits(set),
		// The pull runs on berth's host for a sandbox that may have no
		// network: an image name must not reach the host's networks.
		RefusePrivate: true, Private: set.PrivateRegistries,
		// Layers damaged on the host's disk are seen before a job reads them.
		Verify:   true,
		Progress: jobroot.NewPullLog(log, "on the host").Event,
	}
	if where.Chown {
		cfg.Owner = &images.Owner{UID: where.UID, GID: where.GID}
	}
	cache, err := images.Open(cfg)
	if err != nil {
		return release, &executor.ImageError{Instance: id, Image: names[0], Reason: "runner_system_failure",
			Message: fmt.Sprintf("image %q: open the instance's image cache: %v", names[0], err)}
	}
	for _, name := range names {
		start := time.Now()
		im, err := cache.Get(ctx, name, creds)
		if err != nil {
			return release, hostPullError(id, name, err)
		}
		held = append(held, im)
		if im.Pulled {
			fmt.Fprintf(log, "Pulled image %s (%s, %d layers, %.1f MB) on the host in %s\n", name, im.Digest,
				len(im.LayerDirs), float64(im.Size)/1e6, time.Since(start).Round(time.Millisecond))
		}
	}
	return release, nil
}

// imageLimits are the [images] pull limits.
func imageLimits(set config.Images) images.Limits {
	return images.Limits{LayerBytes: set.MaxLayerSize, ImageBytes: set.MaxImageSize,
		ImageEntries: set.MaxImageEntries, Reserve: set.DiskReserve}
}

// hostPullError words a failed pull as the runner on the instance would.
func hostPullError(id, name string, err error) *executor.ImageError {
	var pe *images.PullError
	if errors.As(err, &pe) {
		return &executor.ImageError{Instance: id, Image: name, Reason: pe.FailureReason(), Message: pe.Error()}
	}
	return &executor.ImageError{Instance: id, Image: name, Reason: "runner_system_failure", Message: fmt.Sprintf("image %q: %v", name, err)}
}

// hostPulled turns settings into those of a job whose images berth pulled
// on the host: the runner uses the cache only.
func hostPulled(s jobroot.Settings) jobroot.Settings {
	s.PullPolicy = string(images.PullNever)
	return s
}
