package library

import (
	"errors"
	"testing"

	"github.com/danyue/danyue/crdt"
)

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
