package queue

import (
	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/jobsource"
)

// validImages refuses image names that cannot be parsed, at submit time.
func validImages(im *api.Image, svcs []api.Service) error {
	if im != nil {
		if _, err := images.ParseRef(im.Name); err != nil {
			return badRequest("%v: give an image reference such as \"golang:1.22\" or \"registry.example:5000/team/app@sha256:...\"", err)
		}
	}
	for i, s := range svcs {
		if _, err := images.ParseRef(s.Name); err != nil {
			return badRequest("services[%d]: %v", i, err)
		}
	}
	return nil
}

// specImage turns the API's image and services into the job's.
func specImage(im *api.Image, svcs []api.Service) (*jobsource.Image, []jobsource.Service) {
	var out *jobsource.Image
	if im != nil {
		out = &jobsource.Image{Name: im.Name, Entrypoint: im.Entrypoint}
	}
	var ss []jobsource.Service
	for _, s := range svcs {
		ss = append(ss, jobsource.Service{Name: s.Name, Alias: s.Alias, Command: s.Command, Entrypoint: s.Entrypoint})
	}
	return out, ss
}
