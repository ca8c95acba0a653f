// Package pair is the cryptographic core of short-code pairing: two devices
// that share only a code a person read out (see [NewCode]) agree on a strong
// key, and anyone who does not know the code learns nothing and gets one
// guess per session.
//
// The key exchange is CPace over ristretto255 with SHA-512, as the CFRG
// draft draft-irtf-cfrg-cpace-21 (Appendix B.3 gives its test vectors, kept in
// testdata/) defines it, in the initiator-responder setting: the initiator
// speaks first and both hash the transcript Ya,ADa then Yb,ADb. The group
// arithmetic is github.com/cloudflare/circl's ristretto255; nothing here
// touches curve points except through that library.
//
// [Initiate] and [Respond] run one pairing session over a stream:
//
//	initiator                               responder
//	share: Ya, ADa               ------>
//	                             <------    share+confirm: Yb, ADb, Tb
//	confirm: Ta                  ------>
//
// Tb and Ta are HMAC-SHA-512 tags under a key derived from CPace's ISK, as in
// the draft's section on key confirmation; a side that sees a wrong tag sends
// a reject frame and both return [ErrWrongCode]. The responder has tested the
// one guess the initiator made as soon as it computed its ISK, so a code is
// spent once [Respond] has read a share, whatever it returned: an
// [Invitation] keeps that rule (one session, a few minutes) for the inviter.
package pair
