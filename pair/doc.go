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
//
// The initiator checks Tb before it sends Ta, so a responder that does not
// know the code (someone pretending to be the inviter) learns one thing from
// a session: that its one guess was wrong. The initiator therefore fails such
// a session as [ErrWrongCode] too, whichever side did not know the code.
//
// A responder that will not test a share (its invitation is taken or has
// expired, or it refuses the initiator's address) answers with a refused
// frame whose body, a CBOR map of optional fields, says why: a [Refusal]
// (expired; used; being tested since a time; spent by a failed try from an
// address at a time; this address refused). The initiator's error is then
// that *Refusal, which is an [ErrRefused]; an older responder sends no body,
// which reads as [ReasonUnknown]. The refusal is not authenticated, and names
// only a session that already failed against the same invitation, by address
// and time, never one that paired or still may, and only while the
// invitation answers. [Invitation.RespondFrom] records who took the code.
package pair
