// Package testnet proves danyue under the conditions it meets on a real LAN:
// several devices that come and go, lose the network, crash, and disagree
// about the time. It starts real daemons and drives them only through their
// outside contract: the HTTP API on each data dir's unix socket (with the
// typed client of daemon/client) and the danyue command.
//
// # Nets
//
// New(t, n) builds one network namespace per node, node1 to nodeN, plus a
// "switch" namespace whose Linux bridge (multicast snooping off) joins the
// nodes' eth0 into one IPv4 LAN that carries multicast, so discovery runs on
// real mDNS. Each node is a `danyue daemon` process started with
// `ip netns exec`; node1 invites and the others join its library, and New
// returns once every node is connected to every other. NewLocal(t, n) starts
// the same daemons inside the test process on loopback with static peers,
// for quick tests that need no privileges; what needs a real network
// (Partition, Kill, mDNS) fails the test in that mode.
//
// Both take a TB, which *testing.T satisfies, so the scenarios run under go
// test and in the testnet command alike (Run). New skips the test unless the
// process is root with iproute2 (`ip`) installed; .ci/run installs it.
//
// # Operations
//
// On a Node: Start, Stop (SIGTERM; a clean exit is required), Kill (SIGKILL),
// Restart (same data dir), Wipe (the data dir is removed: a new device),
// SetClockOffset (DANYUE_CLOCK_OFFSET from the next start), Client, CLI (the
// danyue command with --data, inside the node's namespace), Events (the
// event stream, each event timed on arrival), and shorthands for the API
// (SetPosition, AddReadTime, Delete, Book, Books, Peers, Status) that fail
// the test on error. On the Net: Isolate, Partition and Heal move the nodes'
// ports between bridges in the switch namespace, so the nodes' own
// interfaces never change; Join, StartAll, StopAll, WaitConnected,
// WaitBook, WaitConverged, Traffic.
//
// Waiting is always WaitFor (or Poll, off the test's goroutine): a condition
// polled until a deadline, failing with the condition's last explanation.
// Hold is its negative: a condition that must stay true for a while.
//
// # Cleanup
//
// Every process, namespace and directory a Net creates is removed by
// t.Cleanup, also when the test fails or panics. If the process gets SIGINT
// or SIGTERM the harness removes them itself, then exits. Daemons get
// SIGKILL if the test process dies (Pdeathsig), and New deletes the
// namespaces and directories of earlier runs whose process is gone (their
// names carry the PID). Nothing outside namespaces created here is touched:
// not the host's interfaces, routes or sysctls. The danyue binary is built
// once per process (Binary; DANYUE_TESTNET_BIN names a prebuilt one).
//
// Every line a daemon logs goes to t.Logf prefixed with its node's name
// (QuietLogs keeps them in Node.Logs only, and shows the last lines of each
// node if the test fails).
//
// # Scenarios
//
// Scenarios are functions of a TB, Params and a Report that collects what
// they measured: Discovery, Propagation, Convergence (random operations under
// random partitions, checked against Oracle, a naive model of the merge
// rules computed from the log of acknowledged operations), ClockSkew,
// FarFutureClock, Crash, Wipe, Deletion and BigHeal. Each is a test of this package; the testnet
// command runs them all and prints the report.
//
// # The NAT lab
//
// Net.Lab turns the LAN into a home network behind a NAT router and adds
// an internet, a phone's network behind carrier-grade NAT, an office and a
// cafe behind NATs of their own and a place with no network (natlab.go);
// Lab.Move carries a running node between them. The away-* scenarios
// (AwayWrites, AwayThroughHome, AwayUnreachable, AwayStrangers,
// AwayPortMap, AwayNewAddress, AwayIdle) prove sync away from home through
// a member the internet can reach; AwayPunch has two daemons behind two
// NATs connect directly by hole punching through that member's relay, and
// AwayTransport measures libp2p's hole punching there, TCP against QUIC
// (testnet/cmd/punch), for the choice of transport. Package testnet/away
// runs them as tests, beside this package's.
package testnet
