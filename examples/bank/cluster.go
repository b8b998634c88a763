//go:build !nocluster

package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/scribe-es/scribe/examples/bank/bank"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
	"github.com/scribe-es/scribe/runtime/cluster/automanaged"
)

// clusterFlags are the flags of cluster mode: several bank processes on one
// Postgres form a cluster (cluster.Config with the automanaged provider);
// each account's stream is hosted by one of them, and any of them serves
// any account. Built with -tags nocluster, the bank leaves cluster mode and
// its providers out (nocluster.go).
type clusterFlags struct {
	name       string
	host       string
	port       int
	healthPort int
	peers      string
	refresh    time.Duration
	session    time.Duration
}

// addClusterFlags registers the cluster flags on fs.
func addClusterFlags(fs *flag.FlagSet) *clusterFlags {
	f := &clusterFlags{}
	fs.StringVar(&f.name, "cluster-name", "bank", "cluster mode: the cluster's name (members with the same name form it)")
	fs.StringVar(&f.host, "cluster-host", cluster.DefaultHost, "cluster mode: the address other members reach this one at")
	fs.IntVar(&f.port, "cluster-port", 0, "cluster mode: this member's remote (gRPC) port; 0 runs a single node")
	fs.IntVar(&f.healthPort, "cluster-health-port", 0, "cluster mode: this member's health endpoint port (automanaged provider)")
	fs.StringVar(&f.peers, "cluster-peers", "", "cluster mode: every member's health endpoint, this one included, comma-separated host:port")
	fs.DurationVar(&f.refresh, "cluster-refresh", automanaged.DefaultRefreshInterval, "cluster mode: how often members poll each other's health endpoints")
	fs.DurationVar(&f.session, "session-timeout", runtime.DefaultLimits().SessionTimeout, "node session timeout: a dead member's accounts move to the others after at most this long")
	return f
}

// config returns the runtime's cluster configuration (nil without
// -cluster-port: a single node) and the session timeout.
func (f *clusterFlags) config() (runtime.Cluster, time.Duration, error) {
	if f.session < 0 {
		return nil, 0, fmt.Errorf("-session-timeout %s is negative; use a positive duration", f.session)
	}
	if f.port == 0 {
		if f.peers != "" || f.healthPort != 0 {
			return nil, 0, errors.New("-cluster-peers and -cluster-health-port need -cluster-port (this member's remote port)")
		}
		return nil, f.session, nil
	}
	if f.healthPort == 0 || f.peers == "" {
		return nil, 0, errors.New("cluster mode (-cluster-port) needs -cluster-health-port and -cluster-peers (every member's health endpoint, this one included)")
	}
	var peers []string
	for p := range strings.SplitSeq(f.peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			peers = append(peers, p)
		}
	}
	cfg := &cluster.Config{
		Name:     f.name,
		Host:     f.host,
		Port:     f.port,
		Provider: automanaged.Provider{Port: f.healthPort, Peers: peers, RefreshInterval: f.refresh},
	}
	withBankTypes(cfg)
	return cfg, f.session, nil
}

// withBankTypes lists the account commands and the domain errors that cross
// members.
func withBankTypes(cfg *cluster.Config) {
	cfg.Commands = append(cfg.Commands,
		cluster.Command[bank.OpenAccount]("bank.OpenAccount"),
		cluster.Command[bank.DepositMoney]("bank.DepositMoney"),
		cluster.Command[bank.WithdrawMoney]("bank.WithdrawMoney"),
		cluster.Command[readAccount]("bank.ReadAccount"),
	)
	for _, e := range []*bank.Error{bank.ErrInvalidRequest, bank.ErrInvalidAmount, bank.ErrSameAccount,
		bank.ErrAccountExists, bank.ErrAccountNotFound, bank.ErrInsufficientFunds, bank.ErrBalanceLimit} {
		code := e.Code
		cfg.Errors = append(cfg.Errors, cluster.ErrorCode{
			Code:    "bank." + string(code),
			Err:     e,
			Rebuild: func(msg string) error { return &bank.Error{Code: code, Message: msg} },
		})
	}
}
