package testnet

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Convergence: random positions (some naming the book), read time and
// deletes at random nodes while random partitions come and go. After each
// measured heal every node returns the same library; after the final heal it
// also equals the oracle computed from the log of acknowledged operations.
func Convergence(t TB, p Params, r *Report) {
	p = p.WithDefaults()
	t.Logf("convergence: %d nodes, %d operations, seed %d", p.Nodes, p.Ops, p.Seed)
	rng := rand.New(rand.NewPCG(p.Seed, p.Seed^0x5eed))
	nt := New(t, p.Nodes, QuietLogs())
	nodes := nt.Nodes()
	// Few books, so that operations collide.
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = BookKey(fmt.Sprintf("convergence %d", i))
	}
	var ops []Op
	rounds := max(4, p.Ops/40)
	for round := range rounds {
		nt.randomTopology(rng)
		n := p.Ops/rounds + boolInt(round < p.Ops%rounds)
		// A round lasts 0.5 to 2 s, its operations spread over it, so that
		// partitions last as long as a short outage does.
		pace := (500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))) / time.Duration(n)
		for i := range n {
			if i == n/2 && rng.IntN(3) == 0 {
				nt.randomTopology(rng) // partitions also change mid-round
			}
			next := time.Now().Add(pace)
			ops = append(ops, randomOp(t, rng, nodes[rng.IntN(len(nodes))], keys))
			time.Sleep(time.Until(next)) // the workload's pace, not a wait for anything
		}
		// Every other round ends with a heal measured to convergence; the
		// others go straight to the next topology.
		if round%2 == 1 && round != rounds-1 {
			nt.Heal()
			took, _ := nt.WaitConverged(healTimeout)
			r.Healed(t, fmt.Sprintf("heal after round %d (%d ops so far)", round+1, len(ops)), took, 0)
		}
	}
	nt.Heal()
	took, got := nt.WaitConverged(healTimeout)
	r.Healed(t, fmt.Sprintf("final heal (%d ops)", len(ops)), took, 0)
	oracle, err := Uncollected(Oracle(ops), got)
	if err != nil {
		t.Fatalf("nodes' books: %v", err)
	}
	want, err := Canonical(oracle)
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	if d := DiffCanonical("nodes", got, "oracle", want); d != "" {
		t.Fatalf("every node returns the same library, but it is not the oracle's (seed %d): %s", p.Seed, d)
	}
	r.Moved(t, len(nodes), nt.Traffic())
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// randomTopology heals the net, cuts one node off, or splits it in two or
// three groups, at random.
func (nt *Net) randomTopology(rng *rand.Rand) {
	nodes := nt.Nodes()
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	switch rng.IntN(4) {
	case 0:
		nt.Heal()
	case 1:
		nt.Isolate(nodes[0])
	case 2:
		cut := 1 + rng.IntN(len(nodes)-1)
		nt.Partition(nodes[:cut])
	default:
		a := 1 + rng.IntN(len(nodes)-2)
		b := a + 1 + rng.IntN(len(nodes)-a-1)
		nt.Partition(nodes[:a], nodes[a:b])
	}
}

// readTimeOp adds a random read time to key on n.
func readTimeOp(rng *rand.Rand, n *Node, key string) Op {
	ms := int64(1 + rng.IntN(600_000))
	n.AddReadTime(key, ms)
	return Op{Node: n.name, Kind: OpReadTime, Key: key, Device: n.Device(), AddMs: uint64(ms)}
}

// randomOp makes one random operation on n and returns it as acknowledged.
func randomOp(t TB, rng *rand.Rand, n *Node, keys []string) Op {
	t.Helper()
	key := keys[rng.IntN(len(keys))]
	switch x := rng.IntN(100); {
	case x < 60:
		// Offsets on a coarse grid, so that furthest sees ties.
		char := int64(rng.IntN(40)) * 500
		title := ""
		if rng.IntN(3) == 0 {
			title = fmt.Sprintf("Title %d by %s", rng.IntN(1000), n.name)
		}
		b := n.SetPosition(key, char, float64(char)/20000, title)
		// The answer is the book after the write; the write's stamp is its
		// position's, unless a remote write that orders after it merged in
		// between (then the oracle cannot know this write's stamp).
		if b.Position == nil || b.Position.Device != n.Device() || b.Position.Char != uint64(char) {
			t.Fatalf("%s: the answer to a position write does not show it: %+v", n.name, b.Position)
		}
		return Op{Node: n.name, Kind: OpPosition, Key: key, Title: title, Write: b.Position}
	case x < 85:
		return readTimeOp(rng, n, key)
	default:
		b, found := n.TryDelete(key)
		if !found {
			// This node never saw the book, so nothing was deleted (404):
			// it reads instead.
			return readTimeOp(rng, n, key)
		}
		if b.DeletedStamp == nil || !b.Deleted || b.DeletedBy == nil || *b.DeletedBy != n.Device() {
			t.Fatalf("%s: the answer to a delete does not show it: %+v", n.name, b)
		}
		return Op{Node: n.name, Kind: OpDelete, Key: key, Delete: &b}
	}
}
