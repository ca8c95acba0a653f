package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/danyue/danyue/crdt"
	"github.com/danyue/danyue/internal/poll"
	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

func helloBody(t testing.TB, h *wireHello) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := appendFrame(&buf, &wireFrame{Hello: h}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()[4:]
}

// startBody is a version 4 puller's Start frame.
func startBody(t testing.TB, epoch, seq uint64, have ...wireMark) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := appendFrame(&b, &wireFrame{Start: &wireStart{Epoch: epoch, Seq: seq, Have: have}}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()[4:]
}

// futureHello is a hello as a later version might send it: another version
// number and a field this build does not know.
func futureHello(t testing.TB, version uint64, lib Library, dev crdt.DeviceID) []byte {
	t.Helper()
	b, err := cbor.Marshal(map[uint64]any{1: map[uint64]any{0: version, 1: lib.ID[:], 2: uint64(dev), 4: uint64(1), 6: uint64(1), 99: "a field of the future"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadHello(t *testing.T) {
	lib := newLib(t)
	id, err := lpeer.IDFromPrivateKey(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	dev := DeviceIDOf(id)
	good := &wireHello{Version: ProtocolVersion, Library: lib.ID[:], Device: uint64(dev), Name: "phone", Epoch: 7, Last: 9, WallMs: 1000, WantEpoch: 3, WantSeq: 4}
	mod := func(f func(*wireHello)) []byte {
		h := *good
		f(&h)
		return helloBody(t, &h)
	}
	errBody := func(e *wireError) []byte {
		var buf bytes.Buffer
		appendFrame(&buf, &wireFrame{Error: e})
		return buf.Bytes()[4:]
	}
	h, err := readHello(helloBody(t, good), lib, id)
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "phone" || h.Epoch != 7 || h.Last != 9 || h.WantSeq != 4 || h.Wall.UnixMilli() != 1000 || h.Device != dev {
		t.Fatalf("decoded %+v", h)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"a newer version with unknown fields", futureHello(t, ProtocolVersion+1, lib, dev), ErrPeerTooNew},
		{"version 0", mod(func(h *wireHello) { h.Version = 0 }), ErrPeerTooOld},
		{"another library", mod(func(h *wireHello) { h.Library = make([]byte, 16) }), ErrOtherLibrary},
		{"short library id", mod(func(h *wireHello) { h.Library = lib.ID[:8] }), ErrOtherLibrary},
		{"device not of the peer", mod(func(h *wireHello) { h.Device++ }), ErrDeviceMismatch},
		{"wall clock past 9999", mod(func(h *wireHello) { h.WallMs = crdt.MaxWall + 1 }), ErrProtocol},
		{"name too long", mod(func(h *wireHello) { h.Name = string(make([]byte, 200)) }), ErrProtocol},
		{"unknown field in a current hello", futureHello(t, ProtocolVersion, lib, dev), ErrProtocol},
		{"not a hello", errBody(nil), ErrProtocol},
		{"refused: needs a newer build", errBody(&wireError{Code: codeVersion, MinVersion: ProtocolVersion + 1, Version: ProtocolVersion + 2}), ErrPeerTooNew},
		{"refused: the peer is older", errBody(&wireError{Code: codeVersion, MinVersion: 0, Version: 0}), ErrPeerTooOld},
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
	for _, err := range []error{
		versionError(2), versionError(0), ErrOtherLibrary, ErrDeviceMismatch, ErrProtocol,
	} {
		var buf bytes.Buffer
		if e := appendFrame(&buf, errorFrame(err)); e != nil {
			t.Fatal(e)
		}
		f, e := decodeFrame(buf.Bytes()[4:])
		if e != nil || f.Error == nil {
			t.Fatalf("%v: %v", err, e)
		}
		got := refusal(f.Error)
		t.Logf("%v -> code %d -> %v", err, f.Error.Code, got)
		// The refused side sees the mirror image of a version error: the
		// peer that finds us too new is too old for us.
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
	var hdr []byte
	if varintFrames(streamVersion(s)) {
		hdr = binary.AppendUvarint(nil, uint64(len(body)))
	} else {
		hdr = binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	}
	if _, err := s.Write(append(hdr, body...)); err != nil {
		t.Logf("raw write: %v", err)
	}
}

func readRaw(s network.Stream) (*wireFrame, error) {
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	fr := frameReader{r: s, varint: varintFrames(streamVersion(s))}
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

// A puller whose hello has a newer version is refused with an Error frame
// that says which versions the sender speaks, and the sender reports it.
func TestVersionMismatchSenderSide(t *testing.T) {
	lib := newLib(t)
	a := newDevice(t, "A")
	var events eventLog
	a.start(t, lib, nil, func(c *Config) { c.OnEvent = events.add })
	r := rawHost(t, lib)
	r.SetStreamHandler(ProtocolID, func(s network.Stream) { readRaw(s); s.Reset() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := r.Connect(ctx, lpeer.AddrInfo{ID: a.id, Addrs: a.node.host.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := r.NewStream(ctx, a.id, ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	writeRaw(t, s, futureHello(t, ProtocolVersion+1, lib, DeviceIDOf(r.ID())))
	f, err := readRaw(s)
	if err != nil {
		t.Fatal(err)
	}
	if f.Error == nil || f.Error.Code != codeVersion || f.Error.MinVersion != MinProtocolVersion || f.Error.Version != ProtocolVersion {
		t.Fatalf("reply %+v, want a version error frame", f)
	}
	t.Logf("error frame: %+v", *f.Error)
	poll.Until(t, "a peer-refused event", 5*time.Second, func() bool {
		_, ok := events.find(PeerRefused, ErrPeerTooNew)
		return ok
	})
}

// The pull side reports every kind of refusal clearly, and stops pulling
// from that peer until the next connection.
func TestRefusalsPullerSide(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(t *testing.T, lib Library, r host.Host) []byte
		want  error
	}{
		{"sender requires a newer version", func(t *testing.T, lib Library, r host.Host) []byte {
			var b bytes.Buffer
			appendFrame(&b, &wireFrame{Error: &wireError{Code: codeVersion, MinVersion: ProtocolVersion + 1, Version: ProtocolVersion + 1, Message: "upgrade"}})
			return b.Bytes()[4:]
		}, ErrPeerTooNew},
		{"sender speaks a newer version", func(t *testing.T, lib Library, r host.Host) []byte {
			return futureHello(t, ProtocolVersion+1, lib, DeviceIDOf(r.ID()))
		}, ErrPeerTooNew},
		{"sender speaks an older version", func(t *testing.T, lib Library, r host.Host) []byte {
			return helloBody(t, &wireHello{Version: 0, Library: lib.ID[:], Device: uint64(DeviceIDOf(r.ID()))})
		}, ErrPeerTooOld},
		{"sender of another library", func(t *testing.T, lib Library, r host.Host) []byte {
			return helloBody(t, &wireHello{Version: ProtocolVersion, Library: make([]byte, 16), Device: uint64(DeviceIDOf(r.ID()))})
		}, ErrOtherLibrary},
		{"sender lies about its device", func(t *testing.T, lib Library, r host.Host) []byte {
			return helloBody(t, &wireHello{Version: ProtocolVersion, Library: lib.ID[:], Device: 12345})
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
			if tc.name != "sender requires a newer version" {
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
