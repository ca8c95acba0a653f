package peer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/multiformats/go-multistream"
)

func helloBody(t testing.TB, h *wireHello) []byte {
	t.Helper()
	return frameBody(t, &wireFrame{Hello: h})
}

// startBody is a puller's Start frame.
func startBody(t testing.TB, epoch, seq uint64, have ...wireMark) []byte {
	t.Helper()
	return frameBody(t, &wireFrame{Start: &wireStart{Epoch: epoch, Seq: seq, Have: have}})
}

// futureHello is a hello as a later build might send it: with a capability
// bit and fields this build does not know.
func futureHello(t testing.TB, lib Library, dev crdt.DeviceID, extra map[uint64]any) []byte {
	t.Helper()
	h := map[uint64]any{1: lib.ID[:], 2: uint64(dev), 4: uint64(1), 6: uint64(1), 10: uint64(1) << 62, 99: "a field of the future"}
	for k, v := range extra {
		h[k] = v
	}
	return cborBody(t, map[uint64]any{1: h})
}

func TestReadHello(t *testing.T) {
	lib := newLib(t)
	id, err := lpeer.IDFromPrivateKey(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	dev := DeviceIDOf(id)
	good := &wireHello{Library: lib.ID[:], Device: uint64(dev), Name: "phone", Epoch: 7, Last: 9, WallMs: 1000, WantEpoch: 3, WantSeq: 4}
	mod := func(f func(*wireHello)) []byte {
		h := *good
		f(&h)
		return helloBody(t, &h)
	}
	errBody := func(e *wireError) []byte { return frameBody(t, &wireFrame{Error: e}) }
	h, err := readHello(helloBody(t, good), lib, id)
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "phone" || h.Epoch != 7 || h.Last != 9 || h.WantSeq != 4 || h.Wall.UnixMilli() != 1000 || h.Device != dev {
		t.Fatalf("decoded %+v", h)
	}
	// A later build's hello: its unknown fields are ignored, its
	// capability bits kept (and ignored by whoever does not know them).
	h, err = readHello(futureHello(t, lib, dev, nil), lib, id)
	if err != nil || h.Device != dev || h.Caps != 1<<62 {
		t.Fatalf("a later build's hello: %+v, %v", h, err)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"another library", mod(func(h *wireHello) { h.Library = make([]byte, 16) }), ErrOtherLibrary},
		{"short library id", mod(func(h *wireHello) { h.Library = lib.ID[:8] }), ErrOtherLibrary},
		{"device not of the peer", mod(func(h *wireHello) { h.Device++ }), ErrDeviceMismatch},
		{"wall clock past 9999", mod(func(h *wireHello) { h.WallMs = crdt.MaxWall + 1 }), ErrProtocol},
		{"name too long", mod(func(h *wireHello) { h.Name = string(make([]byte, 200)) }), ErrProtocol},
		{"a known field of the wrong type", futureHello(t, lib, dev, map[uint64]any{4: "seven"}), ErrProtocol},
		{"not a hello", errBody(nil), ErrProtocol},
		{"refused: not our library", errBody(&wireError{Code: codeLibrary, Message: "x"}), ErrOtherLibrary},
		{"refused: other", errBody(&wireError{Code: 77, Message: "no"}), ErrRefused},
		{"garbage", []byte{0xff, 0x00}, ErrProtocol},
	} {
		// Refusals end pulling from the peer until it reconnects; protocol
		// errors are retried with backoff.
		t.Run(tc.name, func(t *testing.T) {
			_, err := readHello(tc.body, lib, id)
			if !errors.Is(err, tc.want) || isRefusal(err) == errors.Is(err, ErrProtocol) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Logf("%v", err)
		})
	}
}

func TestErrorFrameRoundTrip(t *testing.T) {
	for _, err := range []error{ErrOtherLibrary, ErrDeviceMismatch, ErrProtocol} {
		f, e := decodeFrame(frameBody(t, errorFrame(err)))
		if e != nil || f.Error == nil {
			t.Fatalf("%v: %v", err, e)
		}
		got := refusal(f.Error)
		t.Logf("%v -> code %d -> %v", err, f.Error.Code, got)
		switch {
		case errors.Is(err, ErrOtherLibrary) && !errors.Is(got, ErrOtherLibrary),
			errors.Is(err, ErrDeviceMismatch) && !errors.Is(got, ErrRefused):
			t.Errorf("%v refused as %v", err, got)
		}
	}
}

func TestClockOffset(t *testing.T) {
	sent := time.UnixMilli(10_000)
	received := sent.Add(200 * time.Millisecond)
	// The peer read its clock halfway, at our 10.1 s; it said 70.1 s.
	if got := clockOffset(time.UnixMilli(70_100), sent, received); got != time.Minute {
		t.Fatalf("offset %v, want 1m", got)
	}
	if got := clockOffset(time.UnixMilli(9_100), sent, received); got != -time.Second {
		t.Fatalf("offset %v, want -1s", got)
	}
}

