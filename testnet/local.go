package testnet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/danyue/danyue/daemon"
)

// NewLocal starts n daemons inside this process with daemon.Start, each
// listening on a fixed loopback port, without mDNS, each given the others as
// static peers, and joins them into node1's library like New. It needs no
// privileges, for quick tests; what needs a real network (partitions, Kill,
// mDNS) fails the test in this mode. Options are those of New; DaemonArgs
// does not apply.
func NewLocal(t TB, n int, opts ...Option) *Net {
	t.Helper()
	nt := newNet(t, true, opts)
	nt.setup(n)
	return nt
}

func (n *Node) startLocal() error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(n.net.cfg.logLevel)); err != nil {
		return fmt.Errorf("log level: %w", err)
	}
	// Every other node that has ever run, at its fixed address: static peers
	// stand in for mDNS, and a node that restarts finds the others again.
	var peers []string
	for _, o := range n.net.Nodes() {
		if o != n && !n.net.cfg.noPeers {
			o.mu.Lock()
			peers = append(peers, o.addrs...)
			o.mu.Unlock()
		}
	}
	n.mu.Lock()
	offset := n.offset
	n.mu.Unlock()
	lw := &lineWriter{emit: n.emit}
	d, err := daemon.Start(context.Background(), daemon.Config{
		DataDir:     n.dir,
		Name:        n.name,
		Listen:      []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", n.port)},
		Peers:       peers,
		NoMDNS:      true,
		ClockOffset: offset,
		KeepDeleted: -1, // as --keep-deleted 0 (node.go)
		Logger:      slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: lvl})),
	})
	if err != nil {
		return fmt.Errorf("%s: start: %w", n.name, err)
	}
	n.mu.Lock()
	n.local = d
	n.startedAt = time.Now()
	n.mu.Unlock()
	return nil
}
