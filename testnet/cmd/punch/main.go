// Command punch measures NAT hole punching between two devices in testnet's
// NAT lab, for the choice of danyue's transport: TCP inside a private
// network (a pre-shared key, what danyue runs today) against QUIC, which
// libp2p refuses to run under a pre-shared key. It is libp2p's own
// machinery, not danyue's: circuit relay v2 on a reachable device, and
// DCUtR (direct connection upgrade through relay) between two devices
// behind NAT, which dial each other at once from their listen ports.
//
// One process per device and role:
//
//	punch -role relay  -port P                       the reachable member
//	punch -role listen -port P -relay ADDR -public IP   reserves a slot at the relay
//	punch -role dial   -port P -relay ADDR -public IP -target SEED
//
// The dialler connects to the listener through the relay and waits for
// the direct connection DCUtR makes; it prints "direct ADDR DURATION" or
// "relayed DURATION" and exits. -public is the device's public address as
// its NAT shows it: with a NAT that keeps source ports (the lab's), the
// router's address and the listen port.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "punch:", err)
		os.Exit(1)
	}
}

func run() error {
	role := flag.String("role", "", "relay, listen or dial")
	transport := flag.String("transport", "tcp", "tcp (inside a private network) or quic")
	seed := flag.String("seed", "", "the device's key is derived from SEED, so that others can name it")
	port := flag.Int("port", 4001, "listen port")
	relayAddr := flag.String("relay", "", "the relay's multiaddr, with /p2p/ID")
	public := flag.String("public", "", "this device's public IP address, as its NAT shows it")
	target := flag.String("target", "", "dial: the seed of the device to reach")
	wait := flag.Duration("wait", 10*time.Second, "dial: how long to wait for the direct connection")
	flag.Parse()

	listen := fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", *port)
	opts := []libp2p.Option{libp2p.Identity(key(*seed)), libp2p.ResourceManager(&network.NullResourceManager{})}
	switch *transport {
	case "tcp":
		// The key stands in for a library's: the lab's devices are of one.
		opts = append(opts, libp2p.Transport(tcp.NewTCPTransport), libp2p.PrivateNetwork(pnet.PSK(key32("library"))))
	case "quic":
		listen = fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", *port)
		opts = append(opts, libp2p.Transport(quic.NewTransport))
	default:
		return fmt.Errorf("-transport %q: want tcp or quic", *transport)
	}
	opts = append(opts, libp2p.ListenAddrStrings(listen), libp2p.EnableRelay())
	if *role == "relay" {
		opts = append(opts, libp2p.EnableRelayService(), libp2p.ForceReachabilityPublic())
	} else {
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return err
	}
	defer h.Close()
	fmt.Println("id", h.ID())
	ctx := context.Background()
	switch *role {
	case "relay":
		select {}
	case "listen", "dial":
	default:
		return fmt.Errorf("-role %q: want relay, listen or dial", *role)
	}
	// The addresses DCUtR offers the other side: the public one only.
	pub, err := ma.NewMultiaddr("/ip4/" + *public + listen[len("/ip4/0.0.0.0"):])
	if err != nil {
		return fmt.Errorf("-public: %w", err)
	}
	ids := h.(interface{ IDService() identify.IDService }).IDService()
	hp, err := holepunch.NewService(h, ids, func() []ma.Multiaddr { return []ma.Multiaddr{pub} })
	if err != nil {
		return err
	}
	defer hp.Close()
	r, err := peer.AddrInfoFromString(*relayAddr)
	if err != nil {
		return fmt.Errorf("-relay: %w", err)
	}
	if err := h.Connect(ctx, *r); err != nil {
		return fmt.Errorf("connect to the relay: %w", err)
	}
	if *role == "listen" {
		if _, err := client.Reserve(ctx, h, *r); err != nil {
			return fmt.Errorf("reserve: %w", err)
		}
		fmt.Println("reserved")
		select {}
	}
	return dial(ctx, h, *relayAddr, *target, *wait)
}

// dial reaches the device of seed target through the relay and reports
// whether, and how soon, a direct connection followed.
func dial(ctx context.Context, h host.Host, relayAddr, target string, wait time.Duration) error {
	tid, err := peer.IDFromPrivateKey(key(target))
	if err != nil {
		return err
	}
	circuit, err := ma.NewMultiaddr(relayAddr + "/p2p-circuit")
	if err != nil {
		return err
	}
	start := time.Now()
	if err := h.Connect(network.WithAllowLimitedConn(ctx, "punch"), peer.AddrInfo{ID: tid, Addrs: []ma.Multiaddr{circuit}}); err != nil {
		return fmt.Errorf("connect through the relay: %w", err)
	}
	for time.Since(start) < wait {
		for _, c := range h.Network().ConnsToPeer(tid) {
			if !c.Stat().Limited {
				fmt.Println("direct", c.RemoteMultiaddr(), time.Since(start))
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("relayed", time.Since(start))
	return nil
}

// key derives a device's Ed25519 key from seed.
func key(seed string) crypto.PrivKey {
	k, _, err := crypto.GenerateEd25519Key(bytes.NewReader(key32(seed)))
	if err != nil {
		panic(err) // reading from a 32-byte slice does not fail
	}
	return k
}

func key32(seed string) []byte {
	s := sha256.Sum256([]byte("punch " + seed))
	return s[:]
}
