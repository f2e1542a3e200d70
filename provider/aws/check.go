package aws

// CheckConfig checks provider_config as Init would, without calling the
// cloud: berth config check asks the plugin for it, so that a file the
// check calls valid is one berth run starts with.
func (g *Group) CheckConfig(raw []byte) error {
	_, err := ParseConfig(raw)
	return err
}
