package portmap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/huin/goupnp"
	"github.com/huin/goupnp/dcps/internetgateway2"
	natpmp "github.com/jackpal/go-nat-pmp"
	"github.com/libp2p/go-netroute"
)

// Discover finds the router of this device's network: it asks by UPnP
// (SSDP) and by NAT-PMP (at the default gateway) at once and takes the
// first that answers.
func Discover(ctx context.Context) (Router, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type found struct {
		r   Router
		err error
	}
	ch := make(chan found, 2)
	go func() { r, err := discoverUPnP(ctx); ch <- found{r, err} }()
	go func() { r, err := discoverNATPMP(ctx); ch <- found{r, err} }()
	var errs []error
	for range 2 {
		f := <-ch
		if f.err == nil {
			return f.r, nil
		}
		errs = append(errs, f.err)
	}
	return nil, errors.Join(errs...)
}

// igd is what the three WAN connection services of an Internet Gateway
// Device that goupnp knows have in common.
type igd interface {
	AddPortMappingCtx(ctx context.Context, remoteHost string, external uint16, protocol string, internal uint16, client string, enabled bool, description string, lease uint32) error
	DeletePortMappingCtx(ctx context.Context, remoteHost string, external uint16, protocol string) error
	GetExternalIPAddressCtx(ctx context.Context) (string, error)
}

type upnpRouter struct {
	c      igd
	kind   string
	host   string     // the router's control address, host:port
	client netip.Addr // this device's address towards the router
}

func discoverUPnP(ctx context.Context) (Router, error) {
	type svc struct {
		c    igd
		kind string
		sc   goupnp.ServiceClient
	}
	// The three searches run at once (each waits out the SSDP answer
	// window); the services are then taken in the order they are
	// preferred: IGDv2's, then v1's IP and PPP connections.
	var (
		wg               sync.WaitGroup
		ip2              []*internetgateway2.WANIPConnection2
		ip1              []*internetgateway2.WANIPConnection1
		ppp              []*internetgateway2.WANPPPConnection1
		err2, err1, errp error
	)
	wg.Go(func() { ip2, _, err2 = internetgateway2.NewWANIPConnection2ClientsCtx(ctx) })
	wg.Go(func() { ip1, _, err1 = internetgateway2.NewWANIPConnection1ClientsCtx(ctx) })
	wg.Go(func() { ppp, _, errp = internetgateway2.NewWANPPPConnection1ClientsCtx(ctx) })
	wg.Wait()
	var found []svc
	for _, c := range ip2 {
		found = append(found, svc{c, "UPnP IGDv2", c.ServiceClient})
	}
	for _, c := range ip1 {
		found = append(found, svc{c, "UPnP IGD", c.ServiceClient})
	}
	for _, c := range ppp {
		found = append(found, svc{c, "UPnP IGD (PPP)", c.ServiceClient})
	}
	errs := []error{err2, err1, errp}
	for _, s := range found {
		r := &upnpRouter{c: s.c, kind: s.kind, host: s.sc.Location.Host}
		var err error
		if r.client, err = localAddrTowards(r.host); err != nil {
			errs = append(errs, err)
			continue
		}
		return r, nil
	}
	if len(found) == 0 {
		errs = append(errs, errors.New("no UPnP Internet Gateway Device answered"))
	}
	return nil, fmt.Errorf("UPnP: %w", errors.Join(errs...))
}

func (r *upnpRouter) Map(ctx context.Context, internal, external int, lease time.Duration) (int, error) {
	err := r.c.AddPortMappingCtx(ctx, "", uint16(external), "TCP", uint16(internal), r.client.String(), true, "danyue", uint32(lease/time.Second))
	if err != nil {
		return 0, err
	}
	return external, nil
}

func (r *upnpRouter) Unmap(ctx context.Context, _, external int) error {
	return r.c.DeletePortMappingCtx(ctx, "", uint16(external), "TCP")
}

func (r *upnpRouter) External(ctx context.Context) (netip.Addr, error) {
	s, err := r.c.GetExternalIPAddressCtx(ctx)
	if err != nil {
		return netip.Addr{}, err
	}
	return parsePublic(s)
}

func (r *upnpRouter) String() string { return r.kind + " at " + r.host }

type natpmpRouter struct {
	c       *natpmp.Client
	gateway net.IP
}

// natpmpTimeout bounds one NAT-PMP request with its retries; the library
// waits on a blocking socket and takes no context.
const natpmpTimeout = 2 * time.Second

func discoverNATPMP(ctx context.Context) (Router, error) {
	rt, err := netroute.New()
	if err != nil {
		return nil, fmt.Errorf("NAT-PMP: the routing table: %w", err)
	}
	// The route towards any public address is the default one; no
	// packet is sent.
	_, gw, _, err := rt.Route(net.IPv4(192, 0, 2, 1))
	if err != nil || gw == nil {
		return nil, fmt.Errorf("NAT-PMP: no default gateway: %v", err)
	}
	r := &natpmpRouter{c: natpmp.NewClientWithTimeout(gw, natpmpTimeout), gateway: gw}
	if _, err := r.External(ctx); err != nil {
		return nil, fmt.Errorf("NAT-PMP at %s: %w", gw, err)
	}
	return r, nil
}

// call runs a NAT-PMP request, returning early if ctx ends first.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() { v, err := f(); ch <- res{v, err} }()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (r *natpmpRouter) Map(ctx context.Context, internal, external int, lease time.Duration) (int, error) {
	res, err := call(ctx, func() (*natpmp.AddPortMappingResult, error) {
		return r.c.AddPortMapping("tcp", internal, external, int(lease/time.Second))
	})
	if err != nil {
		return 0, err
	}
	return int(res.MappedExternalPort), nil
}

func (r *natpmpRouter) Unmap(ctx context.Context, internal, _ int) error {
	_, err := call(ctx, func() (*natpmp.AddPortMappingResult, error) {
		return r.c.AddPortMapping("tcp", internal, 0, 0)
	})
	return err
}

func (r *natpmpRouter) External(ctx context.Context) (netip.Addr, error) {
	res, err := call(ctx, r.c.GetExternalAddress)
	if err != nil {
		return netip.Addr{}, err
	}
	return parsePublic(netip.AddrFrom4(res.ExternalIPAddress).String())
}

func (r *natpmpRouter) String() string { return "NAT-PMP at " + r.gateway.String() }

// parsePublic parses the public address a router reports: an IPv4
// unicast address. A router behind another NAT reports a private one; it
// is taken as it is, as members on that larger network can still use it.
func parsePublic(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
		return netip.Addr{}, fmt.Errorf("the router reports %q as its public address", s)
	}
	return a, nil
}

// localAddrTowards returns this device's address on the route to host
// (host:port): the internal client a UPnP mapping forwards to. No packet
// is sent.
func localAddrTowards(host string) (netip.Addr, error) {
	c, err := net.Dial("udp4", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("the route to the router %s: %w", host, err)
	}
	defer c.Close()
	ap, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr(), nil
}
