package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
	"github.com/scribe-es/scribe/runtime/cluster/automanaged"
)

// The test binary doubles as a cluster member: with envNode set, TestMain
// runs one member (a small HTTP front end over a cluster-mode Runtime on
// Postgres) instead of the tests.
const envNode = "SCRIBE_CLUSTERTEST_NODE"

// Exit codes of a member process.
const (
	exitOK     = 0
	exitFailed = 1
	exitFenced = 3
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(envNode); cfg != "" {
		os.Exit(runNode(cfg))
	}
	os.Exit(m.Run())
}

// nodeConfig is a member process's configuration, passed as JSON in envNode.
type nodeConfig struct {
	DB             string   `json:"db"`
	Schema         string   `json:"schema"`
	NodeID         string   `json:"nodeId"`
	Cluster        string   `json:"cluster"`
	RemotePort     int      `json:"remotePort"`
	HealthPort     int      `json:"healthPort"`
	Peers          []string `json:"peers"`
	HTTPPort       int      `json:"httpPort"`
	SessionTimeout string   `json:"sessionTimeout"`
	OpenTimeout    string   `json:"openTimeout"`
	IdleTimeout    string   `json:"idleTimeout"`
}

// execRequest is the body of POST /exec.
type execRequest struct {
	Account string `json:"account"`
	Op      string `json:"op"` // "deposit" or "withdraw"
	Amount  int64  `json:"amount"`
	Key     string `json:"key"`
	// Correlation is stored as the command's correlation ID.
	Correlation string `json:"correlation,omitempty"`
}

// execReply is the body of every /exec answer.
type execReply struct {
	Version   uint64 `json:"version"`
	Balance   int64  `json:"balance"`
	Duplicate bool   `json:"duplicate"`
	Code      string `json:"code,omitempty"` // "insufficient", "lease_lost", "retryable", "failed"
	Error     string `json:"error,omitempty"`
}

// statsReply is the body of GET /stats.
type statsReply struct {
	Active  int      `json:"active"`
	Members []string `json:"members"`
	// NotReady is runtime.Ready's error, "" while the member serves.
	NotReady string `json:"notReady,omitempty"`
}

// ownerReply is the body of GET /owner?account=ID: the address of the
// member hosting the account's stream as this member sees it ("" while it
// is out of the cluster), and this member's address.
type ownerReply struct {
	Owner string `json:"owner"`
	Self  string `json:"self"`
}

func runNode(raw string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var cfg nodeConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		log.Error("bad node config", "error", err)
		return exitFailed
	}
	dur := func(s string) time.Duration { d, _ := time.ParseDuration(s); return d }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pcfg, err := pgxpool.ParseConfig(cfg.DB)
	if err != nil {
		log.Error("database URL", "error", err)
		return exitFailed
	}
	// A member paused in the middle of a transaction holds its row locks
	// until it resumes; the server ends such a transaction after this
	// timeout, so the other members can take its streams over.
	pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(dur(cfg.SessionTimeout).Milliseconds(), 10)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		log.Error("connect", "error", err)
		return exitFailed
	}
	defer pool.Close()
	j, err := postgres.NewJournal(pool, postgres.Config{Schema: cfg.Schema})
	if err != nil {
		log.Error("journal", "error", err)
		return exitFailed
	}
	rt, err := runtime.New(ctx, runtime.Config{
		Journal: j,
		NodeID:  cfg.NodeID,
		Logger:  log,
		Bounds: runtime.Bounds{
			SessionTimeout: dur(cfg.SessionTimeout),
			OpenTimeout:    dur(cfg.OpenTimeout),
			IdleTimeout:    dur(cfg.IdleTimeout),
		},
		Cluster: &cluster.Config{
			Name:     cfg.Cluster,
			Port:     cfg.RemotePort,
			Provider: automanaged.Provider{Port: cfg.HealthPort, Peers: cfg.Peers, RefreshInterval: 300 * time.Millisecond},
			Commands: ledgerCommands(),
			Errors:   ledgerErrors(),
		},
	})
	if err != nil {
		log.Error("runtime", "error", err)
		return exitFailed
	}
	if err := registerLedger(rt); err != nil {
		log.Error("register", "error", err)
		return exitFailed
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exec", func(w http.ResponseWriter, r *http.Request) {
		var req execRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var cmd any = Deposit{Amount: req.Amount}
		if req.Op == "withdraw" {
			cmd = Withdraw{Amount: req.Amount}
		}
		ectx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		res, err := runtime.ExecuteTyped[Account](ectx, rt, acct(req.Account), cmd,
			runtime.WithMetadata(journal.Metadata{CorrelationID: req.Correlation}), runtime.WithIdempotencyKey(req.Key))
		rep := execReply{Version: res.Version, Balance: res.State.Balance, Duplicate: res.Duplicate}
		status := http.StatusOK
		switch {
		case err == nil:
		case errors.Is(err, errInsufficient):
			status, rep.Code, rep.Error = http.StatusConflict, "insufficient", err.Error()
		case errors.Is(err, journal.ErrVersionMismatch):
			status, rep.Code, rep.Error = http.StatusConflict, "version_mismatch", err.Error()
		case errors.Is(err, journal.ErrInvalidEvent):
			status, rep.Code, rep.Error = http.StatusBadRequest, "invalid_event", err.Error()
		case errors.Is(err, runtime.ErrLeaseLost) && !errors.Is(err, journal.ErrOutcomeUnknown):
			status, rep.Code, rep.Error = http.StatusServiceUnavailable, "lease_lost", err.Error()
		case runtime.IsRetryable(err) || errors.Is(err, context.DeadlineExceeded):
			status, rep.Code, rep.Error = http.StatusServiceUnavailable, "retryable", err.Error()
		default:
			status, rep.Code, rep.Error = http.StatusInternalServerError, "failed", err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(rep)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		rep := statsReply{Active: rt.ActiveStreams(), Members: rt.ClusterMembers()}
		if err := rt.Ready(); err != nil {
			rep.NotReady = err.Error()
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
	mux.HandleFunc("GET /owner", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(ownerReply{Owner: rt.ClusterOwner(acct(r.URL.Query().Get("account"))), Self: rt.ClusterAddress()})
	})
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.HTTPPort))
	if err != nil {
		log.Error("listen", "error", err)
		return exitFailed
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	fmt.Println("READY")
	code := exitOK
	select {
	case <-ctx.Done():
	case <-rt.ClusterFenced():
		fmt.Println("FENCED")
		log.Error("member fenced; stopping")
		code = exitFenced
	}
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := rt.Shutdown(sctx); err != nil && code == exitOK {
		log.Error("shutdown", "error", err)
		code = exitFailed
	}
	return code
}
