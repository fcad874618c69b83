//go:build !goplugin_mux
// +build !goplugin_mux

package main

import (
	"errors"

	plugin "github.com/hashicorp/go-plugin"
)

// setMultiplex: this go-plugin (Debian's 1.0.1) has no broker multiplexing.
func setMultiplex(config *plugin.ClientConfig, on bool) error {
	if on {
		return errors.New("--multiplex needs go-plugin >= 1.6; this kvhost is built with an older go-plugin")
	}
	return nil
}
