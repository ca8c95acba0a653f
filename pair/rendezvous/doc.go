// Package rendezvous carries a short-code pairing over the LAN: the joining
// device does not have the library secret yet, so it cannot reach the
// library's private libp2p network, and meets the inviter on a plain TCP
// port the inviter opens for as long as its invitation lives.
//
// The inviter ([Open]) listens on a temporary port, with a cap on
// connections and timeouts on every step, and announces it by mDNS as
// service _danyue-pair._tcp with the code's channel number in TXT (never the
// code's words). The joiner finds it ([Browse], or an address given by hand)
// and runs [Join]:
//
//	joiner                                  inviter
//	hello: magic, nonce Nj      <----->     hello: magic, nonce Ni
//	pair.Initiate (sid Ni||Nj)  <----->     Invitation.Respond
//	                            <------     sealed payload
//	sealed ack                  ------>
//
// The payload (the library's long invite code) and the ack are sealed with
// ChaCha20-Poly1305 under keys derived from the PAKE's key, with the session
// id and both sides' associated data as additional data, so they are bound
// to that session's transcript. An eavesdropper learns nothing; an active
// attacker gets one guess, after which the invitation is spent and the
// inviter closes the port and withdraws the announcement.
//
// A connection that never sends a well-formed PAKE share (garbage, a port
// scanner, a wrong hello) is not a guess: it is dropped and the invitation
// stays open. Only a share tests the code, and the first share spends it.
package rendezvous
