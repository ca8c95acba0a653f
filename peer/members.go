package peer

import (
	"context"
	"fmt"

	"github.com/danyue/danyue/crdt"
	lpeer "github.com/libp2p/go-libp2p/core/peer"
)

// Who is given anything. The private network's key keeps out whoever lacks
// the secret, but the secret travels in long invite codes, so holding it
// makes no member: the daemon says who is one (Config.Member). A device
// that is not is still let connect (it may be a joiner with a ticket),
// and given nothing: its sync streams are refused with ErrNotMember,
// nothing is pulled from it, no secret is offered to it, no summary or
// residue goes to it or is taken from it. A joiner presents its invite's
// ticket in the hello of its pull from the device that made the invite
// (Config.Ticket); that device redeems it (Config.Redeem) and, the joiner
// now a member, serves the stream and starts its side (Admitted). A pull
// refused as not a member's is retried when the peer pulls from us (it
// holds us for a member then), or after the pull backoff.

// isMember reports whether device d is given anything.
func (n *Node) isMember(d crdt.DeviceID) bool {
	return n.cfg.Member == nil || n.cfg.Member(d)
}

// refusedAsStranger reports whether peer p is refused by the gater or is
// not a member: what sends of summaries, residues and offers skip.
func (n *Node) refusedAsStranger(p lpeer.ID) bool {
	return n.gater.refused(p) || !n.isMember(DeviceIDOf(p))
}

// admitPuller decides whether the puller remote, whose hello is h, is
// served: a member is; any other device only if the ticket of its hello
// makes it one. The error, wrapping ErrNotMember, says why not.
func (n *Node) admitPuller(ctx context.Context, remote lpeer.ID, h hello) error {
	d := DeviceIDOf(remote)
	if n.isMember(d) {
		return nil
	}
	why := "no device of the library has made it a member: a long invite code is redeemed only at the device that made it, which must be reachable; a code that was used, expired, was cancelled or was made before the library's secret changed works no more: ask for a new one"
	if len(h.Ticket) > 0 && n.cfg.Redeem != nil {
		err := n.cfg.Redeem(ctx, d, h.Ticket)
		if err == nil && n.isMember(d) {
			return nil
		}
		if err != nil {
			why = err.Error()
		}
	}
	return fmt.Errorf("%w: %s", ErrNotMember, why)
}

// Admitted tells the node that device d is a member now: a connection to
// it that was given nothing starts what a member's carries (our pull, the
// offer of a secret, summaries), and a device the address book knows is
// dialled there.
func (n *Node) Admitted(d crdt.DeviceID) {
	for _, k := range n.book.list() {
		if DeviceIDOf(k.Peer) == d {
			n.meet(k)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, st := range n.peers {
		if st.device == d && st.connected && st.waiting && n.isMember(d) {
			st.waiting = false
			n.log.Info("a connected device became a member; syncing with it", "peer", st.id, "device", d)
			n.startConnLocked(st)
		}
	}
}

// pokeAdmitsUs wakes a pull of ours from st that it refused as not a
// member's: st has just pulled from us, which it does only from members.
func pokeAdmitsUs(st *peerState) {
	select {
	case st.admitsUs <- struct{}{}:
	default:
	}
}
