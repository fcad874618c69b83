//go:build goplugin_mux

package main

import plugin "github.com/hashicorp/go-plugin"

// setMultiplex sets go-plugin's GRPCBrokerMultiplex (go-plugin ≥ 1.6; build.sh builds the v18
// peers with the goplugin_mux tag).
func setMultiplex(config *plugin.ClientConfig, on bool) error {
	config.GRPCBrokerMultiplex = on
	return nil
}
