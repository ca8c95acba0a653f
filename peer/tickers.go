package peer

import (
	"time"
	_ "unsafe" // for go:linkname
)

// libp2p's basic host re-reads the machine's listen addresses every 5 s on a
// ticker that no option configures. On an idle phone that is twelve wakeups
// a minute for addresses that change when the network does, which is rare;
// a minute between checks costs nothing a user would notice (mDNS and static
// peers carry the addresses that matter). The variable is unexported, so it
// is reached by name. A linkname to a name libp2p no longer has still links
// (it defines a new variable), so TestHostAddrsTickStillPatchesLibp2p reads
// libp2p's source and fails if the variable is gone or no longer drives the
// ticker. docs/upstream.md has the option that would replace it.
//
//go:linkname hostAddrsTick github.com/libp2p/go-libp2p/p2p/host/basic.addrChangeTickrInterval
var hostAddrsTick time.Duration

func init() { hostAddrsTick = time.Minute }
