// Package rendezvous carries a short-code pairing over the LAN: the joining
// device does not have the library secret yet, so it cannot reach the
// library's private libp2p network, and meets the inviter on a plain TCP
// port the inviter opens for as long as its invitation lives.
//
// The inviter ([Open]) listens on a temporary port, with a cap on
// connections and timeouts on every step, and announces it by mDNS as
// service _danyue-pair._tcp with the code's channel number in TXT (never the
// code's words). The joiner finds it ([Browse], or an address given by hand)
// and runs [Joiner.JoinAny], a session ([Joiner.Join]) per device tried:
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
// attacker gets one guess per code.
//
// A connection that never sends a well-formed PAKE share (garbage, a port
// scanner, a wrong hello) is not a guess: it is dropped and the invitation
// stays open. Only a share tests the code, and the first share spends it.
//
// # An attacker on the LAN
//
// The channel is announced in the clear, so anyone on the LAN can spend
// (burn) a code with one wrong guess, or announce the same channel and
// answer joiners itself. Neither is prevented (one guess per code is what
// makes a 16-bit code enough); both are made visible and bounded:
//
//   - A burn is named. The invitation ends with the burner's address and
//     time (Outcome.From, At, Burned), which the inviter shows as "someone
//     at ADDR tried a wrong code". The burned code's rendezvous stays
//     announced and answers every later session, until the code would have
//     expired, with a pair.Refusal saying "spent by a failed try from ADDR
//     at TIME", so the joiner who comes with the right code learns what
//     happened instead of finding nobody. A session that sends its share and
//     stalls holds the code for at most RespondTimeout; meanwhile the
//     refusals say since when (not by whom: it might still pair), and then
//     it is a burn like any other.
//   - Repeated burns are counted (Burns, kept by the inviter across its
//     invitations): AttackBurns burns from one address within BurnWindow are
//     reported as an attack, and that address is then refused without a
//     guess until BurnWindow after its last burn, which covers the next
//     code's whole life. A first burn is never refused: a person who
//     mistyped must be able to try the next code. An attacker that changes
//     its address still burns one code per address, each named.
//   - The joiner authenticates the inviter by the PAKE itself: a fake
//     inviter fails the key confirmation (pair.ErrWrongCode at the joiner),
//     and JoinAny goes on to the other announcers of the channel, in random
//     order, one session per device, so a fake announcement cannot block the
//     real inviter. A fake learns whether its one guess at the joiner's code
//     was right, and the joiner's associated data (device id and name); the
//     joiner gives at most MaxTested such guesses per code (a fake diverts
//     it with a probability of at most MaxTested in 65,536) and talks to at
//     most MaxDevices devices. Refusals, which anyone can send, cost the
//     joiner nothing but a connection.
//
// What an attacker on the LAN can still do: burn every code it sees (named
// each time, and refused from its second burn until it changes address),
// which denies short-code pairing while it stays (a long code, which needs
// no rendezvous, is unaffected); announce the channel from many addresses,
// which fails the join, each address named, when MaxTested of them come
// before the inviter in the joiner's random order; answer the hello and
// then stall, which holds the joiner for up to SessionTimeout per
// address, MaxDevices addresses at most; hold one code for RespondTimeout;
// and learn, for the rest of a burned code's life, the address and time of
// the try that burned it.
package rendezvous
