package main

import (
	"flag"
	"fmt"

	"github.com/scribe-es/scribe/postgres/pgadmin"
)

func leasesCommand() *command {
	var partition string
	return &command{
		name:    "leases",
		summary: "show which node holds which stream's lease, since and until when, and the node sessions; a lease whose node session ended is lapsed, not held",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&partition, "partition", "", "only streams of this partition (default: every partition)")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			s, err := e.open()
			if err != nil {
				return err
			}
			defer s.Close()
			leases, err := s.admin.Leases(e.ctx, partition)
			if err != nil {
				return err
			}
			nodes, err := s.admin.Nodes(e.ctx)
			if err != nil {
				return err
			}
			if e.opts.json {
				for _, l := range leases {
					if err := emitJSON(e.stdout, map[string]any{
						"kind": "lease", "partition": l.Stream.Partition, "tag": l.Stream.Tag, "node": l.NodeID,
						"incarnation": l.Incarnation, "epoch": l.Epoch, "since": jsonTime(l.Since), "until": jsonTime(l.Until), "live": l.Live,
					}); err != nil {
						return err
					}
				}
				for _, n := range nodes {
					if err := emitJSON(e.stdout, map[string]any{
						"kind": "node", "node": n.NodeID, "incarnation": n.Incarnation, "timeout": n.Timeout.String(),
						"openedAt": jsonTime(n.OpenedAt), "expiresAt": jsonTime(n.ExpiresAt), "closed": n.Closed, "live": n.Live, "leases": n.Leases,
					}); err != nil {
						return err
					}
				}
				return nil
			}
			fmt.Fprintln(e.stdout, "STREAM LEASES")
			t := newTable(e.stdout, "PARTITION", "TAG", "NODE", "INCARNATION", "EPOCH", "SINCE", "UNTIL", "STATE")
			for _, l := range leases {
				t.row(l.Stream.Partition, l.Stream.Tag, l.NodeID, l.Incarnation, l.Epoch, fmtTime(l.Since), fmtTime(l.Until), leaseState(l))
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, "\nNODE SESSIONS")
			t = newTable(e.stdout, "NODE", "INCARNATION", "TIMEOUT", "OPENED", "EXPIRES", "STATE", "LEASES")
			for _, n := range nodes {
				state := "live"
				switch {
				case n.Closed:
					state = "closed"
				case !n.Live:
					state = "expired"
				}
				t.row(n.NodeID, n.Incarnation, n.Timeout, fmtTime(n.OpenedAt), fmtTime(n.ExpiresAt), state, n.Leases)
			}
			if err := t.flush(); err != nil {
				return err
			}
			live, liveNodes := 0, 0
			for _, l := range leases {
				if l.Live {
					live++
				}
			}
			for _, n := range nodes {
				if n.Live {
					liveNodes++
				}
			}
			fmt.Fprintf(e.stdout, "\n%d leases held (fencing other writers), %d lapsed (free for the next node); %d node sessions, %d live\n",
				live, len(leases)-live, len(nodes), liveNodes)
			return nil
		},
	}
}

// leaseState says whether a lease still fences other writers.
func leaseState(l pgadmin.LeaseInfo) string {
	if l.Live {
		return "live"
	}
	return "lapsed (free for the next node)"
}
