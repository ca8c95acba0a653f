package peer

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
)

// memberList is the members one test device holds, as the daemon's member
// set would: what Config.Member asks.
type memberList struct {
	mu  sync.Mutex
	ids map[crdt.DeviceID]bool
}

func newMemberList(ids ...crdt.DeviceID) *memberList {
	l := &memberList{ids: map[crdt.DeviceID]bool{}}
	for _, id := range ids {
		l.ids[id] = true
	}
	return l
}

func (l *memberList) has(d crdt.DeviceID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[d]
}

func (l *memberList) add(d crdt.DeviceID) {
	l.mu.Lock()
	l.ids[d] = true
	l.mu.Unlock()
}

// A device that holds the library's secret but is not a member is given
// nothing: its pulls are refused with ErrNotMember and a message it can show,
// nothing is pulled from it, and no summary goes either way. A ticket the
// member refuses changes nothing, and its reason reaches the device; the
// ticket it takes makes the device a member, and both sides sync.
func TestStrangerWithTheSecretGetsNothing(t *testing.T) {
	lib := newLib(t)
	m, s := newDevice(t, "member"), newDevice(t, "stranger")
	if err := m.store.setPosition(bookKey(1), 11); err != nil {
		t.Fatal(err)
	}
	if err := s.store.setPosition(bookKey(2), 22); err != nil {
		t.Fatal(err)
	}
	members := newMemberList(DeviceIDOf(m.id))
	var (
		ticket     atomic.Value // what the stranger presents
		redeemed   atomic.Int32
		summariesM atomic.Int32 // summaries the member took from the stranger
		summariesS atomic.Int32 // summaries the stranger took from the member
	)
	ticket.Store([]byte("wrong"))
	summary := func(d crdt.DeviceID) func() []crdt.Summary {
		return func() []crdt.Summary { return []crdt.Summary{{Device: d, Epoch: 1, Seq: 1}} }
	}
	m.start(t, lib, nil, func(c *Config) {
		c.Member = members.has
		c.Summaries = summary(DeviceIDOf(m.id))
		c.OnSummaries = func(crdt.DeviceID, []crdt.Summary) { summariesM.Add(1) }
		c.Redeem = func(_ context.Context, from crdt.DeviceID, t []byte) error {
			if !bytes.Equal(t, []byte("right")) {
				return errors.New("this invite was already used by another device")
			}
			redeemed.Add(1)
			members.add(from)
			m.node.Admitted(from)
			return nil
		}
	})
	var events eventLog
	s.start(t, lib, m.node.Addrs(), func(c *Config) {
		c.OnEvent = events.add
		c.Summaries = summary(DeviceIDOf(s.id))
		c.OnSummaries = func(crdt.DeviceID, []crdt.Summary) { summariesS.Add(1) }
		c.Ticket = func(to crdt.DeviceID) []byte {
			if to != DeviceIDOf(m.id) {
				return nil
			}
			return ticket.Load().([]byte)
		}
	})
	poll.Until(t, "the stranger to be refused", 10*time.Second, func() bool {
		_, ok := events.find(PeerRefused, ErrNotMember)
		return ok
	})
	e, _ := events.find(PeerRefused, ErrNotMember)
	if !strings.Contains(e.Err.Error(), "already used by another device") {
		t.Errorf("the refusal does not say why: %v", e.Err)
	}
	m.node.mu.Lock()
	waiting := m.node.peer(s.id).waiting
	m.node.mu.Unlock()
	if !waiting {
		t.Error("the member does not hold the stranger's connection as given nothing")
	}
	if _, ok := s.store.book(bookKey(1)); ok {
		t.Error("the stranger received the member's book")
	}
	if _, ok := m.store.book(bookKey(2)); ok {
		t.Error("the member pulled the stranger's book")
	}
	if n := summariesS.Load(); n != 0 {
		t.Errorf("the stranger received %d summaries", n)
	}
	if n := summariesM.Load(); n != 0 {
		t.Errorf("the member took %d summaries from the stranger", n)
	}
	if redeemed.Load() != 0 {
		t.Fatal("a wrong ticket was redeemed")
	}

	ticket.Store([]byte("right"))
	poll.Until(t, "both to hold both books once the ticket is redeemed", 2*time.Minute, func() bool {
		_, a := s.store.book(bookKey(1))
		_, b := m.store.book(bookKey(2))
		return a && b
	})
	if redeemed.Load() != 1 {
		t.Errorf("redeemed %d times, want once", redeemed.Load())
	}
}

// A device that becomes a member while connected (an inviter writing the
// addition of a device it paired) is synced with at once, both ways: the
// member starts its pull, and the device's pull, refused before, retries
// as soon as the member pulls from it.
func TestAdmittedStartsBothWays(t *testing.T) {
	lib := newLib(t)
	m, s := newDevice(t, "inviter"), newDevice(t, "joiner")
	if err := m.store.setPosition(bookKey(1), 11); err != nil {
		t.Fatal(err)
	}
	if err := s.store.setPosition(bookKey(2), 22); err != nil {
		t.Fatal(err)
	}
	members := newMemberList(DeviceIDOf(m.id))
	m.start(t, lib, nil, func(c *Config) { c.Member = members.has })
	var events eventLog
	s.start(t, lib, m.node.Addrs(), func(c *Config) { c.OnEvent = events.add })
	poll.Until(t, "the joiner to be refused", 10*time.Second, func() bool {
		_, ok := events.find(PeerRefused, ErrNotMember)
		return ok
	})
	members.add(DeviceIDOf(s.id))
	m.node.Admitted(DeviceIDOf(s.id))
	poll.Until(t, "both to hold both books", time.Minute, func() bool {
		_, a := s.store.book(bookKey(1))
		_, b := m.store.book(bookKey(2))
		return a && b
	})
}

// A ticket travels in the puller's hello, bounded.
func TestHelloTicket(t *testing.T) {
	lib := newLib(t)
	d := newDevice(t, "joiner")
	good := &wireHello{Library: lib.ID[:], Device: uint64(DeviceIDOf(d.id)), WallMs: 1000, Ticket: bytes.Repeat([]byte{7}, 16)}
	h, err := readHello(helloBody(t, good), lib, d.id)
	if err != nil || !bytes.Equal(h.Ticket, good.Ticket) {
		t.Fatalf("ticket %x, %v", h.Ticket, err)
	}
	long := *good
	long.Ticket = make([]byte, maxTicket+1)
	if _, err := readHello(helloBody(t, &long), lib, d.id); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a ticket over the bound: %v", err)
	}
	refused := frameBody(t, &wireFrame{Error: &wireError{Code: codeNotMember, Message: "ask for a new code"}})
	_, err = readHello(refused, lib, d.id)
	if !errors.Is(err, ErrNotMember) || isRefusal(err) || !strings.Contains(err.Error(), "ask for a new code") {
		t.Fatalf("refused as not a member: %v (a final refusal: %v)", err, isRefusal(err))
	}
}
