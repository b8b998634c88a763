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
	"github.com/scribe-es/scribe/runtime/cluster/etcd"
)

// clusterFlags are the flags of cluster mode: several bank processes on one
// Postgres form a cluster (cluster.Config with the automanaged provider:
// static peers, or with -cluster-etcd the etcd provider); each account's stream is hosted by one of them, and any of them serves
// any account. Built with -tags nocluster, the bank leaves cluster mode and
// its providers out (nocluster.go).
type clusterFlags struct {
	name       string
	host       string
	port       int
	healthPort int
	peers      string
	etcd       string
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
	fs.StringVar(&f.etcd, "cluster-etcd", "", "cluster mode: etcd endpoints, comma-separated host:port; members find each other through etcd (keys under /scribe/<cluster-name>) instead of -cluster-peers")
	fs.DurationVar(&f.refresh, "cluster-refresh", automanaged.DefaultRefreshInterval, "cluster mode: how often members poll each other's health endpoints")
	fs.DurationVar(&f.session, "session-timeout", runtime.DefaultBounds().SessionTimeout, "node session timeout: a dead member's accounts move to the others after at most this long")
	return f
}

// config returns the runtime's cluster configuration (nil without
// -cluster-port: a single node) and the session timeout.
func (f *clusterFlags) config() (runtime.Cluster, time.Duration, error) {
	if f.session < 0 {
		return nil, 0, fmt.Errorf("-session-timeout %s is negative; use a positive duration", f.session)
	}
	if f.port == 0 {
		if f.peers != "" || f.healthPort != 0 || f.etcd != "" {
			return nil, 0, errors.New("-cluster-peers, -cluster-health-port and -cluster-etcd need -cluster-port (this member's remote port)")
		}
		return nil, f.session, nil
	}
	cfg := &cluster.Config{Name: f.name, Host: f.host, Port: f.port}
	switch {
	case f.etcd != "":
		if f.healthPort != 0 || f.peers != "" {
			return nil, 0, errors.New("-cluster-etcd finds the members through etcd: leave -cluster-health-port and -cluster-peers (static peers) out")
		}
		cfg.Provider = etcd.Provider{Endpoints: splitList(f.etcd)}
	case f.healthPort == 0 || f.peers == "":
		return nil, 0, errors.New("cluster mode (-cluster-port) needs -cluster-health-port and -cluster-peers (every member's health endpoint, this one included), or -cluster-etcd (etcd endpoints)")
	default:
		cfg.Provider = automanaged.Provider{Port: f.healthPort, Peers: splitList(f.peers), RefreshInterval: f.refresh}
	}
	withBankTypes(cfg)
	return cfg, f.session, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
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
	// Library errors (retention, partition moves, erasure, idempotency)
	// cross members by themselves (runtime/cluster's built-in codes): a
	// retired account answers 410 from every member, not 500 "retry".
}
