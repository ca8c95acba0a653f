package library

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/danyue/danyue/crdt"
)

// A device's summaries, residues and hello can arrive at once, each
// admitting it before it is a member: every one of them must find it
// admitted, not only the one whose write added it. (A newcomer that
// refused the residues its inviter handed it, while its hello with the
// inviter was being recorded, never held the collected books' deletes.)
func TestConcurrentAdmissionsAllAdmit(t *testing.T) {
	d := openLibrary(t, "laptop", nil)
	const devices, at = 40, 8
	for i := range devices {
		id := crdt.DeviceID(0x0123456789ab0000 + uint64(i))
		var (
			wg      sync.WaitGroup
			refused atomic.Int32
		)
		for range at {
			wg.Go(func() {
				if !d.admitted(id) {
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		if n := refused.Load(); n > 0 {
			t.Fatalf("device %s: %d of %d concurrent admissions refused it", id, n, at)
		}
	}
}

// Issue 15: a device that completes a hello without being known (a device
// of an older version, which sends no member records) is added by the
// device it said hello to; a removed device's hello adds nothing.
func TestHelloAddsAnOlderDevice(t *testing.T) {
	d := openLibrary(t, "old laptop", nil)
	old := crdt.DeviceID(0x0123456789abcdef)
	d.noteHello(old)
	m, ok := d.Member(old)
	if !ok || m.AddedBy != d.Self() || m.Added.IsZero() || m.IsRemoved() {
		t.Fatalf("after its hello the older device is %+v (listed %v), want added by this device", m, ok)
	}
	if _, err := d.Forget(ctxT(t), old.String()); err != nil {
		t.Fatal(err)
	}
	if d.admitted(old) {
		t.Error("a forgotten device's word counts")
	}
	d.noteHello(old)
	if m, _ := d.Member(old); !m.IsRemoved() {
		t.Errorf("a forgotten device's hello brought it back: %+v", m)
	}
}

// Forget finds a device by id or by name, refuses this device itself, a
// name several devices have and a device the library does not know, and
// changes nothing when forgetting again.
func TestForgetFindsTheDevice(t *testing.T) {
	d := openLibrary(t, "laptop", nil)
	ctx := ctxT(t)
	phone, twin1, twin2 := crdt.DeviceID(0x1001), crdt.DeviceID(0x1002), crdt.DeviceID(0x1003)
	for id, name := range map[crdt.DeviceID]string{phone: "phone", twin1: "twin", twin2: "twin"} {
		if err := d.addMember(ctx, id, "test"); err != nil {
			t.Fatal(err)
		}
		named := mustDo(crdt.NameMember(d.ID(), crdt.Timestamp{Wall: d.wallMs(), Device: id}, name))(t)
		if err := (syncStore{d}).ApplyRemote(ctx, id, 1, 1, []crdt.Entry{named}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ref  string
		want error
	}{
		{d.Self().String(), ErrForgetSelf},
		{"laptop", ErrForgetSelf},
		{"twin", ErrAmbiguous},
		{"tablet", ErrNoMember},
		{crdt.DeviceID(0x9999).String(), ErrNoMember},
	} {
		if _, err := d.Forget(ctx, tc.ref); !errors.Is(err, tc.want) {
			t.Errorf("Forget(%q): %v, want %v", tc.ref, err, tc.want)
		}
	}
	m := mustDo(d.Forget(ctx, "phone"))(t)
	if m.ID != phone || !m.IsRemoved() || m.Removed.Device != d.Self() {
		t.Fatalf("Forget(phone) = %+v, want the phone removed by this device", m)
	}
	epoch := library(d).Epoch
	if again := mustDo(d.Forget(ctx, phone.String()))(t); again.Removed != m.Removed {
		t.Errorf("forgetting again gave %+v, want %+v", again, m)
	}
	if library(d).Epoch != epoch {
		t.Error("forgetting a forgotten device rotated the secret again")
	}
}
