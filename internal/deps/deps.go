// Package deps pins the project's dependencies while packages are being written.
package deps

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/cockroachdb/datadriven"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/robfig/cron/v3"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/bbolt"
	_ "golang.org/x/crypto/ssh"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/time/rate"
	_ "pgregory.net/rapid"
)
