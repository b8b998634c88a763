package kubernetes_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/scribe-es/scribe/postgres"
	"github.com/scribe-es/scribe/runtime"
	"github.com/scribe-es/scribe/runtime/cluster"
	"github.com/scribe-es/scribe/runtime/cluster/kubernetes"
)

// PlaceOrder is a command sent across members.
type PlaceOrder struct{ Item string }

// Example is the main of a member running in a pod of the StatefulSet shown
// in the package documentation: the provider takes its client from the
// pod's service account and its pod from POD_NAME and POD_NAMESPACE, and
// the member announces the pod's IP. The pod turns ready once runtime.New
// has returned. (It needs a pod and a database, so it is compiled but not
// run by go test.)
func Example() {
	ctx := context.Background()

	var ready atomic.Bool
	http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	go func() { log.Fatal(http.ListenAndServe(":8080", nil)) }()

	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	j, err := postgres.NewJournal(pool, postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = j.Close() }()

	rt, err := runtime.New(ctx, runtime.Config{
		Journal: j, // NodeID defaults to the host name: the pod's name
		Cluster: &cluster.Config{
			Name:     "orders",
			Host:     os.Getenv("POD_IP"),
			Port:     7000,
			Provider: kubernetes.Provider{},
			Commands: []cluster.CommandType{cluster.Command[PlaceOrder]("orders.PlaceOrder")},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ready.Store(true)

	// Register aggregates and serve commands here. Leave on SIGTERM (the
	// pod is being deleted) or when the member was fenced for good (another
	// live process runs with its node ID).
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	select {
	case <-stop:
	case <-rt.ClusterFenced():
	}
	ready.Store(false)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := rt.Shutdown(sctx); err != nil {
		log.Print(err)
	}
}
