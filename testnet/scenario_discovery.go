package testnet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/danyue/danyue/daemon/api"
)

// Discovery: three devices of one library, started together with mDNS as
// their only way to find each other, are all connected within a second;
// a device of another library on the same LAN is never connected and learns
// nothing.
//
// The library is provisioned first (start, invite, join), then every daemon
// is stopped; nothing about peers survives a restart but the library
// itself, so the measured start finds the others by mDNS alone.
func Discovery(t TB, p Params, r *Report) {
	nt := New(t, 3)
	members := nt.Nodes()
	stranger := nt.AddNode("stranger")
	shared, own := BookKey("discovery: the library's book"), BookKey("discovery: the stranger's own book")
	members[0].SetPosition(shared, 100, 0.1, "The library's book")
	stranger.SetPosition(own, 200, 0.2, "The stranger's own book")
	nt.WaitBook(syncTimeout, shared, "the library's book", func(b api.Book) bool { return b.Position != nil }, members...)

	nt.StopAll()
	all := nt.Nodes()
	nt.each(all, func(n *Node) error { return n.launch() })
	// Measured from each daemon's own launch (exec), polled every 5 ms, and
	// from the last member's launch: the moment all were started.
	done := make([]time.Time, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, n := range members {
		wg.Go(func() {
			_, errs[i] = Poll(10*time.Second, func() (bool, string) { return connectedTo(n, members) })
			done[i] = time.Now()
		})
	}
	wg.Wait()
	nt.each(all, (*Node).waitReady)
	first, last := all[0].StartedAt(), members[0].StartedAt()
	for _, n := range all {
		first = minTime(first, n.StartedAt())
	}
	for _, n := range members {
		last = maxTime(last, n.StartedAt())
	}
	var allDone time.Time
	for i, n := range members {
		if errs[i] != nil {
			t.Fatalf("%s: not connected to every member: %v", n.name, errs[i])
		}
		r.Discovered(t, fmt.Sprintf("%s, from its launch (at +%v)", n.name, n.StartedAt().Sub(first).Round(time.Millisecond)), done[i].Sub(n.StartedAt()))
		allDone = maxTime(allDone, done[i])
	}
	worst := allDone.Sub(last)
	r.Discovered(t, fmt.Sprintf("all %d, from the last launch", len(members)), worst)
	p.checkTime(t, "discovery", worst, TargetDiscovery, 10*time.Second)

	// The stranger: not connected, not listed, nothing learned, nothing
	// given, over several of its mDNS query rounds.
	Hold(t, 3*time.Second, func() (bool, string) { return strangerAlone(stranger, members) })
	if books := stranger.Books(); len(books) != 1 || books[0].Key != own {
		t.Errorf("the stranger's shelf changed: %+v", books)
	}
	for _, n := range members {
		for _, b := range n.Books() {
			if b.Key == own {
				t.Errorf("%s received the stranger's book", n.name)
			}
		}
	}
	if tr := stranger.Traffic(); tr.RecordsReceived != 0 || tr.RecordsSent != 0 {
		t.Errorf("the stranger exchanged records: %+v", tr)
	}
	r.Moved(t, len(all), nt.Traffic())
}

// strangerAlone reports whether the stranger lists no peer and no member
// lists the stranger.
func strangerAlone(stranger *Node, members []*Node) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	peers, err := stranger.Client().Peers(ctx)
	if err != nil {
		return false, fmt.Sprintf("stranger: peers: %v", err)
	}
	if len(peers) > 0 {
		return false, fmt.Sprintf("the stranger lists peers: %s", describePeers(peers))
	}
	for _, n := range members {
		peers, err := n.Client().Peers(ctx)
		if err != nil {
			return false, fmt.Sprintf("%s: peers: %v", n.name, err)
		}
		for _, p := range peers {
			if p.Device == stranger.Device() {
				return false, fmt.Sprintf("%s lists the stranger: %s", n.name, describePeers(peers))
			}
		}
	}
	return true, ""
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
