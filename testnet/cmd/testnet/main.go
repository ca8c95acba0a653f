// Command testnet runs danyue's testnet scenarios on real daemons, each in
// its own network namespace on one bridged LAN, and prints a report:
// discovery time per node, convergence time after each heal, propagation
// latency, bytes exchanged, and pass or fail per scenario. It needs root and
// iproute2, like the tests of package testnet.
//
//	go run ./testnet/cmd/testnet -nodes 5 -ops 500
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/danyue/danyue/testnet"
)

func main() {
	var p testnet.Params
	flag.IntVar(&p.Nodes, "nodes", 5, "nodes of the convergence, propagation and big-heal scenarios")
	flag.IntVar(&p.Ops, "ops", 500, "random operations of the convergence scenario")
	flag.IntVar(&p.Books, "books", 10000, "books written on one side of a partition, for convergence after heal")
	flag.IntVar(&p.Writes, "writes", 100, "position writes timed by the propagation scenario")
	flag.IntVar(&p.Restarts, "restarts", 100, "restarts of a node timed by the restart scenario")
	flag.IntVar(&p.Devices, "devices", 20, "devices of the many-devices scenario, every one writing")
	flag.IntVar(&p.JoinBooks, "joinbooks", 1000, "books of the library a device joins (shared by 2, then 5, devices) in the join scenario")
	flag.IntVar(&p.PunchTries, "punches", 50, "hole punches tried by away-punch, and by away-transport per transport")
	flag.Uint64Var(&p.Seed, "seed", 0, "seed of the convergence scenario (0: random)")
	flag.BoolVar(&p.Strict, "strict", true, "fail a scenario that misses its time target (discovery 1s, p99 propagation 100ms, heal 2s)")
	verbose := flag.Bool("v", false, "print every log line, the daemons' included, as it comes")
	run := flag.String("run", "", "run only the scenarios whose name matches this `regexp`")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./testnet/cmd/testnet [flags]\n\nScenarios: %s\n\nFlags:\n", names())
		flag.PrintDefaults()
	}
	flag.Parse()
	re, err := regexp.Compile(*run)
	if err != nil || flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "testnet: bad arguments\nTry: go run ./testnet/cmd/testnet -help\n")
		os.Exit(2)
	}
	os.Exit(runAll(p.WithDefaults(), re, *verbose))
}

func runAll(p testnet.Params, re *regexp.Regexp, verbose bool) int {
	defer testnet.RemoveBinary()
	fmt.Printf("testnet: %d nodes, %d operations (seed %d), %d books, %d timed writes\n", p.Nodes, p.Ops, p.Seed, p.Books, p.Writes)
	start := time.Now()
	if _, err := testnet.Binary(); err != nil {
		fmt.Fprintf(os.Stderr, "testnet: %v\n", err)
		return 1
	}
	fmt.Printf("built danyue in %.1fs\n", time.Since(start).Seconds())
	rep := &testnet.Report{}
	failed := false
	for _, s := range testnet.Scenarios {
		if !re.MatchString(s.Name) {
			continue
		}
		fmt.Printf("%-12s ", s.Name)
		var live io.Writer
		if verbose {
			fmt.Println()
			live = os.Stdout
		}
		o := testnet.Run(s.Name, live, func(t testnet.TB) { s.Run(t, p, rep) })
		rep.Finished(o)
		switch {
		case o.Failed:
			failed = true
			fmt.Printf("FAIL (%.1fs)\n", o.Duration.Seconds())
			if !verbose {
				fmt.Printf("    last log lines:\n")
				for _, l := range tail(o.Logs, 60) {
					fmt.Printf("        %s\n", strings.ReplaceAll(l, "\n", "\n        "))
				}
			}
		case o.Skipped:
			fmt.Printf("SKIP: %s\n", strings.Join(o.Messages, "; "))
		default:
			fmt.Printf("ok (%.1fs)\n", o.Duration.Seconds())
		}
	}
	rep.Write(os.Stdout)
	fmt.Printf("\ntotal %.1fs\n", time.Since(start).Seconds())
	if failed {
		return 1
	}
	return 0
}

func tail(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func names() string {
	var s []string
	for _, sc := range testnet.Scenarios {
		s = append(s, sc.Name)
	}
	return strings.Join(s, ", ")
}
