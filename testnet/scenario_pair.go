package testnet

import (
	"context"
	"strings"
	"time"

	"github.com/danyue/danyue/daemon/api"
	"github.com/danyue/danyue/pair"
)

// PairShortCode: three devices, each in a library of its own, on one LAN
// with real multicast. The inviter opens a short code; a stranger who
// guesses wrong is told so and kills that code (one guess per code), and
// the inviter sees it; on a new code the joiner, typing it as a person
// would (`danyue join 7-crossover-clockwork`, found by mDNS alone), is
// paired, joins and syncs both ways; the spent code then works for nobody,
// and the stranger's library is untouched.
func PairShortCode(t TB, p Params, r *Report) {
	nt := New(t, 3, NoJoin())
	inviter, joiner, stranger := nt.Node(1), nt.Node(2), nt.Node(3)
	mine, theirs, own := BookKey("pair: the inviter's book"), BookKey("pair: the joiner's book"), BookKey("pair: the stranger's book")
	inviter.SetPosition(mine, 100, 0.1, "The inviter's book")
	joiner.SetPosition(theirs, 200, 0.2, "The joiner's book")
	stranger.SetPosition(own, 300, 0.3, "The stranger's book")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A wrong guess: both sides fail, and the code is dead.
	first := inviter.pair(ctx)
	guess := wrongWords(t, first.Code)
	res, err := stranger.CLI(ctx, "join", guess)
	if err != nil || res.Code != 1 || !strings.Contains(res.Stderr, "wrong code") {
		t.Fatalf("stranger: danyue join %s: %v, exit %d: %s%s", guess, err, res.Code, res.Stdout, res.Stderr)
	}
	if got := inviter.pairingOutcome(ctx, first.ID); got.State != api.PairingWrongCode {
		t.Fatalf("inviter after a wrong guess: %+v, want wrong_code", got)
	}
	res, err = joiner.CLI(ctx, "join", first.Code)
	if err != nil || res.Code == 0 {
		t.Fatalf("joiner: the spent code worked: %v, exit %d: %s", err, res.Code, res.Stdout)
	}
	r.Note(t, "a wrong guess failed on both sides; the right code then failed too: %s", strings.TrimSpace(res.Stderr))

	// The right code, found by mDNS.
	second := inviter.pair(ctx)
	start := time.Now()
	res, err = joiner.CLI(ctx, "join", second.Code)
	if err != nil || res.Code != 0 || !strings.Contains(res.Stdout, "Joined library") {
		t.Fatalf("joiner: danyue join %s: %v, exit %d: %s%s", second.Code, err, res.Code, res.Stdout, res.Stderr)
	}
	paired := time.Since(start)
	got := inviter.pairingOutcome(ctx, second.ID)
	if got.State != api.PairingPaired || got.Device != joiner.Device() {
		t.Fatalf("inviter: %+v, want paired with %s", got, joiner.Device())
	}
	took := nt.WaitBook(syncTimeout, theirs, "the joiner's book at the inviter", func(b api.Book) bool { return b.Position != nil }, inviter)
	nt.WaitBook(syncTimeout, mine, "the inviter's book at the joiner", func(b api.Book) bool { return b.Position != nil }, joiner)
	r.Healed(t, "paired by short code over mDNS: `danyue join CODE`", paired, 0)
	r.Note(t, "after pairing, the joiner's own book reached the inviter in %v", took.Round(time.Millisecond))

	// Spent: nobody else gets in with it, and the stranger learned nothing.
	res, err = stranger.CLI(ctx, "join", second.Code)
	if err != nil || res.Code == 0 {
		t.Fatalf("stranger: the used code worked: %v, exit %d", err, res.Code)
	}
	if books := stranger.Books(); len(books) != 1 || books[0].Key != own {
		t.Errorf("the stranger's shelf changed: %+v", books)
	}
	for _, b := range inviter.Books() {
		if b.Key == own {
			t.Errorf("the inviter received the stranger's book")
		}
	}
	r.Moved(t, 3, nt.Traffic())
}

// pair opens a short-code invitation on the node.
func (n *Node) pair(ctx context.Context) api.Pairing {
	n.net.t.Helper()
	p, err := n.c.Pair(ctx)
	if err != nil {
		n.net.t.Fatalf("%s: pair: %v", n.name, err)
	}
	return p
}

// pairingOutcome waits for an invitation to end and returns it.
func (n *Node) pairingOutcome(ctx context.Context, id string) api.Pairing {
	n.net.t.Helper()
	p, err := n.c.Pairing(ctx, id, true)
	if err != nil {
		n.net.t.Fatalf("%s: pairing %s: %v", n.name, id, err)
	}
	return p
}

// wrongWords returns code with its second word changed: the same channel,
// so the guess reaches the inviter, and the wrong words.
func wrongWords(t TB, code string) string {
	t.Helper()
	c, err := pair.ParseCode(code)
	if err != nil {
		t.Fatalf("the inviter's code %q: %v", code, err)
	}
	c.Words[1] = map[bool]string{true: "absurd", false: "aardvark"}[c.Words[1] == "aardvark"]
	return c.String()
}
