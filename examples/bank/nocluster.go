//go:build nocluster

package main

import (
	"errors"
	"flag"
	"time"

	"github.com/scribe-es/scribe/runtime"
)

// clusterFlags, in a bank built with -tags nocluster, keep the session
// timeout and refuse cluster mode: the binary compiles neither cluster mode
// nor any provider (see cluster.go for the full build).
type clusterFlags struct {
	port    int
	session time.Duration
}

// addClusterFlags registers the flags a single-node bank keeps on fs.
func addClusterFlags(fs *flag.FlagSet) *clusterFlags {
	f := &clusterFlags{}
	fs.IntVar(&f.port, "cluster-port", 0, "cluster mode is not built in (built with -tags nocluster); must stay 0")
	fs.DurationVar(&f.session, "session-timeout", runtime.DefaultBounds().SessionTimeout, "node session timeout")
	return f
}

// config returns no cluster and the session timeout; -cluster-port fails.
func (f *clusterFlags) config() (runtime.Cluster, time.Duration, error) {
	if f.port != 0 {
		return nil, 0, errors.New("-cluster-port: this bank was built with -tags nocluster, without cluster mode; build it without that tag")
	}
	if f.session < 0 {
		return nil, 0, errors.New("-session-timeout is negative; use a positive duration")
	}
	return nil, f.session, nil
}
