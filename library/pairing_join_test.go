package library

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/danyue/danyue/pair"
	"github.com/danyue/danyue/pair/rendezvous"
)

// A join that did not pair says what each device answered, the deciding
// answer first, and takes its kind from that answer: a refusal of this
// device's address, then what the inviter said of its code, then a wrong
// code, then an unreachable address.
func TestJoinRefusal(t *testing.T) {
	code := pair.Code{Channel: 7}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	attacker, self := netip.MustParseAddr("192.0.2.66"), netip.MustParseAddr("192.0.2.10")
	isLocal := func(a netip.Addr) bool { return a == self }
	wrong := rendezvous.Attempt{Addr: "192.0.2.4:7000", Err: pair.ErrWrongCode}
	burnedBy := func(by netip.Addr) rendezvous.Attempt {
		return rendezvous.Attempt{Addr: "192.0.2.1:7000", Err: &pair.Refusal{Reason: pair.ReasonBurned, By: by, At: at}}
	}
	blocked := rendezvous.Attempt{Addr: "192.0.2.1:7000", Err: &pair.Refusal{Reason: pair.ReasonBlocked, By: self, At: at, Burns: 2}}
	unreachable := rendezvous.Attempt{Addr: "192.0.2.9:7000", Err: rendezvous.ErrUnreachable}
	proved := rendezvous.Attempt{Addr: "192.0.2.1:7000", Err: &rendezvous.ProvedError{Err: errors.New("bad payload")}}
	for _, tc := range []struct {
		name     string
		attempts []rendezvous.Attempt
		skipped  int
		kind     error
		first    string // the message starts with it
		also     []string
		not      []string
	}{
		{"only a fake", []rendezvous.Attempt{wrong}, 0, ErrWrongCode,
			"the device that answered on channel 7 did not know the code — possibly someone else on this network pretending to be the inviter (192.0.2.4)",
			[]string{"or the code was mistyped", "run `danyue invite` again"}, []string{"this code was spent"}},
		{"burned, and a fake", []rendezvous.Attempt{wrong, burnedBy(attacker)}, 0, ErrCodeSpent,
			"this code was spent by a failed try from another device at 192.0.2.66 at ",
			[]string{"someone on this network is trying to pair", "did not know the code"}, nil},
		{"burned by this device", []rendezvous.Attempt{burnedBy(self)}, 0, ErrCodeSpent,
			"this code was spent by a failed try from this device at ",
			[]string{"(a mistyped code?)"}, []string{"someone on this network"}},
		{"refused here", []rendezvous.Attempt{burnedBy(attacker), blocked}, 0, ErrRefusedHere,
			"the inviter at 192.0.2.1:7000 refuses this device's address (192.0.2.10) for now: 2 codes", nil, nil},
		{"proved, then failed", []rendezvous.Attempt{wrong, proved}, 0, ErrPairingFailed,
			"the inviter at 192.0.2.1:7000 knew the code, but the pairing failed after that: bad payload", nil, nil},
		{"unreachable", []rendezvous.Attempt{unreachable}, 0, ErrNoInviter,
			"cannot reach the inviter at 192.0.2.9:7000", nil, []string{"run `danyue invite` again"}},
		{"nothing tried", nil, 0, ErrNoInviter, "no device announcing channel 7 could be tried", nil, nil},
		{"bounded", []rendezvous.Attempt{wrong, wrong, wrong}, 2, ErrWrongCode, "the device that answered",
			[]string{"2 more devices announcing channel 7 were not tried"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := joinRefusal(code, &rendezvous.JoinError{Attempts: tc.attempts, Skipped: tc.skipped}, isLocal)
			if r.Kind != tc.kind || !strings.HasPrefix(r.Msg, tc.first) {
				t.Fatalf("refusal %v: %q, want %v starting %q", r.Kind, r.Msg, tc.kind, tc.first)
			}
			for _, s := range tc.also {
				if !strings.Contains(r.Msg, s) {
					t.Errorf("%q does not say %q", r.Msg, s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(r.Msg, s) {
					t.Errorf("%q says %q", r.Msg, s)
				}
			}
		})
	}
}