// rawHost is a libp2p host of the library that speaks the sync protocol by
// hand, to play a broken, hostile or future peer.
func rawHost(t *testing.T, lib Library) host.Host {
	t.Helper()
	h, start := unstartedHost(t, lib)
	if err := start(); err != nil {
		t.Fatal(err)
	}
	return h
}

// unstartedHost is a host of the library on loopback, closed when the test
// ends, and the function that starts it.
func unstartedHost(t *testing.T, lib Library) (host.Host, func() error) {
	t.Helper()
	psk, err := lib.psk()
	if err != nil {
		t.Fatal(err)
	}
	h, start, err := newHost(&Config{Identity: newKey(t), Listen: loopback}, psk, &gater{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, start
}

func writeRaw(t testing.TB, s network.Stream, body []byte) {
	if _, err := s.Write(append(header(uint32(len(body))), body...)); err != nil {
		t.Logf("raw write: %v", err)
	}
}

func readRaw(s network.Stream) (*wireFrame, error) {
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	fr := frameReader{r: s}
	body, err := fr.next()
	if err != nil {
		return nil, err
	}
	return decodeFrame(body)
}

// p2pAddrs returns h's addresses with its /p2p component.
func p2pAddrs(t testing.TB, h host.Host) []ma.Multiaddr {
	t.Helper()
	addrs, err := lpeer.AddrInfoToP2pAddrs(&lpeer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// eventLog collects a node's events.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) find(kind EventKind, err error) (Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.Kind == kind && (err == nil || errors.Is(e.Err, err)) {
			return e, true
		}
	}
	return Event{}, false
}

// A build of another sync protocol (another protocol id) meets "protocols
// not supported" before any frame, on both sides: this node's pull from it
// is refused, and its own pull finds no protocol to speak.
func TestOtherProtocolRefused(t *testing.T) {
	lib := newLib(t)
	r := rawHost(t, lib)
	const old = "/danyue/sync/6"
	r.SetStreamHandler(old, func(s network.Stream) { s.Reset() })
	a := newDevice(t, "A")
	var events eventLog
	a.start(t, lib, p2pAddrs(t, r), func(c *Config) { c.OnEvent = events.add })
	poll.Until(t, "a peer-refused event", 10*time.Second, func() bool {
		_, ok := events.find(PeerRefused, multistream.ErrNotSupported[protocol.ID]{})
		return ok
	})
	e, _ := events.find(PeerRefused, nil)
	t.Logf("event: %v", e.Err)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if s, err := r.NewStream(ctx, a.id, old); !errors.Is(err, multistream.ErrNotSupported[protocol.ID]{}) {
		if s != nil {
			s.Reset()
		}
		t.Fatalf("a stream of the old protocol: %v, want protocols not supported", err)
	}
}

// The pull side reports every kind of refusal clearly, and stops pulling
// from that peer until the next connection.
func TestRefusalsPullerSide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(t *testing.T, lib Library, r host.Host) []byte
		want  error
	}{
		{"sender refuses", func(t *testing.T, lib Library, r host.Host) []byte {
			return frameBody(t, &wireFrame{Error: &wireError{Code: codeLibrary, Message: "another library"}})
		}, ErrOtherLibrary},
		{"sender of another library", func(t *testing.T, lib Library, r host.Host) []byte {
			return helloBody(t, &wireHello{Library: make([]byte, 16), Device: uint64(DeviceIDOf(r.ID()))})
		}, ErrOtherLibrary},
		{"sender lies about its device", func(t *testing.T, lib Library, r host.Host) []byte {
			return helloBody(t, &wireHello{Library: lib.ID[:], Device: 12345})
		}, ErrDeviceMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := newLib(t)
			r := rawHost(t, lib)
			replied := make(chan *wireFrame, 4)
			r.SetStreamHandler(ProtocolID, func(s network.Stream) {
				defer s.Reset()
				if _, err := readRaw(s); err != nil {
					return
				}
				writeRaw(t, s, tc.reply(t, lib, r))
				// The puller answers a hello it refuses with an Error frame.
				if f, err := readRaw(s); err == nil {
					replied <- f
				}
			})
			a := newDevice(t, "A")
			var events eventLog
			a.start(t, lib, p2pAddrs(t, r), func(c *Config) { c.OnEvent = events.add })
			poll.Until(t, "a peer-refused event", 5*time.Second, func() bool {
				_, ok := events.find(PeerRefused, tc.want)
				return ok
			})
			e, _ := events.find(PeerRefused, tc.want)
			t.Logf("event: %v", e.Err)
			// A refusal received is not answered; a refusal decided here is.
			if tc.name != "sender refuses" {
				select {
				case f := <-replied:
					if f.Error == nil {
						t.Errorf("puller answered %+v, want an Error frame", f)
					}
				case <-time.After(5 * time.Second):
					t.Errorf("puller sent no Error frame")
				}
			}
		})
	}
}

func TestBusyIsRetried(t *testing.T) {
	err := refusal(&wireError{Code: codeBusy, Message: "too many sync streams"})
	if isRefusal(err) {
		t.Fatalf("%v ends pulling, want a retry", err)
	}
}
