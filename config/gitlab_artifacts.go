package config

// maxArtifactSize reads max_artifact_size: the largest artifact archive a
// GitLab job may upload, checked by berth while it packs (the archive is
// staged on berth's disk on its way to GitLab).
func (d *decoder) maxArtifactSize(t *table, s *Source) {
	var v string
	if !t.str("max_artifact_size", &v) {
		return
	}
	n, err := parseSize(v)
	if err != nil {
		d.issue(t.key("max_artifact_size"), v, "%v", err)
		return
	}
	s.MaxArtifactSize = n
}
