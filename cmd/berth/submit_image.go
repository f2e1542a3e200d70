package main

import (
	"strings"

	"github.com/berth-ci/berth/api"
)

// imageFlags turns --image and --service REF[=ALIAS] into the request's
// image and services; the server checks the names.
func imageFlags(image string, services []string) (*api.Image, []api.Service) {
	var im *api.Image
	if image != "" {
		im = &api.Image{Name: image}
	}
	var out []api.Service
	for _, s := range services {
		name, alias, _ := strings.Cut(s, "=")
		out = append(out, api.Service{Name: name, Alias: alias})
	}
	return im, out
}
